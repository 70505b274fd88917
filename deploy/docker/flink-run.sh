#!/bin/sh
# The Flink image's entrypoint (deploy/docker/flink.yml): one JVM, started the way the local
# stack starts it (services/localstack/flink.py), with conf/ written at build time
# (deploy/docker/flink-conf.py). Flink logs to the console: `docker compose logs jobmanager`.
#   flink-run.sh jobmanager|taskmanager [-D key=value ...]
# FLINK_TASK_SLOTS sets a TaskManager's slots (the configuration's default: 1).
# FLINK_REST_TLS_DIR (the secured stack, deploy/docker/secure-flink.yml): a directory of
# `scalefold local material` (flink-rest.p12, its password, flink-rest-truststore.p12);
# the JobManager's REST endpoint then serves TLS (security.ssl.rest.*). The password goes
# into a private copy of conf/ (mode 0600), never onto a command line: Flink logs its
# configuration with the values of keys holding "password" masked, and its arguments
# whole.
set -eu
FLINK_HOME=/opt/flink
CONF="$FLINK_HOME/conf"
# As services/localstack/flinkconf.py's tls_entries: TLS 1.2 with ECDHE-ECDSA-AES-GCM
# suites (the keys are EC P-256; Flink's default suite needs RSA and SHA-1).
rest_tls_conf() {
    tls="$1"
    password="$(cat "$tls/flink-rest.password")"
    private="$(mktemp -d)"
    cp "$CONF"/* "$private"/
    chmod 600 "$private/config.yaml"
    rest=security.ssl.rest
    {
        echo "security.ssl.protocol: TLSv1.2"
        echo "security.ssl.algorithms: TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
        echo "$rest.enabled: true"
        echo "$rest.keystore: $tls/flink-rest.p12"
        echo "$rest.keystore-password: \"$password\""
        echo "$rest.key-password: \"$password\""
        echo "$rest.truststore: $tls/flink-rest-truststore.p12"
        echo "$rest.truststore-password: \"$password\""
    } >>"$private/config.yaml"
    CONF="$private"
}
if [ -n "${FLINK_REST_TLS_DIR:-}" ]; then
    rest_tls_conf "$FLINK_REST_TLS_DIR"
fi
role="${1:-}"
[ $# -gt 0 ] && shift
case "$role" in
    jobmanager)
        kind=jm
        main=org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint
        ;;
    taskmanager)
        kind=tm
        main=org.apache.flink.runtime.taskexecutor.TaskManagerRunner
        # Reachable on the compose network by its address; named by its container's
        # hostname, so `/taskmanagers` says which container is which.
        address="$(python3 -c 'import socket; print(socket.gethostbyname(socket.gethostname()))')"
        set -- -D "taskmanager.host=$address" -D "taskmanager.resource-id=${HOSTNAME:-$(cat /etc/hostname)}" "$@"
        if [ -n "${FLINK_TASK_SLOTS:-}" ]; then
            set -- -D "taskmanager.numberOfTaskSlots=$FLINK_TASK_SLOTS" "$@"
        fi
        ;;
    *)
        echo "usage: $0 jobmanager|taskmanager [-D key=value ...]" >&2
        exit 2
        ;;
esac
# A JVM that exits while starting is started again, at most twice: on a machine at load 40
# a JobManager exited in its first minute (Pekko's Remoting.start waits 10 s, which Flink's
# configuration does not reach: services/localstack/flinkconf.py), and `docker compose up
# --wait` fails at once on an exited container, even one its restart policy would restart.
# Later exits are the restart policy's. SIGTERM (docker stop) goes to the JVM.
STARTING_SECONDS=120
attempt=1
while :; do
    begun=$(date +%s)
    # The flag files hold one word a line, none with a space: word splitting is meant.
    # shellcheck disable=SC2046
    java $(cat "$CONF/jvm-opens") $(cat "$CONF/$kind.jvm") \
        "-Dlog4j.configurationFile=file:$CONF/log4j-console.properties" \
        -cp "$FLINK_HOME/lib/*" "$main" --configDir "$CONF" $(cat "$CONF/$kind.dynamic") "$@" &
    child=$!
    trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; exit 143' TERM INT
    status=0
    wait "$child" || status=$?
    trap - TERM INT
    lived=$(($(date +%s) - begun))
    if [ "$status" = 0 ] || [ "$lived" -ge "$STARTING_SECONDS" ] || [ "$attempt" -ge 3 ]; then
        exit "$status"
    fi
    attempt=$((attempt + 1))
    echo "flink-run: the $role's JVM exited ($status) after $lived s, while starting; attempt $attempt of 3" >&2
done
