"""Parsing and output of `odradek delete-records`, `leader-election`, `get-offsets`, `configs` and
`dump-log`, and the DeleteRecords requests the admin client sends."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest

from services.clients import cli, cli_configs, cli_dump_log, cli_partitions
from services.clients.admin_types import BROKER_RESOURCE, ConfigEntry, ConfigSynonym
from services.clients.partition_requests import delete_records_request, parse_delete_records
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.records import build_batch, build_control_batch
from services.common.topic_partition import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


# --------------------------------------------------------------------------------------------- delete-records

def test_offset_json_is_read_as_kafka_writes_it():
    document = {"partitions": [{"topic": "t", "partition": 0, "offset": 10},
                               {"topic": "t", "partition": 1, "offset": -1}], "version": 1}
    assert cli_partitions.parse_offset_json(document) == {T0: 10, T1: -1}


@pytest.mark.parametrize("document, message", [
    ({"version": 1}, 'no "partitions" list'),
    ({"partitions": [{"topic": "t", "partition": 0}]}, '"topic", "partition" and "offset"'),
    ({"partitions": [{"topic": "t", "partition": 0, "offset": 1}, {"topic": "t", "partition": 0, "offset": 2}]},
     "duplicate topic partitions: t-0"),
])
def test_bad_offset_json_is_a_user_error(document, message):
    with pytest.raises(cli_partitions.PartitionCommandError, match=message):
        cli_partitions.parse_offset_json(document)


def test_delete_records_output_has_kafkas_lines():
    error = KafkaError("beyond the high watermark", error=Errors.OFFSET_OUT_OF_RANGE)
    assert cli_partitions.format_delete_records({T0: 4, T1: error}) == [
        "Records delete operation completed:",
        "partition: t-0\tlow_watermark: 4",
        "partition: t-1\terror: OFFSET_OUT_OF_RANGE (1): beyond the high watermark",
    ]


def test_delete_records_request_groups_partitions_by_topic_and_reads_low_watermarks():
    request = delete_records_request({T0: 5, T1: -1, TopicPartition("u", 0): 2}, 3000)
    assert [(t.name, [(p.partition_index, p.offset) for p in t.partitions]) for t in request.topics] == [
        ("t", [(0, 5), (1, -1)]), ("u", [(0, 2)])]
    assert request.timeout_ms == 3000
    response = broker_pb2.DeleteRecordsResponse()
    response.topics.add(name="t").partitions.add(partition_index=0, low_watermark=5)
    response.topics[0].partitions.add(partition_index=1, low_watermark=-1, error_code=Errors.NOT_LEADER_OR_FOLLOWER)
    assert parse_delete_records(response) == {T0: (0, (0, 5)), T1: (6, (6, -1))}


# --------------------------------------------------------------------------------------------- leader-election

def test_election_output_has_kafkas_lines():
    results = {T1: None, T0: None, TopicPartition("u", 0): KafkaError(error=Errors.ELECTION_NOT_NEEDED),
               TopicPartition("v", 3): KafkaError("broker 1 is down", error=Errors.PREFERRED_LEADER_NOT_AVAILABLE)}
    lines, failures = cli_partitions.format_election("PREFERRED", results)
    assert lines == [
        "Successfully completed leader election (PREFERRED) for partitions t-0, t-1",
        "Valid replica already elected for partitions u-0",
        "Error completing leader election (PREFERRED) for partition: v-3: "
        "PREFERRED_LEADER_NOT_AVAILABLE (80): broker 1 is down",
    ]
    assert failures == 1


@pytest.mark.parametrize("flags", [
    [],
    ["--topic", "t"],
    ["--topic", "t", "--partition", "0", "--all-topic-partitions"],
    ["--all-topic-partitions", "--path-to-json-file", "f.json"],
])
def test_election_needs_exactly_one_way_of_naming_partitions(flags, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["leader-election", "--bootstrap-server", "127.0.0.1:1", "--election-type", "preferred", *flags])
    assert exit_info.value.code == 2


def test_election_partitions_come_from_the_flags_or_the_json_file(tmp_path: Path):
    parser = cli.build_parser()
    args = parser.parse_args(["leader-election", "--bootstrap-server", "b", "--election-type", "unclean",
                              "--topic", "t", "--partition", "1"])
    assert args.election_type == "UNCLEAN" and cli_partitions.election_partitions(args) == [T1]
    path = tmp_path / "p.json"
    path.write_text('{"partitions": [{"topic": "t", "partition": 0}, {"topic": "u", "partition": 2}]}')
    args = parser.parse_args(["leader-election", "--bootstrap-server", "b", "--election-type", "preferred",
                              "--path-to-json-file", str(path)])
    assert cli_partitions.election_partitions(args) == [T0, TopicPartition("u", 2)]
    args = parser.parse_args(["leader-election", "--bootstrap-server", "b", "--election-type", "preferred",
                              "--all-topic-partitions"])
    assert cli_partitions.election_partitions(args) is None


# --------------------------------------------------------------------------------------------- get-offsets

def test_get_offsets_parses_times_and_partitions():
    assert cli_partitions.parse_time("-1") == -1 and cli_partitions.parse_time("-2") == -2
    assert cli_partitions.parse_time("1700000000000") == 1700000000000
    with pytest.raises(cli_partitions.PartitionCommandError, match="-3"):
        cli_partitions.parse_time("-3")
    with pytest.raises(cli_partitions.PartitionCommandError):
        cli_partitions.parse_time("latest")
    assert cli_partitions.parse_partition_ids("0, 2") == {0, 2}
    assert cli_partitions.parse_partition_ids(None) is None


def test_get_offsets_prints_sorted_topic_partition_offset_lines():
    assert cli_partitions.format_offsets({TopicPartition("b", 0): 3, TopicPartition("a", 10): 1,
                                          TopicPartition("a", 2): -1}) == ["a:2:", "a:10:1", "b:0:3"]


# --------------------------------------------------------------------------------------------- configs

def test_add_config_keeps_bracketed_lists_whole():
    assert cli_configs.parse_add_config("retention.ms=1000,cleanup.policy=[compact,delete]") == {
        "retention.ms": "1000", "cleanup.policy": "compact,delete"}
    with pytest.raises(cli_configs.ConfigCommandError, match="key=val"):
        cli_configs.parse_add_config("retention.ms")
    assert cli_configs.parse_delete_config("a, b,") == ["a", "b"]


def test_describe_prints_dynamic_configs_with_their_synonyms():
    dynamic = ConfigEntry("retention.ms", "1000", 1, synonyms=(ConfigSynonym("retention.ms", "1000", 1),
                                                               ConfigSynonym("log.retention.ms", None, 5)))
    default = ConfigEntry("segment.bytes", "1073741824", 5)
    secret = ConfigEntry("a.password", "x", 1, is_sensitive=True)
    assert cli_configs.format_describe("t", [dynamic, default, secret], describe_all=False) == [
        "Dynamic configs for topic t are:",
        "  a.password=null sensitive=true synonyms={}",
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "
        "DEFAULT_CONFIG:log.retention.ms=null}",
    ]
    assert cli_configs.format_describe("t", [default], describe_all=True)[0] == "All configs for topic t are:"


def test_describe_prints_a_brokers_or_the_defaults_dynamic_configs():
    own = ConfigEntry("log.retention.ms", "30000", 2, synonyms=(ConfigSynonym("log.retention.ms", "30000", 2),
                                                                ConfigSynonym("log.retention.ms", "60000", 3)))
    inherited = ConfigEntry("log.segment.bytes", "1048576", 3)
    assert cli_configs.format_describe("1", [own, inherited], False, BROKER_RESOURCE) == [
        "Dynamic configs for broker 1 are:",
        "  log.retention.ms=30000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=30000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=60000}",
    ]
    assert cli_configs.format_describe("", [inherited], False, BROKER_RESOURCE) == [
        "Default configs for brokers in the cluster are:",
        "  log.segment.bytes=1048576 sensitive=false synonyms={}",
    ]


@pytest.mark.parametrize("entity_type, flags", [
    ("topics", ["--alter"]),
    ("topics", ["--alter", "--entity-name", "t"]),
    ("topics", ["--describe", "--add-config", "a=1"]),
    ("topics", ["--describe", "--entity-default"]),
    ("brokers", ["--alter", "--add-config", "a=1"]),
    ("brokers", ["--describe", "--entity-default", "--entity-name", "1"]),
])
def test_configs_flag_rules(entity_type, flags, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["configs", "--bootstrap-server", "127.0.0.1:1", "--entity-type", entity_type, *flags])
    assert exit_info.value.code == 2


# --------------------------------------------------------------------------------------------- dump-log

def _run_dump(argv: list[str]) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = cli_dump_log.run(cli.build_parser().parse_args(["dump-log", *argv]), out)
    return code, out.getvalue().splitlines()


def test_dump_log_prints_batches_records_and_markers(tmp_path: Path):
    first = bytearray(build_batch([b"a", b"b"], [b"k", None], timestamps=1000))
    marker = build_control_batch(True, producer_id=7, producer_epoch=1, coordinator_epoch=3, base_offset=2,
                                 timestamp_ms=2000)
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(bytes(first) + marker)

    code, lines = _run_dump(["--files", str(segment), "--print-data-log"])
    assert code == 0
    assert lines[0] == f"Dumping {segment}" and lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1")
    assert lines[2].endswith(f"position: 0 CreateTime: 1000 size: {len(first)} magic: 2 compresscodec: none "
                             f"crc: {struct.unpack('>I', first[17:21])[0]} isvalid: true")
    assert lines[3] == ("| offset: 0 CreateTime: 1000 keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] "
                        "key: k payload: a")
    assert lines[4] == "| offset: 1 CreateTime: 1000 keySize: -1 valueSize: 1 sequence: -1 headerKeys: [] payload: b"
    assert " producerId: 7 producerEpoch: 1 " in lines[5] and " isTransactional: true isControl: true " in lines[5]
    assert lines[6].endswith("endTxnMarker: COMMIT coordinatorEpoch: 3")


def test_dump_log_marks_a_corrupt_batch_invalid(tmp_path: Path):
    batch = bytearray(build_batch([b"value"]))
    batch[-1] ^= 0xFF
    segment = tmp_path / "00000000000000000042.log"
    segment.write_bytes(bytes(batch) + b"\x00\x01")
    code, lines = _run_dump(["--files", str(segment), "--deep-iteration"])
    assert code == 0 and lines[1] == "Log starting offset: 42"
    assert lines[2].endswith("isvalid: false")
    assert lines[3] == "Found 2 invalid bytes at the end of 00000000000000000042.log"


def test_dump_log_reads_index_entries_up_to_the_preallocated_zeros(tmp_path: Path):
    index = tmp_path / "00000000000000000100.index"
    index.write_bytes(struct.pack(">iiii", 0, 0, 5, 180) + bytes(8 * 4))
    time_index = tmp_path / "00000000000000000100.timeindex"
    time_index.write_bytes(struct.pack(">qiqi", 1000, 2, 2000, 7) + bytes(12 * 2))
    code, lines = _run_dump(["--files", f"{index},{time_index}"])
    assert code == 0
    assert lines == [f"Dumping {index}", "offset: 100 position: 0", "offset: 105 position: 180",
                     f"Dumping {time_index}", "timestamp: 1000 offset: 102", "timestamp: 2000 offset: 107"]
    assert _run_dump(["--files", str(index), "--index-sanity-check"]) == (
        0, [f"Dumping {index}", f"{index} passed sanity check."])


def test_index_sanity_check_fails_on_disorder_and_partial_entries(tmp_path: Path, capsys):
    index = tmp_path / "00000000000000000000.index"
    index.write_bytes(struct.pack(">iiii", 0, 0, 9, 100) + struct.pack(">ii", 3, 200))
    assert _run_dump(["--files", str(index), "--index-sanity-check"])[0] == 1
    assert "offsets are not in order" in capsys.readouterr().err
    index.write_bytes(struct.pack(">ii", 0, 0) + b"\x01")
    assert _run_dump(["--files", str(index), "--index-sanity-check"])[0] == 1
    assert "not a multiple of 8" in capsys.readouterr().err


def test_dump_log_refuses_other_files(tmp_path: Path, capsys):
    other = tmp_path / "leader-epoch-checkpoint"
    other.write_text("0\n")
    assert _run_dump(["--files", str(other)]) == (1, [f"Dumping {other}"])
    assert "only .log, .index and .timeindex" in capsys.readouterr().err


def test_dump_log_decompresses_and_numbers_sequences(tmp_path: Path):
    batch = build_batch([b"x", b"y"], compression="gzip", producer_id=5, producer_epoch=0, base_sequence=7,
                        timestamps=3000)
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(batch)
    code, lines = _run_dump(["--files", str(segment), "--deep-iteration"])
    assert code == 0
    assert " baseSequence: 7 lastSequence: 8 producerId: 5 producerEpoch: 0 " in lines[2]
    assert " compresscodec: gzip " in lines[2]
    assert lines[3:] == ["| offset: 0 CreateTime: 3000 keySize: -1 valueSize: 1 sequence: 7 headerKeys: []",
                         "| offset: 1 CreateTime: 3000 keySize: -1 valueSize: 1 sequence: 8 headerKeys: []"]
