"""Odradek's Spark jobs on a Spark standalone cluster (`SparkStandalone`: a master and two workers,
separate JVMs on loopback, one for the module) against one Odradek cluster with a gateway: the
clickstream pipeline through the command the README prints (`odradek jobs run clickstream --master
spark://...`), its streaming and backfill outputs equal to the generated traffic's aggregates; and
the exactly-once sink's query with a worker JVM and its executor killed with SIGKILL while a task of
a micro-batch runs there, whose output still holds every input record exactly once. Each driver is
a process of its own; a failing test prints the master's, the workers' and the executors' logs."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.clients.admin import Admin
from services.clients.producer import Producer
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import pid_alive, wait_until
from services.devcluster.spark_standalone import SparkProcess, SparkStandalone
from tests.integration.conftest import CLIENT_CONFIG, create_topic, gateway_module_cluster
from tests.integration.test_transactions import read_to_end
from tests.spark.test_spark_eos_sink import batch_ids

REPO = Path(__file__).resolve().parents[2]
ODRADEK = [sys.executable, "-m", "services.clients.cli"]
CLICKSTREAM_EVENTS = 200
EOS_RECORDS = 200
RUN_TIMEOUT_S = 600
TASK_ENDS = ("Finished task", "Exception in task", "killed task")  # an executor's log lines that end one

# Starting a driver, its executors and their Python workers is what costs: on an idle 2-core machine
# the module takes well under the limit below, which leaves room for a busy one.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "sparkcluster") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    with SparkStandalone(tmp_path_factory.mktemp("spark-standalone"), workers=2) as spark_cluster:
        yield spark_cluster


@contextlib.contextmanager
def logs_on_failure(standalone: SparkStandalone) -> Iterator[None]:
    try:
        yield
    except BaseException:
        print(f"\n===== Spark standalone logs of {standalone.base_dir} =====\n{standalone.logs(80)}")
        raise


def executor_task_counts(standalone: SparkStandalone, app_name: str) -> dict[str, int]:
    """Tasks each executor of the application `app_name` finished, by `<worker>/<app>/<executor>`."""
    status = standalone.master_status() or {}
    app_ids = {app["id"] for app in status.get("activeapps", []) + status.get("completedapps", [])
               if app["name"] == app_name}
    counts = {}
    for worker in standalone.workers:
        for app_id in app_ids:
            for stderr in (worker.directory / "work" / app_id).glob("*/stderr"):
                counts[f"{worker.name}/{app_id}/{stderr.parent.name}"] = \
                    stderr.read_text(errors="replace").count("Finished task")
    return counts


def test_the_clickstream_pipeline_runs_on_the_standalone_cluster(cluster, standalone, tmp_path) -> None:
    with logs_on_failure(standalone):
        command = [*ODRADEK, "jobs", "run", "clickstream", "--gateway", cluster.gateway_url(),
                   "--master", standalone.master_url, "--dir", str(tmp_path / "jobs"),
                   "--events", str(CLICKSTREAM_EVENTS), "--topic", "clicks-on-spark"]
        run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        print(run.stdout)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "streaming == backfill:  yes, every window" in run.stdout
        assert "streaming == expected:  yes, every window" in run.stdout
        figures = re.search(r"^expected \(generator\)\s+(\d+)\s+(\d+)", run.stdout, re.MULTILINE)
        assert figures is not None and int(figures.group(2)) > 0
        for name in ("streaming", "backfill"):
            assert re.search(rf"^{name}\s+{figures.group(1)}\s+{figures.group(2)}\s", run.stdout, re.MULTILINE)
        tasks = executor_task_counts(standalone, "clickstream-run")
        print(f"tasks finished per executor: {tasks}")
        assert len(tasks) == 2 and all(count > 0 for count in tasks.values()), tasks


def running_tasks(worker: SparkProcess) -> int:
    """Tasks an executor of `worker` has started and not finished, as its log says."""
    running = 0
    for stderr in (worker.directory / "work").glob("*/*/stderr"):
        text = stderr.read_text(errors="replace")
        running += text.count("Running task") - sum(text.count(end) for end in TASK_ENDS)
    return running


class Driver:
    """The exactly-once sink's streaming query (`eos_sink_driver`) on the standalone cluster, in a
    process group of its own."""

    def __init__(self, cluster: LocalCluster, standalone: SparkStandalone, checkpoint: Path, log: Path) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.spark.eos_sink_driver", cluster.gateway_url(), "eos-in", "eos-out",
                 str(checkpoint), "run", standalone.master_url], cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)

    def check_running(self) -> bool:
        assert self.process.poll() is None, f"the driver exited with {self.process.returncode}:\n" + \
            self.log.read_text()[-4000:]
        return True

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


def test_a_worker_and_its_executor_killed_mid_stream_leave_the_exactly_once_output_exact(
        cluster, standalone, tmp_path) -> None:
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
        create_topic(admin, "eos-in", 3, 1)
        create_topic(admin, "eos-out", 2, 1)
    values = [b"record-%d" % n for n in range(EOS_RECORDS)]
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5) as producer:
        for future in [producer.send("eos-in", value, key=value) for value in values]:
            future.get(timeout=30)
    checkpoint = tmp_path / "checkpoint"
    driver = Driver(cluster, standalone, checkpoint, tmp_path / "driver.log")
    with logs_on_failure(standalone):
        try:
            def task_running_mid_batch() -> SparkProcess | None:
                """A worker whose executor runs a task of a batch after the first (logged, not committed)."""
                started, done = batch_ids(checkpoint / "offsets"), batch_ids(checkpoint / "commits")
                if not (driver.check_running() and done and started[-1] > done[-1]):
                    return None
                return next((worker for worker in standalone.workers if running_tasks(worker) > 0), None)

            victim = wait_until(task_running_mid_batch, RUN_TIMEOUT_S, interval_s=0.05,
                                message="a task running in a micro-batch after the first")
            executors = standalone.executor_pids(victim)
            assert victim.pid is not None and executors, f"{victim.name} runs no executor"
            for pid in [victim.pid, *executors]:
                os.kill(pid, signal.SIGKILL)
            killed_at = batch_ids(checkpoint / "offsets")[-1]
            print(f"killed {victim.name} (pid {victim.pid}) and its executor(s) {executors} while a task of batch "
                  f"{killed_at} ran there")
            wait_until(lambda: not pid_alive(victim.pid), 30, message=f"{victim.name} to die")

            def all_written() -> bool:
                driver.check_running()
                committed = read_to_end(cluster, "eos-out", 2, "read_committed")
                return sum(map(len, committed.values())) >= len(values)

            wait_until(all_written, RUN_TIMEOUT_S, interval_s=1.0,
                       message=lambda: f"every record in eos-out (commits {batch_ids(checkpoint / 'commits')})")
            assert batch_ids(checkpoint / "commits")[-1] > killed_at
            lost = [line for line in driver.log.read_text(errors="replace").splitlines() if "Lost executor" in line]
            print("\n".join(lost))
            assert lost, "the driver never reported the executor lost"
        finally:
            driver.kill()
        committed = read_to_end(cluster, "eos-out", 2, "read_committed")
        written = sorted(value for partition in committed.values() for value in partition)
        assert written == sorted(values)
        uncommitted = read_to_end(cluster, "eos-out", 2, "read_uncommitted")
        print(f"output records: {len(written)} committed, {sum(map(len, uncommitted.values()))} written in all")

