#!/usr/bin/env bash
# The newcomer's tour: a local Kafka, the aggregator, a run killed part way and resumed,
# then the run's summary from the aggregator and from a replay of the topic.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=.venv/bin
work=$(mktemp -d -t resultlog-demo-XXXXXX)
aggregator_pid=""
worker_pid=""
cleanup() {
  [ -n "$worker_pid" ] && kill -9 "$worker_pid" 2>/dev/null || true
  [ -n "$aggregator_pid" ] && kill "$aggregator_pid" 2>/dev/null && wait "$aggregator_pid" 2>/dev/null || true
  "$bin/resultlog" kafka down --dir "$work/kafka" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "1. start a local Apache Kafka (KRaft) and create the topics"
RESULTLOG_BOOTSTRAP_SERVERS=$("$bin/resultlog" kafka up --port 0 --dir "$work/kafka")
export RESULTLOG_BOOTSTRAP_SERVERS
echo "bootstrap: $RESULTLOG_BOOTSTRAP_SERVERS"
"$bin/resultlog" topics create

say "2. start the aggregator service"
"$bin/resultlog" aggregator --http 127.0.0.1:0 > "$work/aggregator.out" 2> "$work/aggregator.err" &
aggregator_pid=$!
for _ in $(seq 1 100); do
  url=$(sed -n 's/^aggregator serving \(http[^ ]*\).*/\1/p' "$work/aggregator.out" | head -n1)
  [ -n "$url" ] && break
  sleep 0.2
done
[ -n "${url:-}" ] || { echo "the aggregator did not start"; cat "$work/aggregator.err"; exit 1; }
echo "aggregator: $url"

run=(run arith --model demo/offline-model --run-id demo-run --epochs 3 --limit 200 --concurrency 8)
status=(status --run-id demo-run --benchmark arith --model demo/offline-model --json)

say "3. run the built-in arith benchmark (200 questions x 3 epochs) and kill -9 it part way"
"$bin/resultlog" "${run[@]}" --json > /dev/null 2> "$work/worker.err" &
worker_pid=$!
for _ in $(seq 1 300); do
  done_pairs=$("$bin/resultlog" "${status[@]}" | "$bin/python" -c 'import json,sys; print(json.load(sys.stdin)["completed"])')
  [ "$done_pairs" -ge 200 ] && break
  sleep 0.2
done
kill -9 "$worker_pid"
wait "$worker_pid" 2>/dev/null || true
worker_pid=""
echo "killed the worker with $done_pairs or more pairs durable; what the log holds now:"
"$bin/resultlog" "${status[@]}"

say "4. run the same command again: it skips what is durable and retries what is degraded"
"$bin/resultlog" "${run[@]}"

say "5. the summary from the aggregator (GET /runs/demo-run/arith/demo%2Foffline-model)"
sleep 1
from_aggregator=$("$bin/python" - "$url" <<'PY'
import json, sys, time, urllib.request
url = sys.argv[1] + "/runs/demo-run/arith/demo%2Foffline-model"
for _ in range(50):
    summary = json.load(urllib.request.urlopen(url))
    if summary["records"] == summary["expected_records"]:
        break
    time.sleep(0.2)
print(json.dumps(summary))
PY
)
echo "$from_aggregator"

say "6. the same summary recomputed by replaying the topic"
from_replay=$("$bin/resultlog" replay --run-id demo-run --benchmark arith --model demo/offline-model --json)
echo "$from_replay"

say "7. do they agree? (every field but the freshness block as_of)"
"$bin/python" - "$from_aggregator" "$from_replay" <<'PY'
import json, sys
a, r = (json.loads(arg) for arg in sys.argv[1:3])
for s in (a, r):
    s.pop("as_of", None)
print("aggregator == replay:", a == r)
sys.exit(0 if a == r else 1)
PY
say "done: everything started here is stopped"
