#!/bin/sh
# The Flink image's entrypoint (deploy/docker/flink.yml): one JVM, started the way the local
# stack starts it (services/localstack/flink.py), with conf/ written at build time
# (deploy/docker/flink-conf.py). Flink logs to the console: `docker compose logs jobmanager`.
#   flink-run.sh jobmanager|taskmanager [-D key=value ...]
# FLINK_TASK_SLOTS sets a TaskManager's slots (the configuration's default: 1).
set -eu
FLINK_HOME=/opt/flink
CONF="$FLINK_HOME/conf"
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
# The flag files hold one word a line, none with a space: word splitting is what is meant.
# shellcheck disable=SC2046
exec java $(cat "$CONF/jvm-opens") $(cat "$CONF/$kind.jvm") \
    "-Dlog4j.configurationFile=file:$CONF/log4j-console.properties" \
    -cp "$FLINK_HOME/lib/*" "$main" --configDir "$CONF" $(cat "$CONF/$kind.dynamic") "$@"
