#!/usr/bin/env bash
# Provision what `docker compose` needs on a machine of ours, as root, once:
#   packages  Debian's docker.io (dockerd), debootstrap
#   compose   Compose v2 (`docker compose`), built from its Go module and cached
#   engine    dockerd with --iptables=false and its data-root in the cache, so images
#             (and BuildKit's cache) persist between runs on the same machine
#   base      the base image of every scalefold image when no registry is reachable:
#             Debian bookworm from debootstrap with Python, a JRE and this machine's
#             CA bundle (what pip is configured with), imported as scalefold-base:bookworm
#   wheels    a wheelhouse of the project's Python packages for the image builds
#   flink     the Flink image's jars, from the local stack's apache-flink-libraries wheel
#
# Usage: provision.sh check | packages | compose | engine-start | engine-stop | base | wheels | flink
# `check` prints what is missing and exits 0 only when an engine and Compose v2 answer.
# Every step is idempotent; `make compose-test` runs them in order (deploy/docker/compose-test.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CACHE="${SCALEFOLD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/scalefold}"
DOCKER_CACHE="$CACHE/docker"
COMPOSE_VERSION="${COMPOSE_VERSION:-v2.40.3}"
COMPOSE_BIN="$DOCKER_CACHE/compose-$COMPOSE_VERSION/docker-compose"
PLUGIN="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins/docker-compose"
ENGINE_DIR="$DOCKER_CACHE/engine"       # data-root: images, volumes, build cache
ENGINE_RUN="$DOCKER_CACHE/run"          # exec-root, pid file, log, "we started it" marker
BASE_IMAGE="${SCALEFOLD_BASE_IMAGE:-scalefold-base:bookworm}"
WHEELHOUSE="${SCALEFOLD_WHEELHOUSE:-$CACHE/wheelhouse}"

say() { printf 'provision: %s\n' "$*" >&2; }
is_root() { [ "$(id -u)" = 0 ]; }

engine_up() { timeout 20 docker info >/dev/null 2>&1; }
compose_up() { timeout 20 docker compose version >/dev/null 2>&1; }

check() {
    local missing=0
    command -v docker >/dev/null || { say "missing: the docker CLI (apt-get install docker.io)"; missing=1; }
    if ! engine_up; then
        say "missing: a running Docker engine (as root: apt-get install docker.io, then"
        say "         $0 engine-start; or start your own dockerd)"
        missing=1
    fi
    if ! compose_up; then
        say "missing: Compose v2, the \`docker compose\` plugin (Docker's docker-compose-plugin"
        say "         package, or as root: $0 compose, which builds it with Go)"
        missing=1
    fi
    return $missing
}

packages() {
    local want=()
    command -v dockerd >/dev/null || want+=(docker.io)
    command -v debootstrap >/dev/null || want+=(debootstrap)
    [ ${#want[@]} = 0 ] && return 0
    is_root || { say "not root: install ${want[*]} with apt-get"; return 1; }
    say "apt-get install ${want[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
}

# Compose v2 is a Go module; `go install` refuses it (its go.mod has exclude directives),
# so download the module through the Go module proxy and build its ./cmd (3-6 min on
# 2 cores, once; the binary is cached under $DOCKER_CACHE).
compose() {
    if [ ! -x "$COMPOSE_BIN" ]; then
        command -v go >/dev/null || { say "Go is needed to build Compose v2"; return 1; }
        local work
        work="$(mktemp -d)"
        say "building Compose $COMPOSE_VERSION from its Go module (once; a few minutes)"
        (
            export GOPATH="$work/gopath" GOMODCACHE="$work/gopath/pkg/mod" GOFLAGS=-mod=mod
            dir="$(cd "$work" && go mod download -json "github.com/docker/compose/v2@$COMPOSE_VERSION" \
                | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
            cp -r "$dir" "$work/src" && chmod -R u+w "$work/src"
            cd "$work/src"
            CGO_ENABLED=0 go build -trimpath -o "$work/docker-compose" \
                -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" ./cmd
            mkdir -p "$(dirname "$COMPOSE_BIN")"
            mv "$work/docker-compose" "$COMPOSE_BIN"
        )
        chmod -R u+w "$work" && rm -rf "$work"  # the module cache is read-only
    fi
    mkdir -p "$(dirname "$PLUGIN")"
    if ! cmp -s "$COMPOSE_BIN" "$PLUGIN" 2>/dev/null; then
        install -m 0755 "$COMPOSE_BIN" "$PLUGIN"
    fi
    say "$(docker compose version)"
}

engine_start() {
    if engine_up; then
        say "a Docker engine is already running; using it"
        engine_renice
        return 0
    fi
    is_root || { say "not root: cannot start dockerd; start a Docker engine"; return 1; }
    command -v dockerd >/dev/null || { say "dockerd is missing (apt-get install docker.io)"; return 1; }
    mkdir -p "$ENGINE_DIR" "$ENGINE_RUN"
    say "starting dockerd (data-root $ENGINE_DIR, log $ENGINE_RUN/dockerd.log)"
    # --iptables=false: our machines cannot load iptables rules; published ports work
    # through docker-proxy on 127.0.0.1 and containers reach each other on the bridge.
    setsid dockerd --iptables=false --ip-masq=false \
        --data-root "$ENGINE_DIR" --exec-root "$ENGINE_RUN/exec" \
        --pidfile "$ENGINE_RUN/dockerd.pid" \
        >>"$ENGINE_RUN/dockerd.log" 2>&1 </dev/null &
    echo $! >"$ENGINE_RUN/started-by-us"
    local deadline=$((SECONDS + 60))
    until engine_up; do
        if ! kill -0 "$(cat "$ENGINE_RUN/started-by-us")" 2>/dev/null; then
            say "dockerd exited; last lines of its log:"; tail -20 "$ENGINE_RUN/dockerd.log" >&2
            rm -f "$ENGINE_RUN/started-by-us"; return 1
        fi
        [ $SECONDS -lt $deadline ] || { say "dockerd did not answer in 60 s"; return 1; }
        sleep 0.5
    done
    say "dockerd is up ($(docker version --format '{{.Server.Version}}'))"
}

# An engine we started at a lower CPU priority (`make test` prepares the images at nice 19,
# alongside the rest of the suite) gets this shell's priority back, and so does every
# container it starts from now on.
engine_renice() {
    local marker="$ENGINE_RUN/started-by-us"
    [ -f "$marker" ] && is_root || return 0
    local pids i=0
    pids=("$(cat "$marker")")  # dockerd and its descendants (containerd, ...)
    while [ $i -lt ${#pids[@]} ]; do
        # shellcheck disable=SC2207
        pids+=($(ps -o pid= --ppid "${pids[$i]}" || true))
        i=$((i + 1))
    done
    renice -n "$(nice)" -p "${pids[@]}" >/dev/null || true
}

# Stops the engine only if engine-start started it.
engine_stop() {
    local marker="$ENGINE_RUN/started-by-us"
    [ -f "$marker" ] || return 0
    local pid
    pid="$(cat "$marker")"
    if kill -0 "$pid" 2>/dev/null; then
        say "stopping dockerd (pid $pid)"
        kill -TERM "$pid"
        local deadline=$((SECONDS + 60))
        while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
        if kill -0 "$pid" 2>/dev/null; then
            say "dockerd did not stop in 60 s; killing it"
            kill -KILL "$pid"
        fi
    fi
    rm -f "$marker"
}

# The CA bundle pip is configured with: TLS to the package registries goes through it here.
ca_bundle() {
    local from_pip
    from_pip="$(pip config list 2>/dev/null | sed -n "s/^global\.cert='\(.*\)'$/\1/p" | head -1)"
    for candidate in "$from_pip" "${PIP_CERT:-}" "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt; do
        if [ -n "$candidate" ] && [ -f "$candidate" ]; then echo "$candidate"; return 0; fi
    done
    return 1
}

base() {
    if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
        say "$BASE_IMAGE is there"
        return 0
    fi
    is_root || { say "not root: debootstrap needs root to make $BASE_IMAGE"; return 1; }
    command -v debootstrap >/dev/null || { say "debootstrap is missing"; return 1; }
    local dir bundle
    dir="$(mktemp -d)"
    bundle="$(ca_bundle)" || { say "no CA bundle found"; return 1; }
    say "debootstrap bookworm into $dir (once; 1-3 minutes)"
    debootstrap --variant=minbase \
        --include=python3,python3-venv,python3-pip,ca-certificates,openjdk-17-jre-headless,procps \
        bookworm "$dir" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$dir.log" 2>&1 \
        || { tail -20 "$dir.log" >&2; rm -rf "$dir" "$dir.log"; return 1; }
    cp "$bundle" "$dir/etc/ssl/certs/ca-certificates.crt"
    # Java (Maven, in the image builds) reads its own keystore, made from the same CAs.
    if [ -f /etc/ssl/certs/java/cacerts ]; then
        cp /etc/ssl/certs/java/cacerts "$dir/etc/ssl/certs/java/cacerts"
    fi
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    tar -C "$dir" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
    rm -rf "$dir" "$dir.log"
    say "imported $BASE_IMAGE"
}

# The project's Python dependencies as wheels, so the image builds install them with
# --no-index instead of downloading pyspark's ~450 MB (measured: 4.7 min here) on every
# cold build. `pip wheel` reuses the host's pip cache, which `make venv` has just filled,
# and builds pyspark's wheel from its sdist once.
wheels() {
    local stamp="$WHEELHOUSE/.pyproject.sha"
    local want
    want="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        say "wheelhouse $WHEELHOUSE is current"
        link_wheels
        return 0
    fi
    local python="${PYTHON:-$ROOT/.venv/bin/python}"
    [ -x "$python" ] || python=python3
    say "filling the wheelhouse $WHEELHOUSE"
    mkdir -p "$WHEELHOUSE"
    # Only the runtime dependencies: the images do not carry the test tools.
    PIP_FIND_LINKS="" "$python" -m pip wheel --quiet --wheel-dir "$WHEELHOUSE" \
        "$ROOT" pip setuptools wheel
    rm -f "$WHEELHOUSE"/scalefold-*
    echo "$want" >"$stamp"
    link_wheels
}

# Into the build context (hard links: the cache and the work tree share a disk here).
link_wheels() {
    local into="$ROOT/deploy/docker/wheels"
    rm -f "$into"/*.whl
    cp -l "$WHEELHOUSE"/*.whl "$into"/ 2>/dev/null || cp "$WHEELHOUSE"/*.whl "$into"/
}

# The Flink image's parts (deploy/docker/flink.yml) from the same apache-flink-libraries
# wheel the local stack runs: services/localstack/flinkdist.py fetches and unpacks it once
# into the cache (329 MB from PyPI). Only flink-dist and log4j go into the build context
# (hard links, like the wheels), and conf/, written by deploy/docker/flink-conf.py from the
# local stack's settings (BashJavaUtils' memory flags computed here, not in the build).
flink() {
    local python="${PYTHON:-$ROOT/.venv/bin/python}"
    local home into="$ROOT/deploy/docker/flink-dist"
    home="$(cd "$ROOT" && "$python" -c 'import os, sys
from services.localstack.flinkdist import flink_home
from services.localstack.layout import cache_dir
print(flink_home(cache_dir(os.environ), lambda line: print(line, file=sys.stderr)))')" || return 1
    mkdir -p "$into/lib"
    local jar to want=()
    for jar in "$home"/lib/flink-dist-*.jar "$home"/lib/log4j-api-*.jar "$home"/lib/log4j-core-*.jar \
        "$home"/lib/log4j-slf4j-impl-*.jar "$home"/lib/log4j-1.2-api-*.jar; do
        [ -f "$jar" ] || { say "missing in $home: $jar"; return 1; }
        to="$into/lib/$(basename "$jar")"
        want+=("$to")
        [ "$jar" -ef "$to" ] || { rm -f "$to"; cp -l "$jar" "$to" 2>/dev/null || cp -p "$jar" "$to"; }
    done
    for jar in "$into"/lib/*.jar; do  # another version's jars go
        [[ " ${want[*]} " == *" $jar "* ]] || rm -f "$jar"
    done
    (cd "$ROOT" && "$python" deploy/docker/flink-conf.py "$home" "$into/conf") || return 1
    say "Flink's jars and conf/ are staged in $into"
}

case "${1:-}" in
    check) check ;;
    packages) packages ;;
    compose) compose ;;
    engine-start) engine_start ;;
    engine-stop) engine_stop ;;
    base) base ;;
    wheels) wheels ;;
    flink) flink ;;
    *) sed -n '2,17p' "$0" >&2; exit 2 ;;
esac
