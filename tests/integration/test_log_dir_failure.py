"""A full disk is not a dead broker (KIP-112), on a real cluster: broker 3 has two log dirs, the
one holding the test topic's replicas a small tmpfs, under an acks=all load from Odradek's
Producer on an RF=3, min.insync.replicas=2 topic. When the tmpfs fills, broker 3 takes the dir
offline and tells the controller, which moves the leadership of its partitions and shrinks their
ISRs within seconds; produces to every partition succeed again, nothing acknowledged is lost,
DescribeLogDirs and the broker's metrics show the offline dir, broker 3 goes on serving from its
other dir. Started again with that dir read-only, broker 3 starts with the dir offline and says
so; once the disk is writable and has space again and broker 3 restarted, its replicas catch up and
rejoin every ISR."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.clients import cli
from services.clients.admin import Admin
from services.clients.lowlevel import LowLevelClient
from services.clients.producer.producer import Producer
from services.common.errors import Errors
from services.common.records import iter_records
from services.common.topic_partition import TopicPartition
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, create_topic, zk_session

TOPIC = "disk"
FAILING_BROKER = 3
PARTITIONS = 3
# broker 3 leads a third of the partitions (partition 0 among them) and follows the others
ASSIGNMENT = {p: [[3, 1, 2], [1, 2, 3], [2, 3, 1]][p % 3] for p in range(PARTITIONS)}
ROUND = 300  # records sent at a time
TMPFS_BYTES = 8 << 20
BALLAST_LOGS = PARTITIONS + 20  # logs already in broker 3's healthy dir, so that new ones go to the tmpfs
HEADROOM_BYTES = 256 << 10  # left free by the filler file: the load fills the rest
VALUE = b"v" * 1000
LEADERSHIP_MOVE_S = 10.0  # from the first failed write to every partition led and replicated elsewhere
SETTLE_S = 60.0


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=30)


@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    """A tmpfs of TMPFS_BYTES, unmounted (lazily, so processes still using it do not block it)
    however the test ends."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = run("mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(mount_point))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        run("umount", "-l", str(mount_point))


def fill(path: Path, leave_bytes: int) -> None:
    """Writes `path` until its filesystem has about `leave_bytes` free."""
    free = os.statvfs(path.parent).f_bavail * os.statvfs(path.parent).f_frsize
    with open(path, "wb") as f:
        f.write(b"\0" * max(free - leave_bytes, 0))


def states(zk) -> dict[int, tuple[int, tuple[int, ...]]]:
    return {p: (s.value.leader, tuple(s.value.isr))
            for p in ASSIGNMENT if (s := zk.get_partition_state(TopicPartition(TOPIC, p))) is not None}


def metric(url: str, name: str) -> float | None:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def read_back(client: LowLevelClient) -> dict[tuple[int, int], bytes]:
    found = {}
    for partition in ASSIGNMENT:
        offset = 0
        while True:
            result = client.fetch(TOPIC, partition, offset, max_wait_ms=0, retry_timeout_ms=20000)
            assert result.error_code == Errors.NONE, result
            records = list(iter_records(result.records))
            if not records:
                break
            found.update({(partition, r.offset): r.value for r in records})
            offset = records[-1].offset + 1
    return found


class Load:
    """Records sent round the partitions with acks=all; the acknowledged ones remembered."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.acknowledged: dict[tuple[int, int], bytes] = {}
        self.failed = 0
        self.sent = 0

    def send(self, count: int) -> list:
        futures = []
        for _ in range(count):
            value = b"%08d" % self.sent + VALUE
            futures.append((value, self.producer.send(TOPIC, value, partition=self.sent % len(ASSIGNMENT))))
            self.sent += 1
        return futures

    def settle(self, futures) -> int:
        """Waits for every answer; returns how many were errors."""
        failures = 0
        for value, future in futures:
            try:
                metadata = future.get(timeout=SETTLE_S)
            except Exception:
                failures += 1
                continue
            self.acknowledged[(metadata.partition, metadata.offset)] = value
        self.failed += failures
        return failures


def test_a_full_log_dir_moves_leadership_and_the_broker_recovers_after_a_restart(
        small_disk, cluster_factory, zookeeper, zk_chroot, tmp_path, capsys):
    cluster = cluster_factory(brokers=3, controllers=1, start=False,
                              broker_config={"log.segment.bytes": 1 << 20})
    failing = cluster.broker_name(FAILING_BROKER)
    log_dir, healthy_dir = small_disk / "logs", tmp_path / "healthy-logs"
    for index in range(BALLAST_LOGS):  # left by an earlier topic
        (healthy_dir / f"ballast-{index}").mkdir(parents=True)
    cluster.services[failing].config["log.dirs"] = f"{log_dir},{healthy_dir}"
    cluster.start()
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin, \
            LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as reader, \
            zk_session(zookeeper.connect_string + zk_chroot) as zk, \
            Producer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5, retry_backoff_ms=50,
                     request_timeout_ms=5000, delivery_timeout_ms=int(SETTLE_S * 1000)) as producer:
        create_topic(admin, TOPIC, assignment=ASSIGNMENT, configs={"min.insync.replicas": "2"})
        load = Load(producer)
        assert load.settle(load.send(ROUND)) == 0
        assert states(zk)[0] == (3, (3, 1, 2))
        placed = admin.describe_log_dirs([FAILING_BROKER])[FAILING_BROKER]
        assert {tp.partition for tp in placed[str(log_dir)].replica_infos} == set(ASSIGNMENT)

        fill(small_disk / "filler", HEADROOM_BYTES)
        filled_at, acknowledged_before = time.monotonic(), len(load.acknowledged)
        in_flight = []
        while FAILING_BROKER in {broker for _leader, isr in states(zk).values() for broker in isr}:
            assert time.monotonic() - filled_at < SETTLE_S, f"broker 3 still in an ISR: {states(zk)}"
            in_flight += load.send(50)
            time.sleep(0.05)
        moved_s = time.monotonic() - filled_at
        after = states(zk)
        assert all(leader in (1, 2) and set(isr) == {1, 2} for leader, isr in after.values()), after
        load.settle(in_flight)

        # produces to every partition succeed again
        assert load.settle(load.send(ROUND)) == 0
        described = admin.describe_log_dirs([FAILING_BROKER])[FAILING_BROKER]
        assert described[str(log_dir)].error.error == Errors.KAFKA_STORAGE_ERROR
        assert described[str(healthy_dir)].error is None  # broker 3 still serves its other dir
        assert cli.main(["log-dirs", "--bootstrap-server", cluster.bootstrap_servers, "--describe",
                         "--broker-list", "3"]) == 0
        (shown,) = json.loads(capsys.readouterr().out.splitlines()[2])["brokers"]
        assert {d["logDir"]: d["error"] for d in shown["logDirs"]} == {
            str(log_dir): "KAFKA_STORAGE_ERROR", str(healthy_dir): None}
        offline = metric(cluster.metrics_url(failing), "odradek_log_manager_offline_log_directory_count")
        assert offline == 1.0
        found = read_back(reader)
        lost = {k: v for k, v in load.acknowledged.items() if found.get(k) != v}
        assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:5]}"

        # started with the dir read-only: broker 3 serves from its other dir, the tmpfs one offline
        (small_disk / "filler").unlink()
        cluster.stop_service(failing)
        assert run("mount", "-o", "remount,ro", str(small_disk)).returncode == 0
        cluster.start_service(failing)
        described = admin.describe_log_dirs([FAILING_BROKER])[FAILING_BROKER]
        assert described[str(log_dir)].error.error == Errors.KAFKA_STORAGE_ERROR
        assert described[str(healthy_dir)].error is None
        assert metric(cluster.metrics_url(failing), "odradek_log_manager_offline_log_directory_count") == 1.0
        wait_until(lambda: metric(cluster.metrics_url(failing), "odradek_replica_manager_offline_replica_count")
                   == len(ASSIGNMENT), SETTLE_S, 0.2, message="broker 3's replicas answered offline")
        assert load.settle(load.send(ROUND)) == 0

        # writable with space again, broker restarted: its replicas recover, catch up and rejoin every ISR
        cluster.stop_service(failing)
        assert run("mount", "-o", "remount,rw", str(small_disk)).returncode == 0
        cluster.start_service(failing)
        recovering = load.send(ROUND)
        wait_until(lambda: all(set(isr) == {1, 2, 3} for _l, isr in states(zk).values()), SETTLE_S, 0.2,
                   message="broker 3 back in every ISR")
        assert load.settle(recovering) == 0
        described = admin.describe_log_dirs([FAILING_BROKER])[FAILING_BROKER]
        assert described[str(log_dir)].error is None
        found = read_back(reader)
        assert all(found.get(k) == v for k, v in load.acknowledged.items())
        print(f"\ndisk filled after {acknowledged_before} acknowledged records; leadership moved and ISRs shrank "
              f"{moved_s:.1f} s later; {load.sent} sent, {len(load.acknowledged)} acknowledged, "
              f"{load.failed} failed, 0 lost")
        assert moved_s < LEADERSHIP_MOVE_S
