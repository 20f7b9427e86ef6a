#!/usr/bin/env bash
# `make page`: a local Kafka, the aggregator and two finished runs of one benchmark (so run
# against run has data), left running; prints the runs page's URL. `make page-down` stops them.
# Everything lives under .page/ (git-ignored). PAGE_HTTP=HOST:PORT picks the page's address
# (default 127.0.0.1:8080, or any free port when 8080 is taken).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=.venv/bin
state=.page
runs=(--epochs 3 --limit 100 --concurrency 8)

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pid() {  # SIGTERM the process whose pid the file holds, wait up to 10 s, then SIGKILL
  local file=$1 pid
  alive "$file" || { rm -f "$file"; return 0; }
  pid=$(cat "$file")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$file"
}

down() {
  stop_pid "$state/model.pid"
  stop_pid "$state/aggregator.pid"
  if [ -d "$state/kafka" ]; then "$bin/resultlog" kafka down --dir "$state/kafka" >/dev/null 2>&1 || true; fi
  rm -rf "$state"
  echo "page: stopped (broker, aggregator, runs' data removed)"
}

wait_for_line() {  # the first match of a sed expression in a file, within 20 s
  local file=$1 expression=$2 found=""
  for _ in $(seq 1 100); do
    found=$(sed -n "$expression" "$file" 2>/dev/null | head -n1)
    [ -n "$found" ] && { echo "$found"; return 0; }
    sleep 0.2
  done
  return 1
}

start_aggregator() {
  setsid "$bin/resultlog" aggregator --http "$1" > "$state/aggregator.out" 2> "$state/aggregator.err" < /dev/null &
  echo $! > "$state/aggregator.pid"
  wait_for_line "$state/aggregator.out" 's/^aggregator serving \(http[^ ]*\).*/\1/p'
}

up() {
  if alive "$state/aggregator.pid"; then
    echo "page: already up at $(cat "$state/url")/ (make page-down stops it)"
    return 0
  fi
  down >/dev/null
  mkdir -p "$state"
  echo "page: starting a local Kafka"
  RESULTLOG_BOOTSTRAP_SERVERS=$("$bin/resultlog" kafka up --port 0 --dir "$state/kafka")
  export RESULTLOG_BOOTSTRAP_SERVERS
  echo "export RESULTLOG_BOOTSTRAP_SERVERS=$RESULTLOG_BOOTSTRAP_SERVERS" > "$state/env"
  "$bin/resultlog" topics create

  echo "page: starting the aggregator"
  url=$(start_aggregator "${PAGE_HTTP:-127.0.0.1:8080}") || {
    [ -z "${PAGE_HTTP:-}" ] || { cat "$state/aggregator.err"; exit 1; }
    url=$(start_aggregator 127.0.0.1:0) || { cat "$state/aggregator.err"; exit 1; }
  }
  echo "$url" > "$state/url"

  echo "page: run page-a (arith, 100 questions x 3 epochs, the embedded offline model)"
  "$bin/resultlog" run arith --model demo/offline-a --run-id page-a "${runs[@]}" >/dev/null

  echo "page: run page-b (the same questions, an offline model with another seed, more wrong)"
  "$bin/resultlog" model-server --seed 7 --wrong-rate 0.2 --port-file "$state/model.port" \
    > "$state/model.out" 2>&1 < /dev/null &
  echo $! > "$state/model.pid"
  port=$(wait_for_line "$state/model.port" 'p') || { cat "$state/model.out"; exit 1; }
  RESULTLOG_API_KEY=offline "$bin/resultlog" run arith --model demo/offline-b --run-id page-b \
    --base-url "http://127.0.0.1:$port/v1" "${runs[@]}" >/dev/null
  stop_pid "$state/model.pid"

  "$bin/python" - "$url" <<'PY'
import json, sys, time, urllib.request
url = sys.argv[1]
for _ in range(100):
    runs = json.load(urllib.request.urlopen(url + "/runs"))
    if len(runs) == 2 and all(r["records"] == r["expected_records"] for r in runs):
        break
    time.sleep(0.2)
else:
    sys.exit("page: the aggregator did not serve both runs")
PY
  cat <<EOF2

The runs page:   $url/
A run:           $url/page/run/page-a/arith/demo%2Foffline-a
Run against run: $url/page/compare?a=page-a/arith/demo%2Foffline-a&b=page-b/arith/demo%2Foffline-b

CLI against this broker: source $state/env; stop everything: make page-down
EOF2
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  *) echo "usage: scripts/page.sh [up|down]" >&2; exit 2 ;;
esac
