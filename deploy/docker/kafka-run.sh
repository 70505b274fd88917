#!/bin/bash
# The broker of scalefold's Debian-built Kafka image, configured the way the official
# apache/kafka image is, so docker-compose.yml holds one configuration for both:
#   KAFKA_FOO_BAR=x   -> foo.bar=x in server.properties ("__" -> "_", "___" -> "-")
#   CLUSTER_ID        -> the KRaft storage is formatted with it on the first start
#   KAFKA_HEAP_OPTS   -> JVM heap (default -Xmx512m)
# Exec'd as PID 1, so `docker compose kill` (SIGKILL) and `stop` (SIGTERM) reach the JVM.
set -euo pipefail

config=/opt/kafka/config/server.properties
: "${CLUSTER_ID:?CLUSTER_ID is required}"
: >"$config"
while IFS='=' read -r name value; do
    case "$name" in
        KAFKA_HEAP_OPTS | KAFKA_OPTS | KAFKA_JVM_PERFORMANCE_OPTS | KAFKA_LOG4J_OPTS) continue ;;
        KAFKA_*) ;;
        *) continue ;;
    esac
    key="${name#KAFKA_}"
    key="${key,,}"
    key="${key//___/-}"
    key="${key//__/@}"
    key="${key//_/.}"
    key="${key//@/_}"
    printf '%s=%s\n' "$key" "$value" >>"$config"
done < <(env)
grep -q '^log.dirs=' "$config" || echo "log.dirs=/var/lib/kafka/data" >>"$config"

classpath='/opt/kafka/libs/*'
data="$(sed -n 's/^log.dirs=//p' "$config" | cut -d, -f1)"
if [ ! -f "$data/meta.properties" ]; then
    java -cp "$classpath" kafka.tools.StorageTool format --ignore-formatted \
        -t "$CLUSTER_ID" -c "$config"
fi
# shellcheck disable=SC2086  # the options are a list of words
exec java ${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m} ${KAFKA_OPTS:-} \
    -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.yaml \
    -cp "$classpath" kafka.Kafka "$config"
