#!/usr/bin/env bash
# Takes the Kafka mock broker started by infra/local/start.sh down or up, for fault tests:
#   bash infra/local/kafka.sh down   every broker closes its connections and refuses new ones
#   bash infra/local/kafka.sh up     every broker accepts connections again
# The broker process keeps running, so the data it holds in memory stays (killing it would lose
# everything). It is told by a signal (SIGUSR1 down, SIGUSR2 up; see infra/kafka-mock/mock-broker.c)
# and this script returns once the broker has logged that the change is applied.
# Environment: INFRA_STATE_DIR (default infra/.state), as for start.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="${INFRA_STATE_DIR:-$ROOT/infra/.state}"
# shellcheck source=infra/local/lib.sh
source "$ROOT/infra/local/lib.sh"

case "${1:-}" in
  down) signal=USR1 ;;
  up) signal=USR2 ;;
  *) echo "usage: $0 down|up" >&2; exit 2 ;;
esac
pid="$(readpid "$STATE/kafka/pid")"
alive "$pid" mock-broker || die "no Kafka mock broker running for $STATE (start it with infra/local/start.sh)"
broker_log="$STATE/kafka/broker.log"
confirmed_before="$(grep -c "^mock-broker: brokers $1\$" "$broker_log" || true)"
kill -"$signal" "$pid"
for _ in $(seq 100); do
  confirmed="$(grep -c "^mock-broker: brokers $1\$" "$broker_log" || true)"
  ((confirmed > confirmed_before)) && { log "Kafka mock broker $1 (pid $pid)"; exit 0; }
  grep -q "^mock-broker: brokers $1: " "$broker_log" && die "$(grep "^mock-broker: brokers $1: " "$broker_log" | tail -n 1)"
  sleep 0.05
done
die "the Kafka mock broker (pid $pid) did not confirm '$1' within 5 s (see $broker_log)"
