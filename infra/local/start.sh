#!/usr/bin/env bash
# Start the local test infrastructure without Docker:
#   - a Kafka-protocol broker made of librdkafka's mock cluster (infra/kafka-mock/mock-broker.c)
#   - Debian's clickhouse-server (18.16) with a generated minimal config
# Both listen on 127.0.0.1 only, on free ports, and run detached in the background.
#
# stdout carries only the `export ...` lines (so `eval "$(bash infra/local/start.sh)"` works);
# progress goes to stderr. The same lines are written to $INFRA_STATE_DIR/env.
# Idempotent: if both processes are already running, it just prints the env.
# Fault tests stop and restart the parts in place: infra/local/kafka.sh down|up (the broker keeps
# its data) and infra/local/clickhouse.sh stop|start (same ports, same data).
#
# What it keeps (this is test infrastructure, not a place for data you want back):
#   - the Kafka log lives in the mock broker's memory only (librdkafka's mock cluster has no disk
#     storage): stop.sh, a crash or a reboot loses every topic. While the broker runs, a second
#     start.sh reuses it (and ClickHouse) as they are, so to keep both, leave them running.
#   - ClickHouse's tables are on disk in $INFRA_STATE_DIR/clickhouse/data, but a fresh start (the
#     processes were not running) wipes them, because the log they were built from is gone and the
#     projections' checkpoints would point past its end. KEEP_CLICKHOUSE_DATA=1 keeps them anyway
#     (for a look at old tables; the service then sees checkpoints ahead of the new, empty log).
#   For data that survives restarts use the embedded mode (SQLite in DATA_DIR) or real Kafka:
#   docker compose -f infra/docker-compose.yml up (volumes for Kafka and ClickHouse).
#
# Environment:
#   INFRA_STATE_DIR   state dir (default: infra/.state)
#   TOPICS            topics to pre-create, "name:partitions ..." (default: "messages:4 presence:4 usage:4")
#   KAFKA_MOCK_BROKERS number of mock brokers (default: 1)
#   KEEP_CLICKHOUSE_DATA=1  keep ClickHouse data from a previous run (default: wiped on every fresh
#                     start, because the mock broker is in-memory and starts empty each time)
#   START_TIMEOUT     seconds to wait for each service (default: 60)
set -euo pipefail

if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  # The header comment above, without the leading "# ".
  sed -n '2,/^set -euo pipefail/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
  exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
INFRA="$ROOT/infra"
STATE="${INFRA_STATE_DIR:-$INFRA/.state}"
BUILD="$INFRA/.build"
TOPICS="${TOPICS:-messages:4 presence:4 usage:4}"
KAFKA_MOCK_BROKERS="${KAFKA_MOCK_BROKERS:-1}"
START_TIMEOUT="${START_TIMEOUT:-60}"
MOCK_SRC="$INFRA/kafka-mock/mock-broker.c"
MOCK_BIN="$BUILD/mock-broker"
CH_DIR="$STATE/clickhouse"
KAFKA_DIR="$STATE/kafka"

mkdir -p "$STATE"
STATE="$(cd "$STATE" && pwd)"
CH_DIR="$STATE/clickhouse"
KAFKA_DIR="$STATE/kafka"
# shellcheck source=infra/local/lib.sh
source "$INFRA/local/lib.sh"

# One start.sh/stop.sh at a time per state dir.
lock_state

# --- already running? -------------------------------------------------------------------
kpid="$(readpid "$KAFKA_DIR/pid")"
cpid="$(readpid "$CH_DIR/pid")"
if [[ -f "$STATE/env" ]] && alive "$kpid" mock-broker && alive "$cpid" clickhouse-server; then
  log "already running (mock broker pid $kpid, clickhouse pid $cpid); env in $STATE/env"
  cat "$STATE/env"
  exit 0
fi
if alive "$kpid" mock-broker || alive "$cpid" clickhouse-server; then
  log "only part of the infrastructure is running; restarting all of it"
  INFRA_LOCK_HELD=1 INFRA_STATE_DIR="$STATE" bash "$INFRA/local/stop.sh" >&2
fi
rm -f "$STATE/env"

# --- tools ------------------------------------------------------------------------------
command -v curl >/dev/null || die "curl is required (apt-get install -y curl)"
command -v clickhouse-server >/dev/null || die "clickhouse-server not found (apt-get install -y clickhouse-server)"

# --- build the mock broker ----------------------------------------------------------------
mkdir -p "$BUILD"
if [[ ! -x "$MOCK_BIN" || "$MOCK_SRC" -nt "$MOCK_BIN" ]]; then
  [[ -f /usr/include/librdkafka/rdkafka_mock.h ]] ||
    die "librdkafka/rdkafka_mock.h missing (apt-get install -y librdkafka-dev gcc)"
  command -v gcc >/dev/null || die "gcc missing (apt-get install -y gcc)"
  log "building $MOCK_BIN"
  gcc -O2 -Wall -o "$MOCK_BIN.tmp.$$" "$MOCK_SRC" -lrdkafka >&2
  mv -f "$MOCK_BIN.tmp.$$" "$MOCK_BIN"
fi

# --- free ports ---------------------------------------------------------------------------
# Prints N free TCP ports on 127.0.0.1 (held open together while choosing, so they differ).
free_ports() {
  local n="$1"
  if command -v python3 >/dev/null; then
    python3 - "$n" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
  else
    local out=() p
    while ((${#out[@]} < n)); do
      p=$((20000 + RANDOM % 40000))
      [[ " ${out[*]} " == *" $p "* ]] && continue
      # connection refused => nobody listens there
      if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then out+=("$p"); fi
    done
    echo "${out[*]}"
  fi
}

# --- Kafka mock broker --------------------------------------------------------------------
mkdir -p "$KAFKA_DIR"
read -r -a topic_args <<<"$TOPICS"
log "starting Kafka mock broker (librdkafka $(dpkg-query -W -f='${Version}' librdkafka1 2>/dev/null || echo '?'), ${KAFKA_MOCK_BROKERS} broker(s), topics: $TOPICS)"
start_detached "$KAFKA_DIR/pid" "$KAFKA_DIR/bootstrap" "$KAFKA_DIR/broker.log" \
  "$MOCK_BIN" -b "$KAFKA_MOCK_BROKERS" "${topic_args[@]}"
kpid="$(cat "$KAFKA_DIR/pid")"

# --- ClickHouse ---------------------------------------------------------------------------
write_clickhouse_config() {
  local http="$1" tcp="$2"
  cat >"$CH_DIR/config.xml" <<EOF
<?xml version="1.0"?>
<!-- generated by infra/local/start.sh -->
<yandex>
  <logger>
    <level>information</level>
    <log>$CH_DIR/log/clickhouse-server.log</log>
    <errorlog>$CH_DIR/log/clickhouse-server.err.log</errorlog>
    <size>100M</size>
    <count>2</count>
  </logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>$http</http_port>
  <tcp_port>$tcp</tcp_port>
  <!-- no interserver_http_port: no replication, nothing else listens -->
  <path>$CH_DIR/data/</path>
  <tmp_path>$CH_DIR/tmp/</tmp_path>
  <user_files_path>$CH_DIR/user_files/</user_files_path>
  <format_schema_path>$CH_DIR/format_schemas/</format_schema_path>
  <users_config>$CH_DIR/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mark_cache_size>268435456</mark_cache_size>
  <uncompressed_cache_size>268435456</uncompressed_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
  <keep_alive_timeout>10</keep_alive_timeout>
</yandex>
EOF
  cat >"$CH_DIR/users.xml" <<'EOF'
<?xml version="1.0"?>
<!-- generated by infra/local/start.sh: user "default", no password, localhost only -->
<yandex>
  <profiles>
    <default>
      <max_memory_usage>2000000000</max_memory_usage>
      <load_balancing>random</load_balancing>
    </default>
  </profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas>
    <default>
      <interval>
        <duration>3600</duration>
        <queries>0</queries><errors>0</errors><result_rows>0</result_rows>
        <read_rows>0</read_rows><execution_time>0</execution_time>
      </interval>
    </default>
  </quotas>
</yandex>
EOF
}

if [[ "${KEEP_CLICKHOUSE_DATA:-0}" != 1 && -d "$CH_DIR/data" ]]; then
  log "wiping previous ClickHouse data in $CH_DIR/data (KEEP_CLICKHOUSE_DATA=1 keeps it)"
  rm -rf "$CH_DIR/data" "$CH_DIR/tmp"
fi
mkdir -p "$CH_DIR"/{data,tmp,user_files,format_schemas,log}

ch_version="$(dpkg-query -W -f='${Version}' clickhouse-server 2>/dev/null || echo '?')"
ch_ok=0
for attempt in 1 2 3; do
  read -r http_port tcp_port <<<"$(free_ports 2)"
  write_clickhouse_config "$http_port" "$tcp_port"
  log "starting clickhouse-server $ch_version on 127.0.0.1 http=$http_port tcp=$tcp_port (attempt $attempt)"
  if start_clickhouse "$START_TIMEOUT"; then ch_ok=1; break; fi
  log "clickhouse-server did not come up; last log lines:"
  tail -n 15 "$CH_DIR/log/clickhouse-server.err.log" "$CH_DIR/log/stderr.log" 2>/dev/null >&2 || true
  # Only a port race is worth retrying.
  grep -qsi 'address already in use' "$CH_DIR/log/clickhouse-server.err.log" "$CH_DIR/log/stderr.log" || break
done
if ((!ch_ok)); then
  INFRA_LOCK_HELD=1 INFRA_STATE_DIR="$STATE" bash "$INFRA/local/stop.sh" >&2 || true
  die "clickhouse-server failed to start (logs in $CH_DIR/log)"
fi
cpid="$(cat "$CH_DIR/pid")"
log "clickhouse-server answers /ping (pid $cpid)"

# --- wait for the broker's bootstrap line ---------------------------------------------------
bootstrap=""
deadline=$((SECONDS + START_TIMEOUT))
while ((SECONDS < deadline)); do
  bootstrap="$(head -n 1 "$KAFKA_DIR/bootstrap" 2>/dev/null || true)"
  [[ "$bootstrap" == *:* ]] && break
  bootstrap=""
  alive "$kpid" mock-broker || break
  sleep 0.1
done
if [[ -z "$bootstrap" ]]; then
  tail -n 20 "$KAFKA_DIR/broker.log" >&2 || true
  INFRA_LOCK_HELD=1 INFRA_STATE_DIR="$STATE" bash "$INFRA/local/stop.sh" >&2 || true
  die "Kafka mock broker did not print its bootstrap servers"
fi
# The port is open as soon as the line is printed; check anyway.
kport="${bootstrap%%,*}"; kport="${kport##*:}"
if ! (exec 3<>"/dev/tcp/127.0.0.1/$kport") 2>/dev/null; then
  INFRA_LOCK_HELD=1 INFRA_STATE_DIR="$STATE" bash "$INFRA/local/stop.sh" >&2 || true
  die "Kafka mock broker not reachable on $bootstrap"
fi
log "Kafka mock broker listening on $bootstrap (pid $kpid)"

# --- env ------------------------------------------------------------------------------------
cat >"$STATE/env.tmp" <<EOF
export KAFKA_BROKERS=$bootstrap
export KAFKA_MOCK=1
export CLICKHOUSE_URL=http://127.0.0.1:$http_port
export CLICKHOUSE_TCP_PORT=$tcp_port
export INFRA_STATE_DIR=$STATE
export INFRA_KAFKA_PID=$kpid
export INFRA_CLICKHOUSE_PID=$cpid
EOF
mv -f "$STATE/env.tmp" "$STATE/env"
log "ready; env written to $STATE/env"
cat "$STATE/env"
