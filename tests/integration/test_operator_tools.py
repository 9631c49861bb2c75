"""Kafka's operator tools on a real cluster (three brokers, one controller, automatic leader
rebalance off): `odradek delete-records`, `get-offsets`, `leader-election`, `configs`, and
`dump-log` over segment files a broker wrote."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.clients import cli
from services.clients.admin import Admin
from services.clients.lowlevel import LowLevelClient
from services.common.errors import Errors, KafkaError
from services.common.records import build_batch
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import TEST_CONTROLLER_CONFIG, create_topic, module_cluster, produce_values

READY_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "operator-tools", brokers=3,
                        controllers=1, controller_config={**TEST_CONTROLLER_CONFIG,
                                                          "auto.leader.rebalance.enable": "false"}) as local:
        yield local


def run(argv: list[str], capsys) -> tuple[int, list[str]]:
    code = cli.main(argv)
    return code, capsys.readouterr().out.splitlines()


def leader_of(admin: Admin, topic: str, partition: int = 0):
    return admin.describe_topics([topic])[topic].partitions[partition]


def test_delete_records_moves_the_log_start_and_get_offsets_shows_it(cluster: LocalCluster, admin: Admin,
                                                                      writer: LowLevelClient, tmp_path: Path,
                                                                      capsys):
    create_topic(admin, "trim", partitions=2)
    produce_values(writer, "trim", 0, [b"v%d" % i for i in range(10)])
    produce_values(writer, "trim", 1, [b"w%d" % i for i in range(5)])
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": "trim", "partition": 0, "offset": 4},
                                                  {"topic": "trim", "partition": 1, "offset": -1}],
                                   "version": 1}))

    code, lines = run(["delete-records", "--bootstrap-server", cluster.bootstrap_servers,
                       "--offset-json-file", str(offsets)], capsys)
    assert code == 0
    assert lines == ["Executing records delete operation", "Records delete operation completed:",
                     "partition: trim-0\tlow_watermark: 4", "partition: trim-1\tlow_watermark: 5"]

    below = writer.fetch("trim", 0, 2)
    assert below.error_code == Errors.OFFSET_OUT_OF_RANGE
    assert writer.fetch("trim", 0, 4).log_start_offset == 4

    get_offsets = ["get-offsets", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "trim"]
    assert run(get_offsets + ["--time", "-2"], capsys) == (0, ["trim:0:4", "trim:1:5"])
    assert run(get_offsets + ["--time", "-1", "--partitions", "0"], capsys) == (0, ["trim:0:10"])
    assert run(get_offsets, capsys) == (0, ["trim:0:10", "trim:1:5"])

    # beyond the high watermark: the partition's error, the others' low watermarks
    results = admin.delete_records({TopicPartition("trim", 0): 99, TopicPartition("trim", 1): 5},
                                   raise_errors=False)
    assert isinstance(results[TopicPartition("trim", 0)], KafkaError)
    assert results[TopicPartition("trim", 0)].code == Errors.OFFSET_OUT_OF_RANGE
    assert results[TopicPartition("trim", 1)] == 5
    offsets.write_text(json.dumps({"partitions": [{"topic": "trim", "partition": 0, "offset": 99}]}))
    code, lines = run(["delete-records", "--bootstrap-server", cluster.bootstrap_servers,
                       "--offset-json-file", str(offsets)], capsys)
    assert code == 0 and lines[2].startswith("partition: trim-0\terror: OFFSET_OUT_OF_RANGE")


def test_preferred_election_moves_leadership_back_to_a_restarted_broker(cluster: LocalCluster, admin: Admin,
                                                                         writer: LowLevelClient, tmp_path: Path,
                                                                         capsys):
    create_topic(admin, "elect", assignment={0: [1, 2]})
    produce_values(writer, "elect", 0, [b"a", b"b"])
    elect = ["leader-election", "--bootstrap-server", cluster.bootstrap_servers, "--election-type", "preferred"]
    assert run(elect + ["--topic", "elect", "--partition", "0"], capsys) == (
        0, ["Valid replica already elected for partitions elect-0"])

    # the follower takes the leader's new log start offset from its next fetch (the one that
    # replicates "c", before acks=all answers)
    assert admin.delete_records({TopicPartition("elect", 0): 1}) == {TopicPartition("elect", 0): 1}
    produce_values(writer, "elect", 0, [b"c"])
    cluster.stop_service(cluster.broker_name(1))
    try:
        wait_until(lambda: leader_of(admin, "elect").leader == 2, READY_TIMEOUT_S, message="broker 2 leads")
        assert admin.list_offsets({TopicPartition("elect", 0): "earliest"})[TopicPartition("elect", 0)].offset == 1
        code, lines = run(elect + ["--topic", "elect", "--partition", "0"], capsys)
        assert code == 1
        assert lines[0].startswith("Error completing leader election (PREFERRED) for partition: elect-0: "
                                   "PREFERRED_LEADER_NOT_AVAILABLE")
        assert lines[-1] == "Error: 1 replica(s) could not be elected"
    finally:
        cluster.start_service(cluster.broker_name(1))
    wait_until(lambda: set(leader_of(admin, "elect").isr) == {1, 2}, READY_TIMEOUT_S,
               message="broker 1 back in the ISR")
    assert leader_of(admin, "elect").leader == 2

    partitions = tmp_path / "partitions.json"
    partitions.write_text(json.dumps({"partitions": [{"topic": "elect", "partition": 0}]}))
    assert run(elect + ["--path-to-json-file", str(partitions)], capsys) == (
        0, ["Successfully completed leader election (PREFERRED) for partitions elect-0"])
    wait_until(lambda: leader_of(admin, "elect").leader == 1, READY_TIMEOUT_S, message="broker 1 leads again")
    assert admin.elect_leaders("preferred", [TopicPartition("elect", 0)])[TopicPartition("elect", 0)].code == \
        Errors.ELECTION_NOT_NEEDED
    code, lines = run(elect[:-2] + ["--election-type", "unclean", "--all-topic-partitions"], capsys)
    assert code == 0 and lines[0].startswith("Valid replica already elected for partitions ")
    assert "elect-0" in lines[0]


def test_configs_describes_adds_and_deletes_topic_configs(cluster: LocalCluster, admin: Admin, capsys):
    create_topic(admin, "conf")
    configs = ["configs", "--bootstrap-server", cluster.bootstrap_servers, "--entity-type", "topics",
               "--entity-name", "conf"]
    assert run(configs + ["--describe"], capsys) == (0, ["Dynamic configs for topic conf are:"])
    assert run(configs + ["--alter", "--add-config", "retention.ms=60000,cleanup.policy=[compact,delete]"],
               capsys) == (0, ["Completed updating config for topic conf."])
    code, lines = run(configs + ["--describe"], capsys)
    assert code == 0 and lines[0] == "Dynamic configs for topic conf are:"
    assert lines[1].startswith("  cleanup.policy=compact,delete sensitive=false synonyms={"
                               "DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete")
    assert lines[2].startswith("  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000")
    assert len(lines) == 3

    assert run(configs + ["--alter", "--delete-config", "retention.ms"], capsys) == (
        0, ["Completed updating config for topic conf."])
    code, lines = run(configs + ["--describe"], capsys)
    assert [line.split(" ")[2] for line in lines[1:]] == ["cleanup.policy=compact,delete"]
    assert run(configs + ["--alter", "--delete-config", "retention.ms"], capsys) == (
        1, ["Error: Invalid config(s): retention.ms"])
    assert run(["configs", "--bootstrap-server", cluster.bootstrap_servers, "--entity-type", "brokers",
                "--entity-name", "1", "--describe"], capsys) == (0, ["Dynamic configs for broker 1 are:"])
    with pytest.raises(SystemExit) as exited:  # SCRAM users are kept in ZooKeeper: --zookeeper
        run(["configs", "--bootstrap-server", cluster.bootstrap_servers, "--entity-type", "users",
             "--entity-name", "u", "--describe"], capsys)
    assert exited.value.code == 2
    assert "--entity-type users needs --zookeeper" in capsys.readouterr().err


def test_dump_log_reads_the_segments_a_broker_wrote(cluster: LocalCluster, admin: Admin, writer: LowLevelClient,
                                                    capsys):
    create_topic(admin, "dump", assignment={0: [3]}, configs={"segment.bytes": "400", "index.interval.bytes": "1"})
    for start in range(0, 12, 3):
        batch = build_batch([b"value-%d" % i for i in range(start, start + 3)],
                            [b"key-%d" % i if i % 2 == 0 else None for i in range(start, start + 3)])
        assert writer.produce("dump", 0, batch, acks=-1).error_code == Errors.NONE
    directory = cluster.data_dir(cluster.broker_name(3)) / "dump-0"
    segments = sorted(directory.glob("*.log"))
    assert len(segments) >= 2, sorted(p.name for p in directory.iterdir())
    first = segments[0]

    code, lines = run(["dump-log", "--files", str(first), "--print-data-log"], capsys)
    assert code == 0
    assert lines[:2] == [f"Dumping {first}", "Log starting offset: 0"]
    batches = [line for line in lines if line.startswith("baseOffset: ")]
    assert batches[0].startswith("baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 "
                                 "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 "
                                 "isTransactional: false isControl: false position: 0 CreateTime: ")
    assert " magic: 2 compresscodec: none crc: " in batches[0] and batches[0].endswith(" isvalid: true")
    records = [line for line in lines if line.startswith("| offset: ")]
    assert records[0].startswith("| offset: 0 CreateTime: ")
    assert records[0].endswith(" keySize: 5 valueSize: 7 sequence: -1 headerKeys: [] key: key-0 payload: value-0")
    assert records[1].endswith(" keySize: -1 valueSize: 7 sequence: -1 headerKeys: [] payload: value-1")

    code, plain = run(["dump-log", "--files", str(first)], capsys)
    assert code == 0 and [line for line in plain if line.startswith("baseOffset")] == batches
    assert not any(line.startswith("|") for line in plain)

    index, time_index = first.with_suffix(".index"), first.with_suffix(".timeindex")
    code, lines = run(["dump-log", "--files", f"{index},{time_index}"], capsys)
    assert code == 0 and lines[0] == f"Dumping {index}"
    positions = {line.split(" position: ")[1].split(" ")[0] for line in batches}
    index_lines = lines[1:lines.index(f"Dumping {time_index}")]
    assert index_lines and all(line.startswith("offset: ") for line in index_lines)
    assert {line.split(" position: ")[1] for line in index_lines} <= positions
    assert all(line.startswith("timestamp: ") for line in lines[lines.index(f"Dumping {time_index}") + 1:])
    assert run(["dump-log", "--files", f"{index},{time_index}", "--index-sanity-check"], capsys) == (
        0, [f"Dumping {index}", f"{index} passed sanity check.",
            f"Dumping {time_index}", f"{time_index} passed sanity check."])
