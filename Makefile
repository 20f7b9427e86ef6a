# resultlog: `make help` lists the targets.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
DOCS_ADDR ?= 127.0.0.1:8000
MKDOCS_CONFIG ?= mkdocs.yml
# The tiers by marker (docs/contributing.md): `make test` is the fast core of every promise; the
# fault tier breaks things (tests/support/fault_table.py agrees on FAULT_TIER); the slow tier
# waits on brokers of its own, browsers, builds, child interpreters and timeouts.
TEST_TIER := not faults and not slow
FAULT_TIER := faults
SLOW_TIER := slow and not faults
# pytest-xdist workers of `make test`: its tests mostly wait (on the broker, HTTP, children), so
# four share two cores well; one broker serves them all (each test has topics of its own).
TEST_WORKERS ?= 4

.PHONY: help install test test-faults test-slow test-all test-ids test-ts test-containers lint format docs demo page page-down bench bench-quick soak kafka-up kafka-down clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

# The compiled fold path is built from these (resultlog/_hotpath.py's HOT_MODULES, read with
# the stdlib alone): a change rebuilds it, else the twins would run (said at INFO).
HOT_SOURCES := setup.py resultlog/_hotpath.py $(shell $(PYTHON) -c 'import runpy; \
	print(*runpy.run_path("resultlog/_hotpath.py")["HOT_MODULES"].values())')

$(BIN)/resultlog: pyproject.toml $(HOT_SOURCES)
	@echo "resultlog: [1/3] creating $(VENV) and upgrading pip"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	@echo "resultlog: [2/3] installing resultlog and its tools, compiling the fold with mypyc (quiet; 2-5 minutes)"
	@# setuptools explains editable installs in a banner on every install: nothing to act on.
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install -q -e '.[dev]'
	@echo "resultlog: [3/3] checking the installation"
	@$(BIN)/python -c 'import resultlog; print("resultlog fold path:", resultlog.fold_path())'
	@touch $@

install: $(BIN)/resultlog ## create .venv and install resultlog (its fold compiled by mypyc) and its tools

test: install ## the fast core of every test, on one real Kafka (RESULTLOG_BOOTSTRAP_SERVERS or our launcher)
	$(BIN)/pytest -m "$(TEST_TIER)" -n $(TEST_WORKERS) $(PYTEST_ARGS)

test-faults: install ## the fault-injection tier (restarts, kills, compaction, hostile input)
	$(BIN)/pytest -m "$(FAULT_TIER)" $(PYTEST_ARGS)

test-slow: install ## the slow tier (own brokers, browsers, builds, child processes, timeouts)
	$(BIN)/pytest -m "$(SLOW_TIER)" $(PYTEST_ARGS)

test-ids: install ## check that every test of tests/test_ids.txt is still collected (or merged)
	$(BIN)/pytest --collect-only -q -m "" -p no:cacheprovider >/dev/null

test-all: test test-faults test-slow test-ts test-containers ## every tier, one after another (what CI runs)

test-ts: install ## the TypeScript client: npm ci, then its tests (golden and generated vectors)
	cd clients/typescript && npm ci --no-audit --no-fund && npm test

test-containers: install ## the compose stacks and the tests' container broker on Docker (brings an engine and images when missing)
	bash scripts/test-containers.sh

lint: install ## ruff (lint and format check), mypy, and the docs site built with --strict
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python scripts/typecheck.py
	@# Never --quiet: it hides the warnings, and with them the count --strict fails on (a
	@# broken link or anchor). A test runs this line on a copy of the site with a broken anchor.
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --config-file $(MKDOCS_CONFIG)

docs: install ## serve the documentation site with live reload (DOCS_ADDR=HOST:PORT chooses)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr $(DOCS_ADDR)

format: install ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

demo: install ## the newcomer's tour: broker, topics, aggregator, a crashed and resumed run
	bash scripts/demo.sh

page: install ## the runs page with real data: broker, aggregator, two finished runs; prints the URL
	bash scripts/page.sh up

page-down: ## stop what `make page` started
	bash scripts/page.sh down

bench: install ## every benchmark next to its baseline and goal, the twins beside, one table (~50 min)
	bash scripts/bench.sh

bench-quick: install ## the benchmarks at 100k records with short windows (~12 min)
	bash scripts/bench.sh --quick

soak: install ## randomized faults on a 3-broker cluster, workers and aggregators, checked against replay (SOAK_S=600, SOAK_SEED, SOAK_PLANT=1)
	$(BIN)/python -m tests.soak

kafka-up: install ## start the local broker on 127.0.0.1:9092 and create the topics
	$(BIN)/resultlog kafka up
	$(BIN)/resultlog topics create

kafka-down: install ## stop the local broker
	$(BIN)/resultlog kafka down

clean: ## remove the virtualenv and caches (not the Kafka jar cache)
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build/site
