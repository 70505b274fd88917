# The scalefold image for the Python services: scheduler, actuator and the CLI
# (topic creation, produce, tail, replay). The Spark history service has its own
# image (history.Dockerfile), which adds a JRE and the connector jars.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY services ./services
COPY schemas ./schemas
COPY deploy ./deploy
COPY examples ./examples
# Editable, so that schemas/ and deploy/ stay where the code finds them.
RUN pip install --no-cache-dir -e .

USER nobody
ENTRYPOINT ["scalefold"]
CMD ["--help"]
