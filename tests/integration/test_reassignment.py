"""Partition reassignment on real services: four brokers, two controllers, one ZooKeeper.

A partition moves from two brokers to two others under an acks=all load, and every acknowledged
record is read back once and in order; a replication factor goes from 1 to 3; a reassignment
held back by a paused target broker is cancelled; one written to `/admin/reassign_partitions` as
an old tool does completes and the znode goes; `odradek reassign-partitions` generates, executes,
verifies and lists; and a reassignment in progress when the active
controller is killed with SIGKILL is completed by the next controller.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from services.clients import cli
from services.clients.admin import Admin
from services.clients.lowlevel import LowLevelClient
from services.common.errors import Errors
from services.common.shared_types import ReplicaAssignment
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import (
    CLIENT_CONFIG,
    SESSION_TIMEOUT_S,
    create_topic,
    module_cluster,
    produce_values,
    zk_session,
)
from tests.integration.test_replication import (
    SteadyProducer,
    all_brokers,
    init_producer_id,
    read_partition,
    wait_for_metadata,
)
from tests.integration.test_replication import paused as paused_brokers

REASSIGN_TIMEOUT_S = 30.0
TAKEOVER_TIMEOUT_S = SESSION_TIMEOUT_S + 30


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "reassign", brokers=4,
                        controllers=2) as local:
        yield local


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> Iterator[Admin]:
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as client:
        yield client


@pytest.fixture(scope="module")
def writer(cluster: LocalCluster) -> Iterator[LowLevelClient]:
    with LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as client:
        yield client


@pytest.fixture(scope="module")
def brokers(cluster: LocalCluster) -> list[int]:
    return sorted(all_brokers(cluster))


def wait_for_replicas(cluster: LocalCluster, admin: Admin, tp: TopicPartition, replicas: list[int]) -> None:
    """Until the reassignment is over and every broker's metadata shows `replicas`, all in the ISR."""
    wait_until(lambda: not admin.list_partition_reassignments([tp]), REASSIGN_TIMEOUT_S, 0.1,
               message=f"the reassignment of {tp} to end")

    def settled(view) -> bool:
        p = view.get(tp.partition)
        return p is not None and list(p.replicas) == replicas and set(p.isr) == set(replicas) and p.leader >= 0

    wait_for_metadata(cluster, tp.topic, all_brokers(cluster), settled, REASSIGN_TIMEOUT_S,
                      f"{tp} on {replicas}")


def test_move_under_load_keeps_every_acknowledged_record(cluster, admin, writer, brokers):
    b1, b2, b3, _ = brokers
    topic = create_topic(admin, "moving", assignment={0: [b1, b2]})
    tp = TopicPartition(topic, 0)
    stop = threading.Event()
    producer = SteadyProducer(cluster, topic, 0, init_producer_id(cluster), stop)
    producer.start()
    try:
        wait_until(lambda: len(producer.acked) >= 50 or producer.failure, 20, message="records acknowledged")
        assert admin.alter_partition_reassignments({tp: [b2, b3]}) == {tp: None}
        wait_for_replicas(cluster, admin, tp, [b2, b3])
        acked_at_move = len(producer.acked)
        wait_until(lambda: len(producer.acked) >= acked_at_move + 50 or producer.failure, 20,
                   message="records acknowledged after the move")
    finally:
        stop.set()
        producer.join(30)
    assert producer.failure is None, producer.failure
    log = read_partition(writer, topic, 0)
    values = [v for _, v in log]
    assert len(values) == len(set(values)), "a record was written twice"
    by_offset = dict(log)
    for offset, value in producer.acked:
        if offset is not None:
            assert by_offset.get(offset) == value, f"acknowledged {value!r} at {offset}"
    acked_values = [v for _, v in producer.acked]
    assert set(acked_values) <= set(values)
    numbers = [SteadyProducer.number_of(v) for v in values]
    assert numbers == sorted(numbers)


def test_replication_factor_goes_from_one_to_three_and_back(cluster, admin, writer, brokers):
    b1, b2, b3, _ = brokers
    topic = create_topic(admin, "growing", assignment={0: [b1]})
    tp = TopicPartition(topic, 0)
    produce_values(writer, topic, 0, [b"a%d" % i for i in range(20)])
    assert admin.alter_partition_reassignments({tp: [b1, b2, b3]}) == {tp: None}
    wait_for_replicas(cluster, admin, tp, [b1, b2, b3])
    produce_values(writer, topic, 0, [b"b%d" % i for i in range(5)])
    assert admin.alter_partition_reassignments({tp: [b3]}) == {tp: None}
    wait_for_replicas(cluster, admin, tp, [b3])
    expected = [b"a%d" % i for i in range(20)] + [b"b%d" % i for i in range(5)]
    assert [v for _, v in read_partition(writer, topic, 0)] == expected


def test_a_reassignment_in_progress_is_listed_and_cancelled(cluster, admin, writer, brokers):
    b1, _, _, b4 = brokers
    topic = create_topic(admin, "cancelled", assignment={0: [b1]})
    tp = TopicPartition(topic, 0)
    produce_values(writer, topic, 0, [b"x"])
    # a paused target cannot catch up; it stays registered well within its session timeout
    with paused_brokers(cluster, b4):
        assert admin.alter_partition_reassignments({tp: [b1, b4]}) == {tp: None}
        assert admin.list_partition_reassignments() == {tp: ReplicaAssignment((b1, b4), (b4,), ())}
        assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
        assert admin.list_partition_reassignments() == {}
    wait_for_replicas(cluster, admin, tp, [b1])
    nowhere, missing = TopicPartition("nowhere", 0), TopicPartition(topic, 3)
    errors = admin.alter_partition_reassignments({tp: None, nowhere: [b1], missing: [b1]})
    assert errors[tp].error == Errors.NO_REASSIGNMENT_IN_PROGRESS
    assert errors[nowhere].error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert errors[missing].error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert admin.alter_partition_reassignments({tp: [b1, 999]})[tp].error == Errors.INVALID_REPLICA_ASSIGNMENT
    assert admin.alter_partition_reassignments({tp: [b1, b1]})[tp].error == Errors.INVALID_REPLICA_ASSIGNMENT


def test_a_legacy_reassignment_znode_is_carried_out_and_removed(cluster, admin, brokers):
    b1, _, b3, b4 = brokers
    topic = create_topic(admin, "legacy", assignment={0: [b1]})
    tp = TopicPartition(topic, 0)
    with zk_session(cluster.zookeeper_connect) as zk:
        assert zk.create_partition_reassignment({tp: [b3, b4]})
        wait_for_replicas(cluster, admin, tp, [b3, b4])
        wait_until(lambda: zk.get_partition_reassignment() is None, REASSIGN_TIMEOUT_S, 0.1,
                   message="/admin/reassign_partitions to be deleted")


def test_the_command_line_generates_executes_verifies_and_lists(cluster, admin, brokers, tmp_path, capsys):
    b1, b2, b3, b4 = brokers
    create_topic(admin, "tool", assignment={0: [b1], 1: [b2]})
    server = ["--bootstrap-server", cluster.bootstrap_servers]
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"topics": [{"topic": "tool"}], "version": 1}))
    code, lines = run_cli(["reassign-partitions", *server, "--generate", "--topics-to-move-json-file",
                           str(topics_file), "--broker-list", f"{b3},{b4}"], capsys)
    assert code == 0 and lines[0] == "Current partition replica assignment", lines
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])
    assert {tuple(p["replicas"]) for p in proposed["partitions"]} <= {(b3,), (b4,)}
    plan = tmp_path / "plan.json"
    plan.write_text(lines[4])

    code, lines = run_cli(["reassign-partitions", *server, "--execute", "--reassignment-json-file", str(plan)],
                          capsys)
    assert code == 0, lines
    assert lines[-1] == "Successfully started partition reassignments for tool-0,tool-1"
    assert json.loads(lines[2])["partitions"][0]["replicas"] == [b1]

    def verified() -> bool:
        code, lines = run_cli(["reassign-partitions", *server, "--verify", "--reassignment-json-file", str(plan)],
                              capsys)
        return code == 0 and lines == ["Status of partition reassignment:",
                                       "Reassignment of partition tool-0 is complete.",
                                       "Reassignment of partition tool-1 is complete."]

    wait_until(verified, REASSIGN_TIMEOUT_S, 0.2, message="--verify to report both partitions complete")
    assert run_cli(["reassign-partitions", *server, "--list"], capsys) == (0, ["No partition reassignments found."])
    code, lines = run_cli(["reassign-partitions", *server, "--cancel", "--reassignment-json-file", str(plan)],
                          capsys)
    assert (code, lines) == (0, ["None of the specified partition reassignments are active."])


def run_cli(argv: list[str], capsys) -> tuple[int, list[str]]:
    code = cli.main(argv)
    return code, capsys.readouterr().out.splitlines()


def test_the_next_controller_completes_a_reassignment_after_a_kill(cluster, admin, writer, brokers):
    b1, b2, _, b4 = brokers
    topic = create_topic(admin, "failover", assignment={0: [b1, b2]})
    tp = TopicPartition(topic, 0)
    produce_values(writer, topic, 0, [b"before-%d" % i for i in range(10)])
    with zk_session(cluster.zookeeper_connect) as zk:
        active = f"controller-{zk.get_controller().controller_id}"
        with paused_brokers(cluster, b4):
            assert admin.alter_partition_reassignments({tp: [b2, b4]}) == {tp: None}
            assert admin.list_partition_reassignments([tp])
            cluster.kill_service(active)

        def taken_over() -> bool:
            info = zk.get_controller()
            return info is not None and f"controller-{info.controller_id}" != active

        wait_until(taken_over, TAKEOVER_TIMEOUT_S, 0.2, message="the standby controller to take over")
    wait_for_replicas(cluster, admin, tp, [b2, b4])
    produce_values(writer, topic, 0, [b"after"])
    expected = [b"before-%d" % i for i in range(10)] + [b"after"]
    assert [v for _, v in read_partition(writer, topic, 0)] == expected
