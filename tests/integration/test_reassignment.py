"""Partition reassignment on real services: four brokers, two controllers, one ZooKeeper.

A partition moves from two brokers to two others under an acks=all load, and every acknowledged
record is read back once and in order; a replication factor goes from 1 to 3; a reassignment
held back by a paused target broker is cancelled; one written to `/admin/reassign_partitions` as
an old tool does completes and the znode goes; `odradek reassign-partitions` generates, executes,
verifies and lists; and a reassignment in progress when the active
controller is killed with SIGKILL is completed by the next controller. A reassignment throttled by
`--execute --throttle` copies a partition no faster than the rate, and `--verify` removes the
throttle once it is complete; the tool raises a replication factor from 1 to 3.
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
        return code == 0 and lines[:3] == ["Status of partition reassignment:",
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


THROTTLE_BYTES_PER_S = 1 << 20
MOVED_MIB = 6


def fill(writer: LowLevelClient, topic: str, mib: int) -> list[bytes]:
    """`mib` MiB of distinct 64 KiB values, in batches well under message.max.bytes."""
    values = [b"%06d" % i + b"v" * (64 * 1024 - 6) for i in range(mib * 16)]
    for start in range(0, len(values), 8):
        produce_values(writer, topic, 0, values[start:start + 8])
    return values


def timed_move(cluster, capsys, tmp_path, topic: str, replicas: list[int], *throttle: str) -> tuple[float, list[str]]:
    """Seconds from `--execute` until `--verify` reports the move complete, and --verify's lines."""
    server = ["--bootstrap-server", cluster.bootstrap_servers]
    plan = tmp_path / f"{topic}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]}))
    started = time.monotonic()
    code, lines = run_cli(["reassign-partitions", *server, "--execute", "--reassignment-json-file", str(plan),
                           *throttle], capsys)
    assert code == 0, lines
    verified: list[str] = []

    def complete() -> bool:
        code, lines = run_cli(["reassign-partitions", *server, "--verify", "--reassignment-json-file", str(plan)],
                              capsys)
        verified[:] = lines
        return code == 0 and lines[1] == f"Reassignment of partition {topic}-0 is complete."

    wait_until(complete, 60, 0.2, message=f"the move of {topic}")
    return time.monotonic() - started, verified


def test_a_throttled_move_keeps_to_the_rate_and_verify_removes_the_throttle(cluster, admin, writer, brokers,
                                                                            tmp_path, capsys):
    b1, b2, b3, _ = brokers
    for topic in ("unthrottled", "throttled"):
        create_topic(admin, topic, assignment={0: [b1]})
    expected = fill(writer, "unthrottled", MOVED_MIB)
    assert fill(writer, "throttled", MOVED_MIB) == expected
    free_s, _ = timed_move(cluster, capsys, tmp_path, "unthrottled", [b1, b2])

    server = ["--bootstrap-server", cluster.bootstrap_servers]
    plan = tmp_path / "throttled.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "throttled", "partition": 0,
                                                              "replicas": [b1, b3]}]}))
    started = time.monotonic()
    code, lines = run_cli(["reassign-partitions", *server, "--execute", "--reassignment-json-file", str(plan),
                           "--throttle", str(THROTTLE_BYTES_PER_S)], capsys)
    assert code == 0, lines
    assert f"The inter-broker replication throttle is {THROTTLE_BYTES_PER_S} B/s on brokers {b1},{b3}" in lines[-3]
    topic_configs = admin.describe_configs(["throttled"])["throttled"]
    assert topic_configs["leader.replication.throttled.replicas"].value == f"0:{b1}"
    assert topic_configs["follower.replication.throttled.replicas"].value == f"0:{b3}"
    for broker in (b1, b3):
        rates = admin.describe_configs([str(broker)], resource_type=BROKER_RESOURCE)[str(broker)]
        assert rates["leader.replication.throttled.rate"].value == str(THROTTLE_BYTES_PER_S)
        assert rates["follower.replication.throttled.rate"].value == str(THROTTLE_BYTES_PER_S)
    tp = TopicPartition("throttled", 0)

    def copied_bytes() -> int:
        dirs = admin.describe_log_dirs([b3])[b3]
        return max((d.replica_infos[tp].size for d in dirs.values() if tp in d.replica_infos), default=0)

    wait_until(lambda: copied_bytes() >= 2 << 20, 30, 0.1, message="2 MiB copied to the new replica")
    assert admin.list_partition_reassignments([tp]), "the throttled copy is over early"
    assert b3 not in admin.describe_topics(["throttled"])["throttled"].partitions[0].isr

    verified: list[str] = []

    def complete() -> bool:
        code, lines = run_cli(["reassign-partitions", *server, "--verify", "--reassignment-json-file", str(plan)],
                              capsys)
        verified[:] = lines
        return code == 0 and lines[1] == "Reassignment of partition throttled-0 is complete."

    wait_until(complete, 60, 0.2, message="the throttled move")
    throttled_s = time.monotonic() - started
    # the rate over at least one 1 s window lets a window's worth go at once: the rest goes at the rate
    assert throttled_s >= 0.7 * (MOVED_MIB - 1), (throttled_s, free_s)
    assert free_s < 0.75 * throttled_s, (throttled_s, free_s)
    assert verified[2] == f"Removed the replication throttle rates of brokers {','.join(map(str, brokers))}"
    assert verified[3] == "Removed the throttled replicas of topic throttled"
    topic_configs = admin.describe_configs(["throttled"])["throttled"]
    assert "leader.replication.throttled.replicas" not in topic_configs or \
        topic_configs["leader.replication.throttled.replicas"].value == ""
    rates = admin.describe_configs([str(b3)], resource_type=BROKER_RESOURCE)[str(b3)]
    assert "leader.replication.throttled.rate" not in rates
    wait_for_replicas(cluster, admin, tp, [b1, b3])
    assert [v for _, v in read_partition(writer, "throttled", 0)] == expected
    print(f"moved {MOVED_MIB} MiB: unthrottled in {free_s:.1f} s, at {THROTTLE_BYTES_PER_S} B/s in {throttled_s:.1f} s")


def test_the_command_line_raises_a_replication_factor_from_one_to_three(cluster, admin, writer, brokers,
                                                                      tmp_path, capsys):
    b1, b2, b3, _ = brokers
    topic = create_topic(admin, "factor", assignment={0: [b2], 1: [b3]})
    values = {p: [b"%d-%d" % (p, i) for i in range(200)] for p in (0, 1)}
    for p, vals in values.items():
        for start in range(0, len(vals), 50):
            produce_values(writer, topic, p, vals[start:start + 50])
    server = ["--bootstrap-server", cluster.bootstrap_servers]
    plan = tmp_path / "factor.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [b2, b1, b3]},
        {"topic": topic, "partition": 1, "replicas": [b3, b2, b1]}]}))
    code, lines = run_cli(["reassign-partitions", *server, "--execute", "--reassignment-json-file", str(plan)],
                          capsys)
    assert code == 0 and lines[-1] == f"Successfully started partition reassignments for {topic}-0,{topic}-1", lines

    def complete() -> bool:
        code, lines = run_cli(["reassign-partitions", *server, "--verify", "--reassignment-json-file", str(plan)],
                              capsys)
        return code == 0 and all(line.endswith(" is complete.") for line in lines[1:3])

    wait_until(complete, REASSIGN_TIMEOUT_S, 0.2, message="the replication factor to reach 3")
    wait_for_replicas(cluster, admin, TopicPartition(topic, 0), [b2, b1, b3])
    wait_for_replicas(cluster, admin, TopicPartition(topic, 1), [b3, b2, b1])
    for p, vals in values.items():
        assert [v for _, v in read_partition(writer, topic, p)] == vals
