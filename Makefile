# Odradek build entry points. `make up` runs a local cluster and installs only what running it needs
# (Java, ZooKeeper, the project without extras); `make test` runs the suite and installs the rest
# (the dev and spark extras, Chromium, docker-compose). Each installs whatever is missing first.

SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= $(shell command -v python3.11 || command -v python3)
PY := $(VENV)/bin/python
ZOOKEEPER_JAR := /usr/share/java/zookeeper.jar
PYTEST_ARGS ?=
# stamps: the project installed for running it, and with everything the tests need
RUN_INSTALLED := $(VENV)/.installed-run
TEST_INSTALLED := $(VENV)/.installed-test
# editable_mode=compat puts the checkout itself on the path, so `jobs/` runs from it
PIP_INSTALL := $(PY) -m pip install -q --config-settings editable_mode=compat -e

.PHONY: setup run-setup system-deps run-deps test-deps bench-deps kafka-jars spark-kafka-jars test unit integration lint proto bench up down \
	status clean pipeline compose-deps compose-test spark-cluster-test

# everything: the tests, lint, benchmarks and the Spark jobs
setup: system-deps $(TEST_INSTALLED)

# what `make up` needs
run-setup: run-deps $(RUN_INSTALLED)

system-deps: run-deps test-deps

# Java and ZooKeeper come from Debian packages, as does a C compiler for the compiled record check;
# installed only when missing and we are root.
run-deps:
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
	@if ! command -v cc >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing a C compiler for the compiled record check (Debian package gcc)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc >/dev/null; \
	  else \
	    echo "no C compiler: records are checked by the slower Python form" >&2; \
	  fi; \
	fi

# docker-compose validates docker-compose.yml offline (no engine needed); Chromium drives the web
# console's browser test; kcat is a Kafka client the Kafka protocol tests run. kubectl (renders
# deploy/k8s) must be on PATH.
test-deps:
	@if ! command -v docker-compose >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing docker-compose (Debian package): the tests validate docker-compose.yml with it, no engine needed"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null; \
	  else \
	    echo "docker-compose is needed to validate docker-compose.yml: run 'sudo apt-get install docker-compose'" >&2; \
	    exit 1; \
	  fi; \
	fi
	@if ! command -v kcat >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing kcat (Debian package): the Kafka protocol tests run it against the brokers"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; \
	  else \
	    echo "no kcat: its Kafka protocol test is skipped ('sudo apt-get install kcat')" >&2; \
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
	@if [ ! -f /usr/include/libnetfilter_queue/libnetfilter_queue.h ] || ! command -v faketime >/dev/null 2>&1 || \
	    ! command -v nft >/dev/null 2>&1 || ! command -v iptables >/dev/null 2>&1 || \
	    ! command -v fusermount >/dev/null 2>&1 || ! ldconfig -p | grep -q 'libfuse\.so\.2'; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing what the network and disk fault tests use (Debian packages iproute2 nftables iptables faketime libfaketime libnetfilter-queue-dev fuse3 libfuse2)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      iproute2 nftables iptables faketime libfaketime libnetfilter-queue-dev fuse3 libfuse2 >/dev/null; \
	  else \
	    echo "the network and disk fault tests need root and 'sudo apt-get install iproute2 nftables iptables faketime libfaketime libnetfilter-queue-dev fuse3 libfuse2'" >&2; \
	  fi; \
	fi
	@if ! command -v mvn >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Maven (Debian package maven): it fetches Apache Kafka's jars for the tests run beside it"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null; \
	  else \
	    echo "no mvn: the tests that run Apache Kafka's tools are skipped ('sudo apt-get install maven')" >&2; \
	  fi; \
	fi

$(PY):
	$(PYTHON) -m venv $(VENV)

$(RUN_INSTALLED): pyproject.toml services/common/records/_framing.c | $(PY)
	$(PIP_INSTALL) .
	@touch $@

# the project with the dev and spark extras, which is also what running needs: `make up` after it
# installs nothing
$(TEST_INSTALLED): pyproject.toml services/common/records/_framing.c | $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PIP_INSTALL) '.[dev,spark]'
	@if [ -f /usr/include/libnetfilter_queue/libnetfilter_queue.h ]; then $(PIP_INSTALL) '.[dev,spark,faults]'; fi
	@touch $@ $(RUN_INSTALLED)

# Apache Kafka's broker and Java tools from Maven Central, once, under ~/.cache/odradek
# (bench/kafka_peer.py): the tests and benchmarks that run Kafka beside Odradek; without them they skip.
kafka-jars: | $(PY)
	@if command -v mvn >/dev/null 2>&1; then \
	  $(PY) bench/kafka_peer.py fetch >/dev/null || \
	    echo "Apache Kafka's jars could not be fetched: the tests that run Kafka's tools are skipped" >&2; \
	else \
	  echo "no mvn: the tests that run Apache Kafka's tools are skipped" >&2; \
	fi

# Spark's own Kafka connector for the installed PySpark (tests/spark/test_spark_kafka_connector.py)
spark-kafka-jars: | $(PY)
	@if command -v mvn >/dev/null 2>&1; then \
	  $(PY) bench/kafka_peer.py fetch-spark-kafka >/dev/null || \
	    echo "Spark's Kafka connector could not be fetched: the tests that run it are skipped" >&2; \
	else \
	  echo "no mvn: the tests that run Spark's Kafka connector are skipped" >&2; \
	fi

# the unit tests run in $(UNIT_WORKERS) processes and the cluster tests in $(CLUSTER_WORKERS), a test
# file to a process, each choosing its clusters' ports from its own range (pytest-xdist); the Spark
# tests, their standalone cluster's included, one at a time. The compose test (compose-test below)
# runs beside the cluster tests, from their start, its output kept and printed as one block at the
# end; it fails `make test` when it fails, and prints one "skipped" line where podman cannot run.
# COMPOSE_TEST=0 leaves it out.
UNIT_WORKERS ?= 2
CLUSTER_WORKERS ?= 2
COMPOSE_TEST ?= 1
test: setup kafka-jars spark-kafka-jars $(if $(filter 1,$(COMPOSE_TEST)),compose-deps)
	@rc=0; compose_pid=; compose_log=$$(mktemp /tmp/odradek-make-test-compose.XXXXXX.log); \
	trap '[ -n "$$compose_pid" ] && kill $$compose_pid 2>/dev/null && wait $$compose_pid; rm -f "$$compose_log"' EXIT; \
	trap 'exit 130' INT TERM; \
	$(PY) -m pytest -q -n $(UNIT_WORKERS) $(PYTEST_ARGS) tests/unit || rc=$$?; \
	if [ "$(COMPOSE_TEST)" = 1 ]; then \
	  echo "compose-test: started beside the cluster tests; its output follows them"; \
	  COMPOSE_PROJECT=odradekct$$$$ deploy/compose-test/compose-test.sh </dev/null >"$$compose_log" 2>&1 & compose_pid=$$!; \
	fi; \
	$(PY) -m pytest -q -n $(CLUSTER_WORKERS) --dist loadfile --durations=15 $(PYTEST_ARGS) tests/integration tests/faults || rc=$$?; \
	$(PY) -m pytest -q --durations=5 $(PYTEST_ARGS) tests/spark || rc=$$?; \
	if [ -n "$$compose_pid" ]; then \
	  compose_rc=0; wait $$compose_pid || compose_rc=$$?; compose_pid=; \
	  echo "===== compose-test (docker-compose.yml run with podman, beside the tests above) ====="; \
	  cat "$$compose_log"; \
	  [ $$compose_rc = 0 ] || { echo "compose-test failed (exit $$compose_rc)"; rc=1; }; \
	fi; \
	exit $$rc

# the Spark pipeline on a Spark standalone cluster of its own, alone (`make test` runs it with the
# other Spark tests)
spark-cluster-test: setup
	$(PY) -m pytest -q --durations=5 $(PYTEST_ARGS) tests/spark/test_spark_cluster.py

unit: setup
	$(PY) -m pytest -q -n $(UNIT_WORKERS) $(PYTEST_ARGS) tests/unit

integration: setup kafka-jars
	$(PY) -m pytest -q -n $(CLUSTER_WORKERS) --dist loadfile $(PYTEST_ARGS) tests/integration

# ruff, then the import contracts that keep the layers (pyproject.toml's [tool.importlinter])
lint: setup
	$(VENV)/bin/ruff check odradek services tests bench jobs
	$(VENV)/bin/lint-imports --no-cache

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

# every benchmark (bench/kafka_peer.py runs Apache Kafka for the others: no benchmark itself)
bench: setup bench-deps kafka-jars spark-kafka-jars
	@for b in bench/*.py; do [ $$b = bench/kafka_peer.py ] && continue; echo "== $$b"; $(PY) $$b || exit 1; done

# docker-compose.yml run for real: Odradek's image built with podman from a debootstrap base (no
# registry needed), the nine services up and healthy, produce/consume, a consumer group and a broker
# killed and back, then `down -v` (deploy/compose-test/compose-test.sh). Needs root, podman,
# debootstrap and docker-compose, installed here from Debian's packages when missing. `make test`
# runs it too, beside the cluster tests. SECURE=1: the secured variant (docker-compose.secure.yml).
SECURE ?= 0
compose-deps:
	@missing=""; for tool in podman debootstrap docker-compose jq; do \
	  command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing$$missing (Debian packages) for compose-test"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "compose-test needs$$missing: run 'sudo apt-get install$$missing'" >&2; \
	  fi; \
	fi

compose-test: compose-deps
	SECURE=$(SECURE) deploy/compose-test/compose-test.sh

up: run-setup
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
