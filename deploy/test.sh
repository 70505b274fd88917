#!/usr/bin/env bash
# `make test`, after lint and set-up: the whole suite, kept inside 60 minutes on a machine
# of two cores (CI gives 90).
#   1. In the background at the lowest CPU priority (nice 19: it gets what the tests leave
#      idle), the docker-compose tests are prepared: Docker provisioned, the images built
#      (deploy/docker/compose-test.sh --prepare-only; its log is printed after step 2).
#   2. Against one real broker (`scalefold local run`): the tests that share the machine
#      well on SCALEFOLD_TEST_WORKERS (3) pytest-xdist workers, with the scheduler core's
#      coverage and as much more patience (tests/patience.py).
#   3. At once: the tests marked `exclusive`, one at a time against a broker of their own
#      (`scalefold local run` again), and the docker-compose tests
#      (deploy/docker/compose-test.sh, on what step 1 prepared; their log is printed when
#      both are done). The exclusive five leave a third of the machine idle, and the
#      compose stack's containers take little more: Docker puts them in a cgroup of their
#      own, which shares the CPU with each of the host's busy threads as one more thread
#      (docs/testing.md, "Where CI's minutes go").
#   4. The exclusive tests marked `alone=True` (the Flink demo's agreement verdict), one
#      at a time with the machine to themselves.
# Arguments go to the pytest runs of steps 2 and 3 (the Makefile's PYTEST_ARGS), not to
# the compose tests.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BIN="$ROOT/.venv/bin"
# Three on two cores: many tests wait on the wall clock (paced produce, restarts, pauses),
# and with two workers the cores were 81 % busy over the shared half, 89 % with three
# (docs/testing.md, "Where CI's minutes go").
WORKERS="${SCALEFOLD_TEST_WORKERS:-3}"
PREPARE_LOG="$ROOT/.run/compose-prepare.log"
COMPOSE_LOG="$ROOT/.run/compose-test.log"
COVERAGE=(--cov=services/scheduler/core --cov-report=term:skip-covered)
# --durations: the slowest tests, for keeping CI (90 min) in view.
REPORT=(--durations=60)

# Every JVM the tests start (broker, Flink, Spark; services/localstack/jvm.py) compiles
# with C1 only and collects with one thread: they live a minute or two on two shared
# cores, where that takes about a quarter less CPU (docs/testing.md).
export SCALEFOLD_JVM_OPTIONS="${SCALEFOLD_JVM_OPTIONS--XX:TieredStopAtLevel=1 -XX:+UseSerialGC}"

say() { printf 'test: %s\n' "$*" >&2; }

if [ "${1:-}" = --shared ]; then  # step 2, run by `scalefold local run` below
    shift
    # Each test gets about 1/WORKERS of the machine: its hang guards wait that many times
    # as long (tests/patience.py), and so does pytest-timeout (600 s a test, pyproject).
    exec env SCALEFOLD_TEST_PATIENCE="$WORKERS" "$BIN/pytest" -n "$WORKERS" --dist loadfile \
        --timeout $((600 * WORKERS)) --exclusive skip "${COVERAGE[@]}" "${REPORT[@]}" \
        --ignore=tests/docker "$@"
fi
if [ "${1:-}" = --exclusive ]; then  # steps 3 and 4, likewise: --exclusive WHICH
    which="$2"
    shift 2
    "$BIN/pytest" --exclusive "$which" --no-cov "${REPORT[@]}" --ignore=tests/docker "$@"
    status=$?
    # 5: none of them selected (PYTEST_ARGS chose others).
    if [ "$status" = 5 ]; then exit 0; else exit "$status"; fi
fi

mkdir -p "$(dirname "$PREPARE_LOG")"
say "preparing the docker-compose tests alongside (nice 19; log: $PREPARE_LOG)"
setsid nice -n 19 deploy/docker/compose-test.sh --prepare-only >"$PREPARE_LOG" 2>&1 &
prepare=$!
# Whatever ends this script early also ends the preparation and stops the engine it
# started (if it got that far).
trap 'kill -TERM -- -"$prepare" 2>/dev/null; wait "$prepare"; deploy/docker/provision.sh engine-stop' EXIT

"$BIN/scalefold" local run -- "$0" --shared "$@"
status=$?
[ "$status" = 0 ] || exit "$status"

say "waiting for the docker-compose tests' preparation"
wait "$prepare"
prepared=$?
trap - EXIT
cat "$PREPARE_LOG" >&2
# A preparation that failed is tried again, and reported, by the run itself.
[ "$prepared" = 0 ] || say "the preparation failed (exit $prepared); compose-test.sh tries again"

say "the tests marked exclusive, one at a time, and beside them the docker-compose tests (log: $COMPOSE_LOG)"
setsid deploy/docker/compose-test.sh >"$COMPOSE_LOG" 2>&1 &
compose=$!
# Whatever ends this script early ends the compose tests too (their own trap stops
# their stacks and the engine).
trap 'kill -TERM -- -"$compose" 2>/dev/null; wait "$compose"' EXIT
"$BIN/scalefold" local run -- "$0" --exclusive beside "$@"
exclusive=$?
say "the tests marked exclusive: exit $exclusive; waiting for the docker-compose tests"
wait "$compose"
composed=$?
trap - EXIT
cat "$COMPOSE_LOG" >&2
say "the docker-compose tests: exit $composed"
say "the tests marked exclusive(alone=True), with the machine to themselves"
"$BIN/scalefold" local run -- "$0" --exclusive alone "$@"
alone=$?
say "the tests marked exclusive(alone=True): exit $alone"
[ "$exclusive" = 0 ] || exit "$exclusive"
[ "$composed" = 0 ] || exit "$composed"
exit "$alone"
