# scalefold: the two commands are `make demo` and `make test`.
# Everything they need (virtualenv, Python packages, the Kafka broker's jars,
# Spark's connectors) is set up on first use and cached.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# More pytest arguments for `make test` (deploy/test.sh adds the core's coverage, which
# must stay >= 95 % of branches, pyproject: [tool.coverage.report]), e.g. -m 'not spark'.
PYTEST_ARGS ?=

.PHONY: demo demo-flink demo-autoscale test compose-test up down status lint format fetch browser venv core bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test,dev]'
	@touch $(STAMP)

venv: $(STAMP)

## core: compile the scheduler core's logic with mypyc into build/core (~15-60 s; skipped
## while the build matches the sources). Without a C compiler it says so and the core
## runs interpreted (services/scheduler/core/native.py); `make test` builds it for real.
core: $(STAMP)
	$(BIN)/python -m services.scheduler.compile_core --optional

## fetch: resolve the Kafka broker's and Spark's connector jars with Maven, fetch Flink 2.3.0
## (PyPI's apache-flink-libraries wheel) and build its sample job with javac (all cached)
fetch: $(STAMP)
	$(BIN)/scalefold local fetch

## demo: run the main job end to end on the embedded default
demo: fetch core
	$(BIN)/scalefold demo

## demo-flink: the same story on a real Flink 2.3 (its commands act on real TaskManagers)
demo-flink: fetch core
	$(BIN)/scalefold demo --flink

## demo-autoscale: the history's autoscaler scaling the workload job on a real Flink 2.3
## through a load trace (steps, 5 min), then its table and picture (bench/autoscale_bench.py;
## `python -m bench.autoscale_bench --help` runs the operator's autoscaler beside it)
demo-autoscale: fetch core
	$(BIN)/scalefold local run --run-dir .run/demo-autoscale -- $(BIN)/python -m bench.autoscale_bench \
	    --traces steps --controllers scalefold --duration 300 --story \
	    --picture .run/demo-autoscale/picture.png

## test: lint, then the whole suite against a real broker started (and stopped) for it,
## three tests at a time, while the docker-compose stack's tests are prepared; then those
## (compose-test). deploy/test.sh says how.
test: lint fetch browser core
	deploy/test.sh $(PYTEST_ARGS)

## browser: Debian's chromium for the HTML timeline's test (as root: apt-get, ~80 s once)
browser:
	deploy/browser/chromium.sh

## compose-test: provision Docker (as root), build the images, run tests/docker (docs/docker-compose.md)
compose-test: $(STAMP)
	deploy/docker/compose-test.sh

## up / down / status: the local stack, for working by hand
up: fetch core
	$(BIN)/scalefold local up

down: $(STAMP)
	$(BIN)/scalefold local down

status: $(STAMP)
	$(BIN)/scalefold local status

lint: $(STAMP)
	$(BIN)/ruff format --check services tests bench
	$(BIN)/ruff check services tests bench
	$(BIN)/mypy services bench
	$(BIN)/lint-imports  # import circles, services sharing only the contracts (pyproject)

format: $(STAMP)
	$(BIN)/ruff format services tests bench
	$(BIN)/ruff check --fix services tests bench

clean:
	rm -rf $(VENV) build .run .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
