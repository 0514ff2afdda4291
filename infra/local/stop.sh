#!/usr/bin/env bash
# Stop the local test infrastructure started by infra/local/start.sh (mock Kafka broker and
# clickhouse-server), by the pids recorded in the state dir, and remove the pid and env files.
# ClickHouse data stays in $INFRA_STATE_DIR/clickhouse/data until the next fresh start.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="${INFRA_STATE_DIR:-$ROOT/infra/.state}"
STOP_TIMEOUT="${STOP_TIMEOUT:-20}"

log() { printf '[infra] %s\n' "$*" >&2; }

if [[ ! -d "$STATE" ]]; then
  log "nothing to stop ($STATE does not exist)"
  exit 0
fi
if [[ "${INFRA_LOCK_HELD:-0}" != 1 ]]; then
  exec 9>"$STATE/.lock"
  flock -w 120 9 || { log "could not lock $STATE/.lock"; exit 1; }
fi

alive() {
  local pid="$1" name="$2"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$name"
}

# stop_one LABEL PIDFILE PROGRAM
stop_one() {
  local label="$1" pidfile="$2" name="$3" pid
  pid="$( [[ -f "$pidfile" ]] && cat "$pidfile" || true)"
  if alive "$pid" "$name"; then
    log "stopping $label (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while alive "$pid" "$name" && ((SECONDS < deadline)); do sleep 0.2; done
    if alive "$pid" "$name"; then
      log "$label did not stop in ${STOP_TIMEOUT}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.5
    fi
    log "$label stopped"
  elif [[ -n "$pid" ]]; then
    log "$label (pid $pid) was not running"
  fi
  rm -f "$pidfile"
}

rm -f "$STATE/env"
stop_one "Kafka mock broker" "$STATE/kafka/pid" mock-broker
stop_one "clickhouse-server" "$STATE/clickhouse/pid" clickhouse-server
rm -f "$STATE/kafka/bootstrap"
log "stopped"
