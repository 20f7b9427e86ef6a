#!/usr/bin/env bash
# Every benchmark, each printing our figures next to its raw baseline, on one local broker.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d -t resultlog-bench-XXXXXX)
trap '.venv/bin/resultlog kafka down --dir "$work" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
RESULTLOG_BOOTSTRAP_SERVERS=$(.venv/bin/resultlog kafka up --port 0 --dir "$work")
export RESULTLOG_BOOTSTRAP_SERVERS
for bench in codec resume replay aggregator_latency scale; do
  printf '\n== benchmarks/%s.py\n' "$bench"
  .venv/bin/python -m "benchmarks.$bench"
done
