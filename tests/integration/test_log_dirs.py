"""DescribeLogDirs on a real cluster (two brokers, one controller): `Admin.describe_log_dirs` and
`odradek log-dirs --describe` report each broker's log dir, its partition logs and their sizes;
kafka-python's admin client asks the same over the Kafka protocol."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kafka.admin import KafkaAdminClient

from services.clients import cli
from services.clients.admin import Admin
from services.clients.lowlevel import LowLevelClient
from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import create_topic, module_cluster, produce_values

BROKERS = [1, 2]
REPLICATED_TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "log-dirs", brokers=2,
                        controllers=1) as local:
        yield local


def sizes(admin: Admin, topic: str) -> dict[tuple[int, TopicPartition], int]:
    """{(broker, partition): size} of every replica of `topic`."""
    return {(broker, tp): info.size
            for broker, dirs in admin.describe_log_dirs(BROKERS).items()
            for description in dirs.values() for tp, info in description.replica_infos.items() if tp.topic == topic}


def test_sizes_grow_after_producing_on_every_replica(cluster: LocalCluster, admin: Admin, writer: LowLevelClient):
    create_topic(admin, "grow", partitions=2, replication=2)
    before = sizes(admin, "grow")
    assert set(before) == {(b, TopicPartition("grow", p)) for b in BROKERS for p in (0, 1)}
    assert set(before.values()) == {0}

    produce_values(writer, "grow", 0, [b"x" * 100 for _ in range(20)])
    wait_until(lambda: all(size > 2000 for (_b, tp), size in sizes(admin, "grow").items() if tp.partition == 0),
               REPLICATED_TIMEOUT_S, message="both replicas of grow-0 hold the batch")
    after = sizes(admin, "grow")
    assert after[(1, TopicPartition("grow", 0))] == after[(2, TopicPartition("grow", 0))]
    assert after[(1, TopicPartition("grow", 1))] == 0

    described = admin.describe_log_dirs(BROKERS)
    for broker in BROKERS:
        (log_dir, description), = described[broker].items()
        assert log_dir == str(cluster.data_dir(cluster.broker_name(broker)).resolve())
        assert description.error is None
        for info in description.replica_infos.values():
            assert (info.offset_lag, info.is_future) == (0, False)


def test_an_unknown_broker_is_not_available(admin: Admin):
    with pytest.raises(KafkaError) as raised:
        admin.describe_log_dirs([99], timeout_ms=5000)
    assert raised.value.error == Errors.BROKER_NOT_AVAILABLE
    assert admin.describe_log_dirs([1, 99], raise_errors=False)[99].error == Errors.BROKER_NOT_AVAILABLE


def test_cli_prints_kafkas_json_filtered_by_topic(cluster: LocalCluster, admin: Admin, writer: LowLevelClient,
                                                  capsys):
    create_topic(admin, "shown", partitions=1, replication=2)
    create_topic(admin, "hidden", partitions=1, replication=1)
    produce_values(writer, "shown", 0, [b"s%d" % i for i in range(5)])
    produce_values(writer, "hidden", 0, [b"h%d" % i for i in range(5)])
    wait_until(lambda: [size > 0 for size in sizes(admin, "shown").values()] == [True, True],
               REPLICATED_TIMEOUT_S, message="both replicas of shown-0 hold the batch")

    code = cli.main(["log-dirs", "--bootstrap-server", cluster.bootstrap_servers, "--describe",
                     "--broker-list", "1,2", "--topic-list", "shown"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0, lines
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 1,2"]
    printed = json.loads(lines[2])
    assert printed["version"] == 1 and [b["broker"] for b in printed["brokers"]] == BROKERS

    expected = admin.describe_log_dirs(BROKERS)
    for broker in printed["brokers"]:
        (log_dir, description), = expected[broker["broker"]].items()
        info = description.replica_infos[TopicPartition("shown", 0)]
        assert broker["logDirs"] == [{"logDir": log_dir, "error": None, "partitions": [
            {"partition": "shown-0", "size": info.size, "offsetLag": 0, "isFuture": False}]}]

    code = cli.main(["log-dirs", "--bootstrap-server", cluster.bootstrap_servers, "--describe"])
    everything = json.loads(capsys.readouterr().out.splitlines()[2])
    listed = {p["partition"] for b in everything["brokers"] for d in b["logDirs"] for p in d["partitions"]}
    assert code == 0 and {"shown-0", "hidden-0"} <= listed


def test_kafka_python_describes_the_log_dirs_over_the_kafka_protocol(cluster: LocalCluster, admin: Admin,
                                                                    writer: LowLevelClient):
    create_topic(admin, "wire", partitions=1, replication=2)
    produce_values(writer, "wire", 0, [b"w%d" % i for i in range(5)])
    wait_until(lambda: [size > 0 for size in sizes(admin, "wire").values()] == [True, True],
               REPLICATED_TIMEOUT_S, message="both replicas of wire-0 hold the batch")
    expected = admin.describe_log_dirs(BROKERS)
    client = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers, request_timeout_ms=10000)
    try:
        answers = client.describe_log_dirs({"wire": [0]}, brokers=BROKERS)
    finally:
        client.close()
    for answer in answers:
        (log_dir, description), = expected[answer["broker"]].items()
        (result,) = answer["log_dirs"]
        assert (result["error_code"], result["log_dir"]) == (0, log_dir)
        assert result["total_bytes"] > 0 and 0 < result["usable_bytes"] <= result["total_bytes"]
        (topic,) = result["topics"]
        assert topic["name"] == "wire"
        assert [(p["partition_index"], p["partition_size"], p["offset_lag"], p["is_future_key"])
                for p in topic["partitions"]] == [(0, description.replica_infos[TopicPartition("wire", 0)].size,
                                                   0, False)]
