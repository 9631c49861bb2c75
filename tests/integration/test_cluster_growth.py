"""Growing a cluster as an operator does, on real services: three brokers and two controllers under
an acks=all produce load from Odradek's Producer and a group consumer; a fourth broker is started;
`odradek reassign-partitions --generate` proposes a spread over the four, `--execute --throttle`
moves a quarter of the replicas onto the new broker, and the active controller is killed with
SIGKILL while the throttled copy is under way. The next controller completes the reassignment,
`--verify` reports it complete and removes the throttles, and every acknowledged record is read
back exactly once and in order per partition, from the logs and by the group consumer.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from services.clients import cli
from services.clients.admin import Admin
from services.clients.admin_types import BROKER_RESOURCE
from services.clients.consumer import Consumer
from services.clients.lowlevel import LowLevelClient
from services.clients.producer import Producer
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, SESSION_TIMEOUT_S, create_topic, module_cluster, zk_session
from tests.integration.test_replication import read_partition

TOPIC = "growth"
PARTITIONS = 8
REPLICATION = 2
FILL_RECORDS = 512  # 4 KiB each: 2 MiB to copy, before the steady load of small records
FILL_VALUE_BYTES = 4096
THROTTLE_BYTES_PER_S = 512 * 1024
TAKEOVER_TIMEOUT_S = SESSION_TIMEOUT_S + 30


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "growth", brokers=3,
                        controllers=2, coordinators=1) as local:
        yield local


class Load:
    """An acks=all Producer writing numbered values round the partitions on one thread (large ones
    first, then small ones at a steady pace), and a group consumer reading them on another."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.acked: list[tuple[int, int, bytes]] = []  # (partition, offset, value)
        self.failed: list[BaseException] = []
        self.consumed: list[tuple[int, int, bytes]] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._threads = [threading.Thread(target=self._produce, name="growth-producer", daemon=True),
                         threading.Thread(target=self._consume, name="growth-consumer", daemon=True)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def _on_answer(self, partition: int, value: bytes):
        def answered(metadata, error) -> None:
            with self._lock:
                if error is None:
                    self.acked.append((partition, metadata.offset, value))
                else:
                    self.failed.append(error)
        return answered

    def _produce(self) -> None:
        try:
            # request.timeout.ms of 5 s, shorter than a produce may wait while the killed controller's
            # successor takes over: the producer's retries of answers it lost must not write twice
            with Producer(bootstrap_servers=self.cluster.bootstrap_servers, acks="all", linger_ms=5,
                          **CLIENT_CONFIG) as producer:
                sequence = 0
                while not self._stop_producing.is_set():
                    partition = sequence % PARTITIONS
                    value = b"%d:%08d:" % (partition, sequence)
                    if sequence < FILL_RECORDS:
                        value += b"f" * (FILL_VALUE_BYTES - len(value))
                    else:
                        self._stop_producing.wait(0.004)  # about 250 small records a second
                    producer.send(TOPIC, value, partition=partition, callback=self._on_answer(partition, value))
                    sequence += 1
                producer.flush(60)
        except BaseException as error:  # reported by the test
            self.errors.append(error)

    def _consume(self) -> None:
        try:
            with Consumer(bootstrap_servers=self.cluster.bootstrap_servers, group_id="growth-readers",
                          auto_offset_reset="earliest", fetch_max_wait_ms=100, **CLIENT_CONFIG) as consumer:
                consumer.subscribe([TOPIC])
                while not self._stop_consuming.is_set():
                    records = [(r.partition, r.offset, r.value) for r in consumer.poll(timeout_ms=200)]
                    with self._lock:
                        self.consumed.extend(records)
        except BaseException as error:
            self.errors.append(error)

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def consumed_count(self) -> int:
        with self._lock:
            return len(self.consumed)

    def stop_producing(self) -> None:
        self._stop_producing.set()
        self._threads[0].join(90)

    def stop_consuming(self) -> None:
        self._stop_consuming.set()
        self._threads[1].join(30)

    def stop(self) -> None:
        self.stop_producing()
        self.stop_consuming()


def run_cli(argv: list[str], capsys) -> tuple[int, list[str]]:
    code = cli.main(argv)
    return code, capsys.readouterr().out.splitlines()


def test_a_fourth_broker_takes_a_quarter_of_the_replicas_under_load(cluster: LocalCluster, tmp_path, capsys):
    started = time.monotonic()
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
        create_topic(admin, TOPIC, PARTITIONS, REPLICATION)
        load = Load(cluster)
        load.start()
        try:
            wait_until(lambda: load.acked_count() >= FILL_RECORDS or load.errors, 30,
                       message="the large records acknowledged")
            new_broker = cluster.add_broker()
            cluster.start_service(new_broker)
            new_id = cluster.services[new_broker].node_id
            wait_until(lambda: len(admin.describe_cluster().nodes) == 4, 30, message="four live brokers")

            server = ["--bootstrap-server", cluster.bootstrap_servers]
            topics_file = tmp_path / "topics.json"
            topics_file.write_text(json.dumps({"topics": [{"topic": TOPIC}], "version": 1}))
            code, lines = run_cli(["reassign-partitions", *server, "--generate", "--topics-to-move-json-file",
                                   str(topics_file), "--broker-list", "1,2,3,4"], capsys)
            assert code == 0, lines
            proposal = json.loads(lines[4])
            plan = {TopicPartition(p["topic"], p["partition"]): p["replicas"] for p in proposal["partitions"]}
            onto_new = sum(replicas.count(new_id) for replicas in plan.values())
            assert onto_new == PARTITIONS * REPLICATION // 4, plan  # a quarter of the replicas
            plan_file = tmp_path / "plan.json"
            plan_file.write_text(lines[4])

            code, lines = run_cli(["reassign-partitions", *server, "--execute", "--reassignment-json-file",
                                   str(plan_file), "--throttle", str(THROTTLE_BYTES_PER_S)], capsys)
            assert code == 0, lines
            assert any(f"throttle is {THROTTLE_BYTES_PER_S} B/s" in line for line in lines), lines
            with zk_session(cluster.zookeeper_connect) as zk:
                active = f"controller-{zk.get_controller().controller_id}"
                assert admin.list_partition_reassignments(), "the throttled copy ended before the kill"
                cluster.kill_service(active)
                killed_at = time.monotonic()

            verified: list[str] = []

            def complete() -> bool:
                code, lines = run_cli(["reassign-partitions", *server, "--verify", "--reassignment-json-file",
                                       str(plan_file)], capsys)
                verified[:] = lines
                return code == 0 and all(line.endswith(" is complete.") for line in lines[1:PARTITIONS + 1])

            wait_until(complete, TAKEOVER_TIMEOUT_S, 0.5, message=lambda: f"the reassignment to complete: {verified}")
            completed_s = time.monotonic() - killed_at
            assert "Removed the replication throttle rates of brokers 1,2,3,4" in verified, verified
            assert f"Removed the throttled replicas of topic {TOPIC}" in verified, verified
            topic_configs = admin.describe_configs([TOPIC])[TOPIC]
            assert not (topic_configs.get("leader.replication.throttled.replicas")
                        and topic_configs["leader.replication.throttled.replicas"].value)
            for broker in range(1, 5):
                assert "leader.replication.throttled.rate" not in \
                    admin.describe_configs([str(broker)], resource_type=BROKER_RESOURCE)[str(broker)]

            def final_replicas() -> dict[TopicPartition, list[int]]:
                return {TopicPartition(TOPIC, p.partition): list(p.replicas)
                        for p in admin.describe_topics([TOPIC])[TOPIC].partitions}

            # --verify read the assignment from one broker's metadata; the others follow
            wait_until(lambda: final_replicas() == plan, 30, 0.2, message=lambda: f"{final_replicas()} to be {plan}")

            acked_before_stop = load.acked_count()
            wait_until(lambda: load.acked_count() >= acked_before_stop + 100 or load.errors, 30,
                       message="records acknowledged after the reassignment")
            load.stop_producing()
            with LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as reader:
                logs = {p: read_partition(reader, TOPIC, p) for p in range(PARTITIONS)}
            wait_until(lambda: load.consumed_count() >= sum(map(len, logs.values())) or load.errors, 30,
                       message="the group consumer to read every record")
        finally:
            load.stop()
    assert not load.errors, load.errors

    consumed: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    for partition, offset, value in load.consumed:
        consumed[partition].append((offset, value))
    for partition, log in logs.items():
        values = [v for _, v in log]
        assert len(values) == len(set(values)), f"partition {partition}: a record was written twice"
        sequences = [int(v.split(b":")[1]) for v in values]
        assert sequences == sorted(sequences), f"partition {partition}: out of order"
        assert consumed[partition] == log, f"partition {partition}: the group consumer read another history"
    by_position = {(p, offset): value for p, log in logs.items() for offset, value in log}
    in_partition = {(p, value) for p, log in logs.items() for _, value in log}
    for partition, offset, value in load.acked:
        if offset < 0:  # acknowledged as already written (a lost answer's retry): its offset is unknown
            assert (partition, value) in in_partition, f"acknowledged {value[:20]!r} in {partition}, not there"
        else:
            assert by_position.get((partition, offset)) == value, (
                f"acknowledged {value[:20]!r} at {partition}/{offset}")
    elapsed_s = time.monotonic() - started
    print(f"{len(load.acked)} records acknowledged ({len(load.failed)} failed), {onto_new} of "
          f"{PARTITIONS * REPLICATION} replicas moved onto broker {new_id}; complete {completed_s:.1f} s after "
          f"the controller was killed; {elapsed_s:.1f} s in all")
