# Shared by infra/local/*.sh (sourced, not run): logging, pid checks, detached starts and the
# clickhouse-server start that start.sh and clickhouse.sh both use. Expects STATE to be set.

log() { printf '[infra] %s\n' "$*" >&2; }
die() { printf '[infra] ERROR: %s\n' "$*" >&2; exit 1; }

# alive PID NAME: the pid exists and is the expected program (guards against pid reuse).
alive() {
  local pid="$1" name="$2"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$name"
}
readpid() { [[ -f "$1" ]] && cat "$1" || true; }

# lock_state: one infra script at a time per state dir (fd 9; children must not inherit it).
lock_state() {
  if [[ "${INFRA_LOCK_HELD:-0}" != 1 ]]; then
    exec 9>"$STATE/.lock"
    flock -w 120 9 || die "could not lock $STATE/.lock"
  fi
}

# start_detached PIDFILE STDOUT STDERR CMD...: run CMD in its own session, detached from our
# stdin/stdout (so `$(start.sh)` does not wait for it), and record its pid.
start_detached() {
  local pidfile="$1" out="$2" err="$3"; shift 3
  rm -f "$pidfile"
  # 9>&- : the child must not inherit the lock fd, or it would hold the lock forever
  setsid bash -c 'echo $$ > "$0"; exec "$@"' "$pidfile" "$@" </dev/null >"$out" 2>"$err" 9>&- &
  local i
  for i in $(seq 50); do [[ -s "$pidfile" ]] && return 0; sleep 0.1; done
  die "could not start $1"
}

# clickhouse_http_port: the HTTP port written in $CH_DIR/config.xml.
clickhouse_http_port() {
  sed -n 's:.*<http_port>\([0-9]*\)</http_port>.*:\1:p' "$CH_DIR/config.xml"
}

# start_clickhouse TIMEOUT: starts clickhouse-server on $CH_DIR/config.xml (its ports, its data)
# and waits for /ping. Returns 1 if it exits or does not answer in time (it is then stopped).
start_clickhouse() {
  local timeout="$1" bin http cpid deadline
  bin="$(command -v clickhouse-server || true)"
  [[ -n "$bin" ]] || die "clickhouse-server not found (apt-get install -y clickhouse-server)"
  http="$(clickhouse_http_port)"
  start_detached "$CH_DIR/pid" "$CH_DIR/log/stdout.log" "$CH_DIR/log/stderr.log" \
    "$bin" --config-file="$CH_DIR/config.xml"
  cpid="$(cat "$CH_DIR/pid")"
  deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)); do
    [[ "$(curl -s --max-time 2 "http://127.0.0.1:$http/ping" || true)" == Ok* ]] && return 0
    alive "$cpid" clickhouse-server || return 1
    sleep 0.2
  done
  if alive "$cpid" clickhouse-server; then kill -TERM "$cpid" 2>/dev/null || true; sleep 2; fi
  return 1
}

# stop_process LABEL PIDFILE PROGRAM SIGNAL TIMEOUT: signal the recorded pid, wait for it to exit
# (SIGKILL after TIMEOUT seconds), remove the pid file.
stop_process() {
  local label="$1" pidfile="$2" name="$3" signal="$4" timeout="$5" pid
  pid="$(readpid "$pidfile")"
  if alive "$pid" "$name"; then
    log "stopping $label (pid $pid, SIG$signal)"
    kill -"$signal" "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + timeout))
    while alive "$pid" "$name" && ((SECONDS < deadline)); do sleep 0.1; done
    if alive "$pid" "$name"; then
      log "$label did not stop in ${timeout}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.5
    fi
    log "$label stopped"
  elif [[ -n "$pid" ]]; then
    log "$label (pid $pid) was not running"
  fi
  rm -f "$pidfile"
}
