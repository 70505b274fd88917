# The history service: PySpark Structured Streaming with Spark's Kafka and Avro
# connectors, which the pyspark wheel does not ship. The jars are resolved from
# Maven Central with the same pom the local stack uses.
FROM maven:3.9-eclipse-temurin-17 AS jars
COPY deploy/local/spark/pom.xml /build/pom.xml
RUN mvn -B -q -f /build/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory=/cache/spark-connectors-4.0.0 \
    && ls /cache/spark-connectors-4.0.0 > /cache/spark-connectors-4.0.0/.complete

FROM python:3.11-slim-bookworm
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SCALEFOLD_CACHE_DIR=/opt/scalefold/cache \
    SPARK_LOCAL_IP=127.0.0.1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY services ./services
COPY schemas ./schemas
COPY deploy ./deploy
COPY examples ./examples
RUN pip install --no-cache-dir -e .
COPY --from=jars /cache /opt/scalefold/cache

RUN mkdir -p /data && chown nobody /data
USER nobody
VOLUME ["/data"]
ENTRYPOINT ["scalefold"]
CMD ["history", "--help"]
