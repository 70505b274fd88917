#!/usr/bin/env bash
# `make compose-test`: run tests/docker against docker-compose.yml for real.
#   1. as root, provision what is missing (deploy/docker/provision.sh): Debian's docker.io
#      and debootstrap, Compose v2 (built once from its Go module, cached), dockerd (data-root
#      in the cache, so images persist between runs), the debootstrapped base image
#   2. build the images (SCALEFOLD_IMAGES=debian unless set: no container registry needed),
#      the Flink ones (deploy/docker/flink.yml) from the jars `provision.sh flink` stages
#   3. run tests/docker with pytest-docker
#   4. always: `down -v` the test projects and stop dockerd if step 1 started it
# With --prepare-only it does 1 and 2 and leaves the engine running for a later run
# (`make test` prepares alongside the rest of the suite: deploy/test.sh).
# Without root and without an engine it says what to install, and the tests skip with
# that reason.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
PROVISION="$ROOT/deploy/docker/provision.sh"
PYTEST="${PYTEST:-$ROOT/.venv/bin/pytest}"
PREPARE_ONLY=0
if [ "${1:-}" = --prepare-only ]; then PREPARE_ONLY=1; shift; fi
export SCALEFOLD_COMPOSE_PROJECT="${SCALEFOLD_COMPOSE_PROJECT:-sf-test-$$}"
export SCALEFOLD_IMAGES="${SCALEFOLD_IMAGES:-debian}"
if [ "$SCALEFOLD_IMAGES" = debian ]; then export SCALEFOLD_PIP_NO_INDEX=1; fi
export COMPOSE_PROGRESS="${COMPOSE_PROGRESS:-plain}"

say() { printf 'compose-test: %s\n' "$*" >&2; }
stamp() { printf '%s' "$(date +%s)"; }
START=$(stamp)

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    # A Compose build still running (an earlier step failed) finishes and is cached.
    if [ -n "${compose:-}" ]; then wait "$compose" 2>/dev/null; fi
    if [ "$PREPARE_ONLY" = 1 ] && [ "$status" = 0 ]; then
        say "prepared in $(($(stamp) - START)) s; the engine stays up for the tests"
        exit 0
    fi
    if timeout 20 docker info >/dev/null 2>&1; then
        for project in "$SCALEFOLD_COMPOSE_PROJECT" "$SCALEFOLD_COMPOSE_PROJECT-3b"; do
            COMPOSE_PROFILES=three-brokers timeout 300 docker compose -p "$project" \
                down -v --remove-orphans --timeout 10 >/dev/null 2>&1 || true
        done
        # The secured and the Flink stacks' services and volumes are named in their
        # override files only (the secured stack's test runs the secured Flink too).
        for override in secure:flink:secure-flink flink; do
            files=()
            for file in ${override//:/ }; do files+=(-f "deploy/docker/$file.yml"); done
            timeout 300 docker compose -f docker-compose.yml "${files[@]}" \
                -p "$SCALEFOLD_COMPOSE_PROJECT-${override%%:*}" \
                down -v --remove-orphans --timeout 10 >/dev/null 2>&1 || true
        done
    fi
    "$PROVISION" engine-stop || status=1
    say "done in $(($(stamp) - START)) s (exit $status)"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$(id -u)" = 0 ]; then
    "$PROVISION" packages || exit 1
    # Building Compose (CPU) overlaps with starting the engine and debootstrap (network).
    "$PROVISION" compose &
    compose=$!
    "$PROVISION" engine-start || exit 1
    if [ "$SCALEFOLD_IMAGES" = debian ]; then
        "$PROVISION" base && "$PROVISION" wheels || exit 1
    fi
    "$PROVISION" flink || exit 1
    wait "$compose" || exit 1
fi
if "$PROVISION" check; then
    if [ "$SCALEFOLD_IMAGES" = debian ] && [ "$(id -u)" != 0 ]; then
        "$PROVISION" base || { say "no base image; or use SCALEFOLD_IMAGES=registry"; exit 1; }
        "$PROVISION" wheels || exit 1
    fi
    [ "$(id -u)" = 0 ] || "$PROVISION" flink || exit 1
    say "building the images (SCALEFOLD_IMAGES=$SCALEFOLD_IMAGES)"
    built=$(stamp)
    # With the Flink stack's file: its JobManager and TaskManager image too.
    docker compose -f docker-compose.yml -f deploy/docker/flink.yml build --quiet 2>&1 \
        | grep -v "buildx isn't installed" >&2
    [ "${PIPESTATUS[0]}" = 0 ] || { say "docker compose build failed"; exit 1; }
    say "images built in $(($(stamp) - built)) s"
else
    say "tests/docker will skip: install the above (or run \`make compose-test\` as root)"
fi
[ "$PREPARE_ONLY" = 1 ] && exit 0
# A test here waits for Spark applications and container restarts: minutes, not seconds.
"$PYTEST" --no-cov -p no:cacheprovider -ra --durations=15 --timeout=2400 tests/docker "$@"
