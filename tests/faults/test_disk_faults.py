"""Disk faults on a broker while it leads (KIP-112), under an acks=all load on RF=3,
min.insync.replicas=2 topics: broker 3 has a healthy log dir, one on a small ext4 filesystem (a
loop device mounted errors=remount-ro) and one on a FUSE layer (`services.devcluster.faulty_fs`),
and leads a third of each topic's partitions from the failing one. First the kernel remounts the
ext4 filesystem read-only under the running broker (an ext4 error, as a failing disk raises; `mount
-o remount,ro` is refused while files are open for writing), then the FUSE layer answers EIO: each
time the dir goes offline, leadership moves, produces to every partition succeed again, nothing
acknowledged is lost; once the disk is repaired and broker 3 restarted it serves that dir again and
rejoins every ISR. The scenarios run in order on one cluster: the first leaves the FUSE dir the one
with the fewest logs, so that the second topic's replicas go there."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.clients.admin import Admin
from services.clients.lowlevel import LowLevelClient
from services.clients.producer.producer import Producer
from services.common.errors import Errors
from services.common.records import iter_records
from services.common.topic_partition import TopicPartition
from services.devcluster.faulty_fs import FaultyFilesystem, unsupported_reason
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.conftest import delete_tree
from tests.integration.conftest import (
    CLIENT_CONFIG,
    TEARDOWN_STOP_TIMEOUT_S,
    TEST_BROKER_CONFIG,
    TEST_CONTROLLER_CONFIG,
    TEST_COORDINATOR_CONFIG,
    create_topic,
    zk_session,
)

pytestmark = pytest.mark.timeout(120)

FAILING_BROKER = 3
PARTITIONS = 3
# broker 3 leads partition 0 and follows the others
ASSIGNMENT = {p: [[3, 1, 2], [1, 2, 3], [2, 3, 1]][p % 3] for p in range(PARTITIONS)}
EXT4_BYTES = 64 << 20
# logs already in a dir steer where broker 3 puts new ones: fewest first
HEALTHY_BALLAST, FUSE_BALLAST = 40, 20
ROUND = 150
VALUE = b"v" * 200
LEADERSHIP_MOVE_S = 10.0
SETTLE_S = 30.0


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=30)


class Disks:
    def __init__(self, base: Path) -> None:
        self.healthy, self.ext4, self.fuse_backing = base / "healthy", base / "ext4", base / "fuse-backing"
        self.ext4_image = base / "ext4.img"
        self.fuse = FaultyFilesystem(self.fuse_backing, base / "fuse", base / "fuse-failing")
        self.ext4_logs, self.fuse_logs = self.ext4 / "logs", self.fuse.mount_point / "logs"


@pytest.fixture(scope="module")
def disks(tmp_path_factory) -> Iterator[Disks]:
    if (reason := unsupported_reason()) is not None:
        pytest.skip(f"disk faults need FUSE and mounts, which cannot be used here: {reason}")
    disks = Disks(tmp_path_factory.mktemp("disks"))
    disks.ext4.mkdir()
    with open(disks.ext4_image, "wb") as image:
        image.truncate(EXT4_BYTES)
    made = run("mkfs.ext4", "-q", "-F", str(disks.ext4_image))
    if made.returncode != 0:
        pytest.skip(f"cannot make an ext4 filesystem here: {made.stderr.strip()}")
    mounted = mount_ext4(disks)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount an ext4 image on a loop device here: {mounted.stderr.strip()}")
    try:
        for index in range(HEALTHY_BALLAST):
            (disks.healthy / f"ballast-healthy-{index}").mkdir(parents=True)
        for index in range(FUSE_BALLAST):
            (disks.fuse_backing / "logs" / f"ballast-fuse-{index}").mkdir(parents=True)
        disks.fuse.mount()
        yield disks
    finally:
        disks.fuse.unmount()
        run("umount", "-l", str(disks.ext4))  # its loop device goes with it
        assert not disks.fuse.mounted() and not disks.ext4.is_mount()


@pytest.fixture(scope="module")
def cluster(request, disks: Disks, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    chroot = f"/odradek-test-disk-faults-{id(request)}"
    _zk_root_client.ensure_path(chroot)
    cluster = LocalCluster(tmp_path_factory.mktemp("disk-faults-cluster"), free_ports=True, brokers=3,
                           controllers=1, coordinators=0, zookeeper_connect=zookeeper.connect_string,
                           zookeeper_chroot=chroot, broker_config=TEST_BROKER_CONFIG,
                           controller_config=TEST_CONTROLLER_CONFIG, coordinator_config=TEST_COORDINATOR_CONFIG)
    cluster.chroot = chroot
    cluster.services[cluster.broker_name(FAILING_BROKER)].config["log.dirs"] = \
        f"{disks.healthy},{disks.ext4_logs},{disks.fuse_logs}"
    failures_before = request.session.testsfailed
    try:
        cluster.start()
        yield cluster
    finally:
        if request.session.testsfailed > failures_before:
            print(f"\n===== service logs of {cluster.base_dir} =====\n{cluster.dump_logs()}")
        cluster.stop(timeout_s=TEARDOWN_STOP_TIMEOUT_S)
        delete_tree(_zk_root_client, chroot)


def mount_ext4(disks: Disks) -> subprocess.CompletedProcess:
    return run("mount", "-o", "loop,errors=remount-ro", str(disks.ext4_image), str(disks.ext4))


def ext4_error(disks: Disks) -> None:
    """An ext4 error on the filesystem: mounted errors=remount-ro, the kernel makes it read-only at once."""
    device = Path(run("findmnt", "-n", "-o", "SOURCE", str(disks.ext4)).stdout.strip()).resolve().name
    Path(f"/sys/fs/ext4/{device}/trigger_fs_error").write_text("odradek disk fault\n")
    assert "emergency_ro" in run("findmnt", "-n", "-o", "OPTIONS", str(disks.ext4)).stdout or \
        run("touch", str(disks.ext4 / "probe")).returncode != 0


class Load:
    """Records sent round a topic's partitions with acks=all; the acknowledged ones remembered."""

    def __init__(self, producer: Producer, topic: str) -> None:
        self.producer, self.topic = producer, topic
        self.acknowledged: dict[tuple[int, int], bytes] = {}
        self.failed = self.sent = 0
        self.errors: dict[str, int] = {}  # failed sends by error

    def send(self, count: int) -> list:
        futures = []
        for _ in range(count):
            value = b"%08d" % self.sent + VALUE
            futures.append((value, self.producer.send(self.topic, value, partition=self.sent % PARTITIONS)))
            self.sent += 1
        return futures

    def settle(self, futures) -> int:
        failures = 0
        for value, future in futures:
            try:
                metadata = future.get(timeout=SETTLE_S)
            except Exception as error:
                failures += 1
                self.errors[repr(error)] = self.errors.get(repr(error), 0) + 1
                continue
            self.acknowledged[(metadata.partition, metadata.offset)] = value
        self.failed += failures
        return failures

    def lost(self, client: LowLevelClient) -> int:
        found = {}
        for partition in range(PARTITIONS):
            offset = 0
            while True:
                result = client.fetch(self.topic, partition, offset, max_wait_ms=0, retry_timeout_ms=20000)
                assert result.error_code == Errors.NONE, result
                records = list(iter_records(result.records))
                if not records:
                    break
                found.update({(partition, r.offset): r.value for r in records})
                offset = records[-1].offset + 1
        return sum(1 for key, value in self.acknowledged.items() if found.get(key) != value)


def states(zk, topic: str) -> dict[int, tuple[int, tuple[int, ...]]]:
    return {p: (s.value.leader, tuple(s.value.isr))
            for p in ASSIGNMENT if (s := zk.get_partition_state(TopicPartition(topic, p))) is not None}


def fault_and_recover(cluster: LocalCluster, zookeeper, log_dir: Path, topic: str, inject, repair) -> str:
    """Loads `topic`, whose broker-3 replicas live in `log_dir`; injects the fault; checks the
    verdicts; repairs, restarts broker 3 and waits for it back in every ISR. Returns the figures."""
    failing = cluster.broker_name(FAILING_BROKER)
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin, \
            LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as reader, \
            zk_session(zookeeper.connect_string + cluster.chroot) as zk, \
            Producer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5, retry_backoff_ms=50,
                     request_timeout_ms=5000, delivery_timeout_ms=int(SETTLE_S * 1000)) as producer:
        create_topic(admin, topic, assignment=ASSIGNMENT, configs={"min.insync.replicas": "2"})
        load = Load(producer, topic)
        assert load.settle(load.send(ROUND)) == 0, load.errors
        assert states(zk, topic)[0] == (3, (3, 1, 2))
        placed = admin.describe_log_dirs([FAILING_BROKER])[FAILING_BROKER]
        assert {tp.partition for tp in placed[str(log_dir)].replica_infos if tp.topic == topic} == set(ASSIGNMENT)

        inject()
        injected_at, in_flight = time.monotonic(), []
        while FAILING_BROKER in {broker for _leader, isr in states(zk, topic).values() for broker in isr}:
            assert time.monotonic() - injected_at < SETTLE_S, f"broker 3 still in an ISR: {states(zk, topic)}"
            in_flight += load.send(30)
            time.sleep(0.05)
        moved_s = time.monotonic() - injected_at
        after = states(zk, topic)
        assert all(leader in (1, 2) and set(isr) == {1, 2} for leader, isr in after.values()), after
        load.settle(in_flight)
        assert load.settle(load.send(ROUND)) == 0  # produces to every partition succeed again
        described = admin.describe_log_dirs([FAILING_BROKER])[FAILING_BROKER]
        assert described[str(log_dir)].error.error == Errors.KAFKA_STORAGE_ERROR
        assert described[str(cluster_healthy_dir(cluster))].error is None
        assert load.lost(reader) == 0

        cluster.stop_service(failing)
        repair()
        cluster.start_service(failing)
        recovering = load.send(ROUND)
        wait_until(lambda: all(set(isr) == {1, 2, 3} for _l, isr in states(zk, topic).values()), SETTLE_S, 0.2,
                   message="broker 3 back in every ISR")
        assert load.settle(recovering) == 0
        assert admin.describe_log_dirs([FAILING_BROKER])[FAILING_BROKER][str(log_dir)].error is None
        lost = load.lost(reader)
        assert lost == 0
        figures = (f"leadership moved and ISRs shrank {moved_s:.1f} s after the fault; {load.sent} sent, "
                   f"{len(load.acknowledged)} acknowledged, {load.failed} failed, {lost} lost")
        assert moved_s < LEADERSHIP_MOVE_S, figures
        return figures


def cluster_healthy_dir(cluster: LocalCluster) -> str:
    return cluster.services[cluster.broker_name(FAILING_BROKER)].config["log.dirs"].split(",")[0]


def test_a_read_only_remount_moves_leadership_and_the_broker_recovers(cluster, disks, zookeeper):
    def repair() -> None:
        # an ext4 filesystem made read-only by an error is remounted writable only after a check
        assert run("umount", str(disks.ext4)).returncode == 0
        assert run("e2fsck", "-f", "-y", str(disks.ext4_image)).returncode in (0, 1)
        assert mount_ext4(disks).returncode == 0
        # the FUSE dir's ballast goes, so that broker 3 puts the next topic there
        for ballast in (disks.fuse_backing / "logs").glob("ballast-*"):
            ballast.rmdir()

    figures = fault_and_recover(cluster, zookeeper, disks.ext4_logs, "read-only", lambda: ext4_error(disks), repair)
    print(f"\nread-only remount: {figures}")


def test_eio_through_a_fuse_layer_moves_leadership_and_the_broker_recovers(cluster, disks, zookeeper):
    figures = fault_and_recover(cluster, zookeeper, disks.fuse_logs, "eio", disks.fuse.fail, disks.fuse.heal)
    print(f"\nEIO: {figures}")
