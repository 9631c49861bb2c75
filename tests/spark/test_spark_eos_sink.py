"""The exactly-once `odradek` sink against SIGKILLs of its driver: a streaming query (its own
driver process, `eos_sink_driver`, Spark local[2]) copies an input topic to an output topic and is
killed with SIGKILL (its whole process group: driver, JVM and Python workers) several times, at
points picked at random among: while a micro-batch runs (offsets logged, not committed), during
the sink's commit (batch recorded, its transactions not all committed) and after a batch; each
time it restarts from its checkpoint. A last `availableNow` run drains the input. A read_committed
read of the output then holds every input record exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from services.clients.admin import Admin
from services.clients.producer import Producer
from services.clients.spark.batch_log import BatchLog
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, create_topic, gateway_module_cluster
from tests.integration.test_transactions import read_to_end

REPO = Path(__file__).resolve().parents[2]
RECORDS = 480
KILL_POINTS = ("mid-batch", "during-commit", "during-commit", "after-batch")
ROUND_TIMEOUT_S = 90


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "sparkeos") as cluster:
        yield cluster


def batch_ids(directory: Path) -> list[int]:
    return sorted(int(path.name) for path in directory.iterdir() if path.name.isdigit()) if directory.is_dir() else []


class Driver:
    """One run of the driver script, in a process group of its own (SIGKILL takes the JVM too)."""

    def __init__(self, cluster: LocalCluster, checkpoint: Path, mode: str, log: Path) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.spark.eos_sink_driver", cluster.gateway_url(), "eos-in", "eos-out",
                 str(checkpoint), mode], cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def failure(self) -> str:
        return f"the driver exited with {self.process.returncode}:\n" + self.log.read_text()[-4000:]


def progress(checkpoint: Path) -> str:
    latest = BatchLog(checkpoint).latest()
    record = "none" if latest is None else f"batch {latest.batch_id}, committed {latest.committed}"
    return (f"offsets {batch_ids(checkpoint / 'offsets')}, commits {batch_ids(checkpoint / 'commits')}, "
            f"latest sink record: {record}")


def kill_point(name: str, checkpoint: Path) -> Callable[[], bool]:
    """When to kill: a condition on the checkpoint, measured from now."""
    commits = len(batch_ids(checkpoint / "commits"))
    log = BatchLog(checkpoint)
    before = log.latest()

    def reached() -> bool:
        done = batch_ids(checkpoint / "commits")
        if name == "after-batch":
            return len(done) > commits
        if name == "mid-batch":
            started = batch_ids(checkpoint / "offsets")
            return bool(started) and len(done) > commits and started[-1] > done[-1]
        latest = log.latest()  # a new batch recorded, its transactions not all committed
        return latest is not None and not latest.committed and latest != before

    return reached


def run_and_kill(cluster: LocalCluster, checkpoint: Path, log: Path, point: str) -> None:
    """Starts the driver and kills it with SIGKILL once `point` is reached."""
    driver = Driver(cluster, checkpoint, "run", log)
    try:
        reached = kill_point(point, checkpoint)
        wait_until(lambda: reached() or driver.process.poll() is not None, timeout_s=ROUND_TIMEOUT_S,
                   interval_s=0.005,
                   message=lambda: f"kill point {point} ({progress(checkpoint)}):\n{log.read_text()[-3000:]}")
        print(f"killed at {point}: {progress(checkpoint)}")
        assert driver.process.poll() is None, driver.failure()
    finally:
        driver.kill()


def test_a_driver_killed_at_random_points_writes_each_record_exactly_once(cluster, tmp_path) -> None:
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
        create_topic(admin, "eos-in", 3, 1)
        create_topic(admin, "eos-out", 2, 1)
    values = [b"record-%d" % n for n in range(RECORDS)]
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5) as producer:
        for future in [producer.send("eos-in", value, key=value) for value in values]:
            future.get(timeout=30)
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "driver.log"
    seed = random.randrange(1 << 30)
    points = random.Random(seed).sample(KILL_POINTS, len(KILL_POINTS))
    print(f"kill points (seed {seed}): {points}")
    for point in points:
        run_and_kill(cluster, checkpoint, log, point)
    driver = Driver(cluster, checkpoint, "available-now", log)
    try:
        assert driver.process.wait(timeout=60) == 0, driver.failure()
    finally:
        driver.kill()
    committed = read_to_end(cluster, "eos-out", 2, "read_committed")
    written = sorted(value for partition in committed.values() for value in partition)
    assert written == sorted(values)
    uncommitted = read_to_end(cluster, "eos-out", 2, "read_uncommitted")
    print(f"output records: {len(written)} committed, {sum(map(len, uncommitted.values()))} written in all")
