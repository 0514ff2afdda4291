#!/usr/bin/env bash
# Stops or starts the clickhouse-server of infra/local/start.sh on its own config, ports and
# data, for fault tests (a restart keeps every table; start.sh would pick new ports and wipe):
#   bash infra/local/clickhouse.sh stop        SIGTERM, then waits for the process to exit
#   bash infra/local/clickhouse.sh stop --kill SIGKILL (a crash: no shutdown at all)
#   bash infra/local/clickhouse.sh start       starts it again and waits for /ping
# Environment: INFRA_STATE_DIR (default infra/.state), START_TIMEOUT (default 60), as for start.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="${INFRA_STATE_DIR:-$ROOT/infra/.state}"
CH_DIR="$STATE/clickhouse"
# shellcheck source=infra/local/lib.sh
source "$ROOT/infra/local/lib.sh"

[[ -f "$CH_DIR/config.xml" ]] || die "no ClickHouse config in $CH_DIR (run infra/local/start.sh first)"
lock_state

case "${1:-}" in
  stop)
    signal=TERM
    [[ "${2:-}" == --kill ]] && signal=KILL
    stop_process "clickhouse-server" "$CH_DIR/pid" clickhouse-server "$signal" "${STOP_TIMEOUT:-20}"
    ;;
  start)
    pid="$(readpid "$CH_DIR/pid")"
    if alive "$pid" clickhouse-server; then log "clickhouse-server already running (pid $pid)"; exit 0; fi
    start_clickhouse "${START_TIMEOUT:-60}" || die "clickhouse-server did not come back (logs in $CH_DIR/log)"
    cpid="$(cat "$CH_DIR/pid")"
    # The env file names the new pid; the URL is unchanged.
    [[ -f "$STATE/env" ]] && sed -i "s/^export INFRA_CLICKHOUSE_PID=.*/export INFRA_CLICKHOUSE_PID=$cpid/" "$STATE/env"
    log "clickhouse-server answers /ping on port $(clickhouse_http_port) (pid $cpid)"
    ;;
  *) echo "usage: $0 stop [--kill] | start" >&2; exit 2 ;;
esac
