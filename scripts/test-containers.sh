#!/usr/bin/env bash
# `make test-containers`: the compose stacks and the tests' container path, for real.
#
#  1. A Docker engine: Debian's docker.io installed when dockerd is missing (as root, with apt),
#     Compose v2 when `docker compose` is missing (a Debian package when apt has one, else
#     built from the Go module proxy), and dockerd started when no engine answers (overlay2,
#     else vfs), then stopped again at the end.
#  2. Images: RESULTLOG_KAFKA_IMAGE and RESULTLOG_PYTHON_IMAGE when set; else the official
#     ones when they can be pulled; else the stand-ins of scripts/images.sh.
#  3. docker-compose.yml on free ports: a run written from the host and one from a container,
#     the aggregator's HTTP summaries equal to replay's, the aggregator never restarted.
#  4. docker-compose.secure.yml the same way over SASL_SSL, with an ACL denial.
#  5. The integration tests CONTAINER_TESTS once on a broker that testcontainers starts
#     (ryuk disabled when its image cannot be had).
# Everything it starts is removed at the end (the images stay: the next run reuses them).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=.venv/bin
work=$(mktemp -d -t resultlog-containers-XXXXXX)
project=resultlog-test-$$
dockerd_pid=""
MODEL=demo/offline-model
# A small representative part of the suite on the container's broker: the durable producer's
# round trip, topic creation and checks, the aggregator's ingest (8 tests; the whole suite
# takes ~30 minutes on 2 cores, and these took 9 minutes on a machine loaded to 17).
CONTAINER_TESTS=${CONTAINER_TESTS:-tests/resultlog/test_roundtrip.py tests/resultlog/test_topics.py tests/consumers/test_ingest.py}

say() { printf '\n== %s\n' "$*"; }
fail() { echo "test-containers: $*" >&2; exit 1; }

compose() { docker compose -p "$project" "$@"; }

cleanup() {
  set +e
  compose -f docker-compose.yml -f docker-compose.secure.yml down -v --remove-orphans >/dev/null 2>&1
  compose -f docker-compose.yml down -v --remove-orphans >/dev/null 2>&1
  local left
  left=$(docker ps -aq --filter label=org.testcontainers=true 2>/dev/null)
  [ -z "$left" ] || docker rm -f $left >/dev/null 2>&1
  if [ -n "$dockerd_pid" ]; then
    kill "$dockerd_pid" 2>/dev/null
    wait "$dockerd_pid" 2>/dev/null
    echo "stopped the dockerd this run started"
  fi
  rm -rf "$work"
}
trap cleanup EXIT

engine_answers() { docker info >/dev/null 2>&1; }

start_dockerd() {
  local driver=$1 log="$work/dockerd-$1.log"
  # Ports published without an address (testcontainers' are) go to loopback only.
  dockerd --ip 127.0.0.1 --storage-driver="$driver" >"$log" 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 60); do
    engine_answers && return 0
    kill -0 "$dockerd_pid" 2>/dev/null || break
    sleep 1
  done
  kill "$dockerd_pid" 2>/dev/null && wait "$dockerd_pid" 2>/dev/null
  dockerd_pid=""
  tail -5 "$log" >&2
  return 1
}

# Compose v2's current line (github.com/docker/compose/v5): Debian bookworm's docker-compose
# 1.29 cannot read our compose files (`name:`).
COMPOSE_MODULE=github.com/docker/compose/v5
COMPOSE_VERSION=v5.6.0
PLUGINS=/usr/local/lib/docker/cli-plugins

compose_plugin() {
  local candidate package
  for package in docker-compose-v2 docker-compose; do
    candidate=$(apt-cache policy "$package" 2>/dev/null | sed -n 's/^ *Candidate: //p')
    case "$candidate" in
      "" | "(none)" | 0.* | 1.*) ;;
      *)
        say "installing Debian's $package $candidate"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null
        docker compose version >/dev/null 2>&1 && return
        ;;
    esac
  done
  command -v go >/dev/null || fail "docker compose is missing and neither apt nor go has it"
  say "building Compose $COMPOSE_VERSION from the Go module proxy (a few minutes, once)"
  local source
  source=$(go mod download -json "$COMPOSE_MODULE@$COMPOSE_VERSION" | "$bin/python" -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
  mkdir -p "$PLUGINS"
  # Built inside its module (go install refuses a module with exclude directives).
  (cd "$source" && go build -trimpath -o "$PLUGINS/docker-compose" \
    -ldflags "-s -w -X $COMPOSE_MODULE/internal.Version=$COMPOSE_VERSION" ./cmd)
}

engine() {
  if ! command -v dockerd >/dev/null && ! engine_answers; then
    command -v apt-get >/dev/null && [ "$(id -u)" = 0 ] ||
      fail "no Docker engine and no way to install one (needs root and apt-get)"
    say "installing Debian's docker.io"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
  fi
  if ! engine_answers; then
    say "starting dockerd (stopped again at the end)"
    start_dockerd overlay2 || { echo "overlay2 failed; trying vfs"; start_dockerd vfs; } ||
      fail "dockerd did not start"
  fi
  docker compose version >/dev/null 2>&1 || compose_plugin
  echo "engine: $(docker info --format '{{.ServerVersion}} ({{.Driver}})'); $(docker compose version)"
}

can_have() { docker image inspect "$1" >/dev/null 2>&1 || timeout 120 docker pull -q "$1" >/dev/null 2>&1; }

images() {
  : "${RESULTLOG_KAFKA_IMAGE:=}" "${RESULTLOG_PYTHON_IMAGE:=}"
  if [ -z "$RESULTLOG_KAFKA_IMAGE$RESULTLOG_PYTHON_IMAGE" ]; then
    if can_have apache/kafka:4.1.1 && can_have python:3.11-slim; then
      RESULTLOG_KAFKA_IMAGE=apache/kafka:4.1.1 RESULTLOG_PYTHON_IMAGE=python:3.11-slim
    else
      say "the official images cannot be pulled: building the stand-ins (scripts/images.sh)"
      eval "$(bash scripts/images.sh)"
    fi
  fi
  export RESULTLOG_KAFKA_IMAGE RESULTLOG_PYTHON_IMAGE
  echo "images: $RESULTLOG_KAFKA_IMAGE and $RESULTLOG_PYTHON_IMAGE"
}

# A stack up on two free ports; waits (3 minutes at most) for the aggregator to be healthy.
stack_up() {
  local ports
  ports=$("$bin/python" -c 'from resultlog.broker import free_ports; print(*free_ports(2))')
  read -r RESULTLOG_KAFKA_PORT RESULTLOG_HTTP_PORT <<<"$ports"
  export RESULTLOG_KAFKA_PORT RESULTLOG_HTTP_PORT
  local started=$SECONDS
  compose "$@" up -d --build --quiet-pull >"$work/up.log" 2>&1 || { cat "$work/up.log"; fail "compose up failed"; }
  local aggregator
  aggregator=$(compose "$@" ps -q aggregator)
  for _ in $(seq 180); do
    [ "$(docker inspect -f '{{.State.Health.Status}}' "$aggregator")" = healthy ] && break
    sleep 1
  done
  [ "$(docker inspect -f '{{.State.Health.Status}}' "$aggregator")" = healthy ] ||
    { compose "$@" logs --tail 40; fail "the aggregator is not healthy after 3 minutes"; }
  echo "up in $((SECONDS - started))s: kafka on 127.0.0.1:$RESULTLOG_KAFKA_PORT, http on 127.0.0.1:$RESULTLOG_HTTP_PORT"
  echo "fold path in the image: $(compose "$@" exec -T aggregator python -c 'import resultlog; print(resultlog.fold_path())')"
}

# The aggregator's summary of a run (once it holds every record) equals replay's.
agrees() {
  local run_id=$1 summary replayed
  summary=$("$bin/python" - "http://127.0.0.1:$RESULTLOG_HTTP_PORT" "$run_id" "$MODEL" <<'PY'
import json, sys, time, urllib.parse, urllib.request
base, run_id, model = sys.argv[1:4]
url = f"{base}/runs/{run_id}/arith/{urllib.parse.quote(model, safe='')}"
for _ in range(300):
    try:
        summary = json.load(urllib.request.urlopen(url, timeout=5))
    except OSError:
        summary = {}
    if summary and summary["records"] == summary["expected_records"]:
        break
    time.sleep(0.2)
print(json.dumps(summary))
PY
)
  replayed=$("$bin/resultlog" replay --run-id "$run_id" --benchmark arith --model "$MODEL" --json)
  "$bin/python" - "$summary" "$replayed" "$run_id" <<'PY'
import json, sys
summary, replayed = (json.loads(text) for text in sys.argv[1:3])
for each in (summary, replayed):
    each.pop("as_of", None)
same = bool(summary) and summary == replayed
print(f"{sys.argv[3]}: {summary.get('records')} records; aggregator == replay: {same}")
sys.exit(0 if same else 1)
PY
}

never_restarted() {
  local restarts
  restarts=$(docker inspect -f '{{.RestartCount}}' "$(compose "$@" ps -q aggregator)")
  echo "aggregator restarts: $restarts"
  [ "$restarts" -eq 0 ] || fail "the aggregator restarted $restarts times"
}

run_args() { echo run arith --model "$MODEL" --run-id "$1" --limit 12 --epochs 2; }

plain_stack() {
  say "docker-compose.yml"
  local files=(-f docker-compose.yml)
  stack_up "${files[@]}"
  export RESULTLOG_BOOTSTRAP_SERVERS=127.0.0.1:$RESULTLOG_KAFKA_PORT
  "$bin/resultlog" $(run_args from-host) >/dev/null
  compose "${files[@]}" exec -T aggregator resultlog $(run_args from-container) >/dev/null
  agrees from-host
  agrees from-container
  never_restarted "${files[@]}"
  compose "${files[@]}" down -v >/dev/null 2>&1
  unset RESULTLOG_BOOTSTRAP_SERVERS
}

secure_stack() {
  say "docker-compose.yml + docker-compose.secure.yml (SASL_SSL, ACLs)"
  local files=(-f docker-compose.yml -f docker-compose.secure.yml) name
  "$bin/resultlog" kafka certs --dir compose/secure/tls --hostname kafka >/dev/null
  for name in RESULTLOG_BROKER_SECRET RESULTLOG_ADMIN_PASSWORD RESULTLOG_AGGREGATOR_PASSWORD \
      RESULTLOG_WORKER_PASSWORD; do
    export "$name=$("$bin/python" -c 'import secrets; print(secrets.token_urlsafe(18))')"
  done
  RESULTLOG_UID=$(id -u)
  export RESULTLOG_UID
  stack_up "${files[@]}"
  export RESULTLOG_BOOTSTRAP_SERVERS=127.0.0.1:$RESULTLOG_KAFKA_PORT \
    RESULTLOG_SECURITY_PROTOCOL=SASL_SSL RESULTLOG_SSL_CA_LOCATION=compose/secure/tls/ca.pem \
    RESULTLOG_SASL_MECHANISM=SCRAM-SHA-512 RESULTLOG_SASL_USERNAME=worker \
    RESULTLOG_SASL_PASSWORD=$RESULTLOG_WORKER_PASSWORD
  "$bin/resultlog" $(run_args from-host) >/dev/null
  compose "${files[@]}" exec -T -e RESULTLOG_SASL_USERNAME=worker \
    -e RESULTLOG_SASL_PASSWORD="$RESULTLOG_WORKER_PASSWORD" aggregator \
    resultlog $(run_args from-container) >/dev/null
  agrees from-host
  agrees from-container
  # The worker may write results but not summaries: Kafka's ACLs refuse it.
  local denied=0
  "$bin/resultlog" replay --run-id from-host --benchmark arith --model "$MODEL" --publish \
    >/dev/null 2>"$work/denied.err" || denied=$?
  grep -q "Kafka denied User:worker" "$work/denied.err" && [ "$denied" -ne 0 ] ||
    { cat "$work/denied.err"; fail "the worker published summaries: ACLs not enforced"; }
  echo "ACL: $(grep -m1 'Kafka denied' "$work/denied.err")"
  # Without TLS and SASL the broker does not answer.
  if RESULTLOG_SECURITY_PROTOCOL=PLAINTEXT timeout 60 "$bin/resultlog" status --run-id from-host \
      --benchmark arith --model "$MODEL" >/dev/null 2>&1; then
    fail "a PLAINTEXT client was served by the SASL_SSL listener"
  fi
  echo "TLS: a PLAINTEXT client is not served"
  never_restarted "${files[@]}"
  compose "${files[@]}" down -v >/dev/null 2>&1
  unset RESULTLOG_BOOTSTRAP_SERVERS RESULTLOG_SECURITY_PROTOCOL RESULTLOG_SSL_CA_LOCATION \
    RESULTLOG_SASL_MECHANISM RESULTLOG_SASL_USERNAME RESULTLOG_SASL_PASSWORD
}

container_tests() {
  say "integration tests on a testcontainers broker ($RESULTLOG_KAFKA_IMAGE)"
  local ryuk
  ryuk=$("$bin/python" -c 'from testcontainers.core.config import testcontainers_config as c; print(c.ryuk_image)')
  if ! can_have "$ryuk"; then
    echo "$ryuk cannot be had: TESTCONTAINERS_RYUK_DISABLED=true (this script removes the containers)"
    export TESTCONTAINERS_RYUK_DISABLED=true
  fi
  env -u RESULTLOG_BOOTSTRAP_SERVERS "$bin/pytest" -p no:cacheprovider -m "not faults and not slow" \
    $CONTAINER_TESTS
}

started=$SECONDS
engine
images
plain_stack
secure_stack
container_tests
echo "test-containers passed in $((SECONDS - started))s"
