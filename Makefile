# Odradek build entry points. `make up` runs a local cluster, `make test` runs the suite;
# both install whatever is missing first.

SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= $(shell command -v python3.11 || command -v python3)
PY := $(VENV)/bin/python
ZOOKEEPER_JAR := /usr/share/java/zookeeper.jar
PYTEST_ARGS ?=

.PHONY: setup system-deps bench-deps test unit integration lint proto bench up down status clean pipeline

setup: system-deps $(VENV)/.installed

# Java, ZooKeeper and docker-compose (which validates docker-compose.yml offline) come from Debian
# packages; installed only when missing and we are root. kubectl (renders deploy/k8s) must be on PATH.
system-deps:
	@if ! command -v java >/dev/null 2>&1 || [ ! -f $(ZOOKEEPER_JAR) ]; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Java and ZooKeeper (Debian packages)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      default-jre-headless zookeeper >/dev/null; \
	  else \
	    echo "Java and the Debian 'zookeeper' package are needed: run 'sudo apt-get install default-jre-headless zookeeper'" >&2; \
	    exit 1; \
	  fi; \
	fi
	@if ! command -v docker-compose >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing docker-compose (Debian package): the tests validate docker-compose.yml with it, no engine needed"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null; \
	  else \
	    echo "docker-compose is needed to validate docker-compose.yml: run 'sudo apt-get install docker-compose'" >&2; \
	    exit 1; \
	  fi; \
	fi
	@if ! command -v cc >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing a C compiler for the compiled record check (Debian package gcc)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc >/dev/null; \
	  else \
	    echo "no C compiler: records are checked by the slower Python form" >&2; \
	  fi; \
	fi

	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Chromium for the web console's browser test (Debian package chromium)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "no chromium: the web console's browser test is skipped ('sudo apt-get install chromium')" >&2; \
	  fi; \
	fi

$(VENV)/.installed: pyproject.toml services/common/records/_framing.c
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]' --config-settings editable_mode=compat
	@touch $@

test: setup
	$(PY) -m pytest -q --durations=15 $(PYTEST_ARGS) tests

unit: setup
	$(PY) -m pytest -q $(PYTEST_ARGS) tests/unit

integration: setup
	$(PY) -m pytest -q $(PYTEST_ARGS) tests/integration

lint: setup
	$(VENV)/bin/ruff check services tests bench jobs

proto: setup
	$(PY) -m services.common.protogen

# bench/peers.py measures Redis Streams beside Odradek: redis-server comes from Debian.
bench-deps:
	@if ! command -v redis-server >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing redis-server (Debian package)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	  else \
	    echo "bench/peers.py needs redis-server: run 'sudo apt-get install redis-server'" >&2; exit 1; \
	  fi; \
	fi

bench: setup bench-deps
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

up: setup
	$(VENV)/bin/odradek dev up --dir var

down:
	@if [ -x $(VENV)/bin/odradek ]; then $(VENV)/bin/odradek dev down --dir var; else echo "nothing to stop"; fi

status:
	$(VENV)/bin/odradek dev status --dir var

# The clickstream pipeline (jobs/clickstream) against `make up`'s gateway: new topics, generated
# traffic, the streaming job, the backfill, and a table comparing them; output under var/jobs/.
GATEWAY ?= http://127.0.0.1:8080
PIPELINE_ARGS ?=
pipeline: setup
	$(PY) -m jobs.clickstream run --gateway $(GATEWAY) --dir var/jobs/clickstream $(PIPELINE_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis
