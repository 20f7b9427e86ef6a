#!/usr/bin/env bash
# Every benchmark on one launcher broker, each printing our figures next to a baseline of the
# same run and the goal; then the hot path's benchmarks once more on the pure-Python twins
# (RESULTLOG_PURE_PYTHON=1), whose figures the table shows in its twin column; then one table
# of every figure, also written to the documentation's performance page
# (docs/_generated/bench.md). `--quick`: 100k records only, shorter windows.
# A benchmark module not present on this branch is named and skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
quick=false
[[ "${1:-}" == "--quick" ]] && quick=true
work=$(mktemp -d -t resultlog-bench-XXXXXX)
trap '.venv/bin/resultlog kafka down --dir "$work" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
results="$work/results.jsonl"
export RESULTLOG_BENCH_RESULTS="$results"
shared_topic="bench-shared-$$"
twin_topic="bench-twin-$$"
# The twins' pass: the benchmarks of the hot path, each with its own arguments unless named
# here. Its replay fills a topic of its own (the shared one holds resume's run by then); fold
# memory is per record and does not need 100k.
twin_modules=(fold_decode replay resume aggregator_latency ingest rebuild fold_memory peer_quix)
twin_replay_args=(--records 100000 --topic "$twin_topic")
twin_rebuild_args=(--records 100000) twin_memory_args=(--records 20000)

if $quick; then
  echo "make bench-quick: about 12 minutes on an idle 2-core machine (100k records, short" \
    "windows; the twins' pass about 4 of them)"
  replay_args=(--records 100000 --topic "$shared_topic")
  resume_args=(--others 100000 --others-topic "$shared_topic")
  twin_resume_args=(--others 100000 --others-topic "$twin_topic")
  latency_args=(--rates 1000,10000 --seconds 5)
  ingest_args=(--records 100000)
  write_args=(--rounds 2)
  rebuild_args=(--records 100000) peer_args=(--records 100000) memory_args=() fold_args=()
  history_args=(--others 0,100000,300000)
  fold_cost_args=(--fold-cost 50000,200000 --new 20000 --settle 30)
  failover_args=(--records 100000)
  commands_args=(--others 100000)
  modules=(cli_startup one_run_commands codec fold_decode replay resume aggregator_latency ingest rebuild fold_memory
    peer_quix write_path shared_budget history failover)
  twin_counts="at the same counts (fold memory at 20k records)"
else
  echo "make bench: about 50 minutes on an idle 2-core machine (100k, 1M and 3M records;" \
    "scale-out; the twins' pass about 7 of them)"
  replay_args=(--records 100000,1000000 --topic "$shared_topic" --profile)
  resume_args=(--others 1000000 --others-topic "$shared_topic")
  # The main pass's 1M others are read again, not written again (resume writes its run once more).
  twin_resume_args=(--others 1000000 --others-topic "$shared_topic")
  latency_args=(--rates 1000,10000 --seconds 15)
  ingest_args=(--records 200000)
  write_args=(--rounds 3 --profile)
  rebuild_args=(--records 100000,1000000) peer_args=(--records 100000) memory_args=() fold_args=()
  history_args=(--others 0,1000000,3000000)
  fold_cost_args=(--fold-cost 250000,1000000)
  failover_args=(--records 1100000)
  commands_args=(--others 1000000)
  modules=(cli_startup one_run_commands codec fold_decode replay resume aggregator_latency ingest rebuild fold_memory
    peer_quix write_path shared_budget scale history failover)
  twin_counts="at 100k records only for replay and rebuild (no twin figure at 1M), fold memory \
at 20k"
fi
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)
echo "machine: $(nproc) cores, load average $load_at_start (1, 5, 15 min)"
fold_path=$(.venv/bin/python -c 'import resultlog; print(resultlog.fold_path())')
echo "fold path: $fold_path"

missing=()
for module in "${modules[@]}"; do
  [[ -f "benchmarks/$module.py" ]] || missing+=("$module")
done
if ((${#missing[@]})); then
  echo "not on this branch, skipped: ${missing[*]}"
fi

if ! RESULTLOG_BOOTSTRAP_SERVERS=$(.venv/bin/resultlog kafka up --port 0 --dir "$work"); then
  echo "the benchmark broker did not start" >&2
  exit 1
fi
export RESULTLOG_BOOTSTRAP_SERVERS
started=$SECONDS
failed=0

args_of() {  # MODULE: its arguments in the main pass, into `args`
  case "$1" in
    replay) args=("${replay_args[@]}") ;;
    resume) args=("${resume_args[@]}") ;;
    aggregator_latency) args=("${latency_args[@]}") ;;
    ingest) args=("${ingest_args[@]}") ;;
    write_path) args=("${write_args[@]}") ;;
    rebuild) args=("${rebuild_args[@]}") ;;
    peer_quix) args=("${peer_args[@]}") ;;
    fold_memory) args=("${memory_args[@]}") ;;
    fold_decode) args=("${fold_args[@]}") ;;
    history) args=("${history_args[@]}") ;;
    failover) args=("${failover_args[@]}") ;;
    one_run_commands) args=("${commands_args[@]}") ;;
    *) args=() ;;
  esac
}

twin_args_of() {  # MODULE: its arguments in the twins' pass, into `args`
  args_of "$1"
  case "$1" in
    replay) args=("${twin_replay_args[@]}") ;;
    resume) args=("${twin_resume_args[@]}") ;;
    rebuild) args=("${twin_rebuild_args[@]}") ;;
    fold_memory) args=("${twin_memory_args[@]}") ;;
  esac
}

measure() {  # NAME MODULE ARGS...: run one benchmark; a failure becomes a row named NAME
  local name=$1 module=$2
  shift 2
  printf '\n== %s: benchmarks/%s.py %s (at %ds)\n' "$name" "$module" "$*" $((SECONDS - started))
  .venv/bin/python -m "benchmarks.$module" "$@"
  local status=$?
  if ((status != 0)); then
    failed=$((failed + 1))
    .venv/bin/python -m benchmarks._results "$results" --failed "$name" "exit $status"
  fi
}

for module in "${modules[@]}"; do
  [[ -f "benchmarks/$module.py" ]] || continue
  args_of "$module"
  measure "$module" "$module" "${args[@]}"
  if [[ "$module" == history ]]; then  # what folding costs as history grows: its own pass
    measure "history fold cost" history "${fold_cost_args[@]}"
  fi
done

if [[ "$fold_path" == compiled* ]]; then
  printf '\nThe hot path again on its pure-Python twins (RESULTLOG_PURE_PYTHON=1), %s\n' \
    "$twin_counts"
  twin_note="twin: the same benchmark on the pure-Python twins (RESULTLOG_PURE_PYTHON=1) in this \
run, $twin_counts; a goal is judged on the compiled figure."
  for module in "${twin_modules[@]}"; do
    [[ -f "benchmarks/$module.py" ]] || continue
    twin_args_of "$module"
    RESULTLOG_PURE_PYTHON=1 measure "$module (pure-Python twin)" "$module" "${args[@]}"
  done
else
  printf '\nNo twins pass: the main pass ran the pure-Python twins already\n'
  twin_note="twin: none, the fold path was not compiled."
fi

printf '\nAll figures (%ds; load average now %s; on a shared machine they are upper bounds)\n\n' \
  $((SECONDS - started)) "$(cut -d' ' -f1-3 /proc/loadavg)"
mode="make bench"
$quick && mode="make bench-quick (100k records, short windows)"
context="Written by $mode on $(date -u '+%Y-%m-%d %H:%M UTC') at commit \
$(git rev-parse --short HEAD 2>/dev/null || echo unknown): $(nproc) cores, load average \
$load_at_start at the start and $(cut -d' ' -f1-3 /proc/loadavg) at the end (1, 5, 15 min), \
$((SECONDS - started)) s, fold path $fold_path. On a shared machine times are upper bounds and rates lower bounds; \
ratios compare figures of the same run. $twin_note"
.venv/bin/python -m benchmarks._results "$results" --markdown docs/_generated/bench.md \
  --context "$context"
exit $((failed > 0))
