#!/usr/bin/env bash
# Stop the local test infrastructure started by infra/local/start.sh (mock Kafka broker and
# clickhouse-server), by the pids recorded in the state dir, and remove the pid and env files.
# ClickHouse data stays in $INFRA_STATE_DIR/clickhouse/data until the next fresh start.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="${INFRA_STATE_DIR:-$ROOT/infra/.state}"
STOP_TIMEOUT="${STOP_TIMEOUT:-20}"
# shellcheck source=infra/local/lib.sh
source "$ROOT/infra/local/lib.sh"

if [[ ! -d "$STATE" ]]; then
  log "nothing to stop ($STATE does not exist)"
  exit 0
fi
lock_state

rm -f "$STATE/env"
stop_process "Kafka mock broker" "$STATE/kafka/pid" mock-broker TERM "$STOP_TIMEOUT"
stop_process "clickhouse-server" "$STATE/clickhouse/pid" clickhouse-server TERM "$STOP_TIMEOUT"
rm -f "$STATE/kafka/bootstrap"
log "stopped"
