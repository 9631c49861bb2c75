"""Tests for the `odradek` command line: argument rules, Kafka's output formats, and the topics,
produce, fetch and dev commands run against fake brokers and controllers."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from services.clients import cli
from services.clients.admin_types import ConfigEntry, TopicDescription
from services.clients.cli_topics import (
    TopicCommandError,
    filter_topics,
    format_partition_line,
    format_topic_line,
    parse_configs,
    parse_replica_assignment,
)
from services.clients.cluster import PartitionInfo
from services.common.errors import Errors
from services.common.hashing import partition_for_key
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.controller.v1 import controller_pb2 as pb
from services.common.records import build_batch, iter_records
from services.devcluster.cli import failure_report
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import write_pid_file
from tests.unit.clients.support import FakeNode, metadata_response, partition


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --------------------------------------------------------------------------------------------- parsing

@pytest.mark.parametrize("argv", [
    ["topics", "--bootstrap-server", "h:1"],                                  # no action
    ["topics", "--bootstrap-server", "h:1", "--list", "--describe"],          # two actions
    ["topics", "--list"],                                                     # no bootstrap server
    ["topics", "--bootstrap-server", "h:1", "--create"],                      # no topic
    ["topics", "--bootstrap-server", "h:1", "--alter", "--topic", "t"],       # nothing to alter
    ["topics", "--bootstrap-server", "h:1", "--list", "--partitions", "3"],
    ["topics", "--bootstrap-server", "h:1", "--describe", "--if-not-exists"],
    ["topics", "--bootstrap-server", "h:1", "--alter", "--topic", "t", "--partitions", "2",
     "--replication-factor", "2"],
    ["topics", "--bootstrap-server", "h:1", "--create", "--topic", "t", "--replica-assignment", "1:2",
     "--partitions", "1"],
    ["topics", "--bootstrap-server", "h:1", "--alter", "--topic", "t", "--replica-assignment", "1:2",
     "--config", "a=b"],
    ["dev", "up", "--brokers", "0"],
    ["dev", "start"],                                                         # no service
    ["dev", "restart", "broker-1", "broker-2"],                               # one service at a time
    ["dev", "kill", "broker-1", "--timeout", "5"],                            # SIGKILL waits for nothing
    ["dev", "stop", "broker-1", "--timeout", "soon"],
    ["fetch", "--bootstrap-server", "h:1", "--topic", "t"],                   # no partition
])
def test_usage_errors_exit_with_2(argv, capsys):
    with pytest.raises(SystemExit) as raised:
        cli.main(argv)
    assert raised.value.code == 2
    assert "usage: odradek " in capsys.readouterr().err


def test_dev_defaults():
    args = cli.build_parser().parse_args(["dev", "up"])
    assert (args.dir, args.brokers, args.controllers, args.no_demo_topic) == ("./var", 3, 2, False)
    assert cli.build_parser().parse_args(["dev", "status", "--dir", "x"]).dir == "x"


def test_topic_filters_are_whole_name_regexes_with_commas_as_alternatives():
    names = ["a.b", "aXb", "demo", "demo2", "__consumer_offsets"]
    assert filter_topics(names, None) == sorted(names)
    assert filter_topics(names, "demo") == ["demo"]
    assert filter_topics(names, "demo.*") == ["demo", "demo2"]
    assert filter_topics(names, "'demo, a.b'") == ["a.b", "aXb", "demo"]
    with pytest.raises(TopicCommandError, match="invalid regex"):
        filter_topics(names, "(")


def test_configs_and_replica_assignments_parse_as_kafka_does():
    assert parse_configs(["retention.ms=1000", "cleanup.policy=compact"]) == {
        "retention.ms": "1000", "cleanup.policy": "compact"}
    for bad in (["novalue"], ["a=b=c"], ["=x"]):
        with pytest.raises(TopicCommandError, match='"key=val"'):
            parse_configs(bad)
    assert parse_replica_assignment("1:2, 2:3,3") == {0: [1, 2], 1: [2, 3], 2: [3]}
    with pytest.raises(TopicCommandError, match="duplicate"):
        parse_replica_assignment("1:1")
    with pytest.raises(TopicCommandError):
        parse_replica_assignment("1:x")


def test_describe_lines_use_kafkas_format():
    partitions = (PartitionInfo("t", 0, 1, 3, (1, 2, 3), (1, 3)), PartitionInfo("t", 1, -1, 0, (2,), ()))
    description = TopicDescription("t", False, partitions)
    entries = [ConfigEntry("retention.ms", "1000", source=1), ConfigEntry("segment.bytes", "1024", source=4),
               ConfigEntry("flush.ms", "9", source=5)]
    assert format_topic_line(description, entries) == (
        "Topic: t\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: retention.ms=1000,segment.bytes=1024")
    with_id = format_topic_line(description, [], topic_id="abc")
    assert with_id.startswith("Topic: t\tTopicId: abc\tPartitionCount")
    assert format_partition_line(partitions[0]) == (
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,3")
    assert format_partition_line(partitions[1]) == (
        "\tTopic: t\tPartition: 1\tLeader: none\tReplicas: 2\tIsr: ")


# --------------------------------------------------------------------------------------------- topics

@pytest.fixture
def cluster(fake_nodes) -> tuple[FakeNode, FakeNode]:
    broker, controller = fake_nodes(2)
    broker.on("Metadata", metadata_response(
        [broker.node()], controller=controller.node(),
        topics={"demo": [partition(1, 1, replicas=[1, 2], isr=[1]), partition(0, 1, replicas=[1, 2])],
                "other": [partition(0, -1)], "__consumer_offsets": [partition(0, 1)]},
        internal=("__consumer_offsets",)))
    entry = pb.DescribeConfigsResponse.DescribeConfigsResourceResult
    controller.on("DescribeConfigs", lambda request, _c: pb.DescribeConfigsResponse(results=[
        pb.DescribeConfigsResponse.DescribeConfigsResult(
            resource_type=2, resource_name=r.resource_name,
            configs=[entry(name="segment.bytes", value="1073741824", config_source=4),
                     entry(name="retention.ms", value="604800000", config_source=5)])
        for r in request.resources]))
    return broker, controller


def test_topics_list_with_and_without_internal_topics(cluster, capsys):
    broker, _ = cluster
    base = ["topics", "--bootstrap-server", broker.address, "--list"]
    assert run(base, capsys)[:2] == (0, "__consumer_offsets\ndemo\nother\n")
    assert run(base + ["--exclude-internal"], capsys)[1] == "demo\nother\n"


def test_topics_describe_prints_topic_and_partition_lines(cluster, capsys):
    broker, _ = cluster
    base = ["topics", "--bootstrap-server", broker.address, "--describe"]
    code, out, _ = run(base + ["--topic", "demo"], capsys)
    assert code == 0
    assert out == ("Topic: demo\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: segment.bytes=1073741824\n"
                   "\tTopic: demo\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\n"
                   "\tTopic: demo\tPartition: 1\tLeader: 1\tReplicas: 1,2\tIsr: 1\n")
    code, out, _ = run(base + ["--under-replicated-partitions"], capsys)
    assert out == "\tTopic: demo\tPartition: 1\tLeader: 1\tReplicas: 1,2\tIsr: 1\n"
    code, out, _ = run(base + ["--unavailable-partitions"], capsys)
    assert out == "\tTopic: other\tPartition: 0\tLeader: none\tReplicas: -1\tIsr: -1\n"


def test_topics_describe_of_a_missing_topic_is_an_error_unless_if_exists(cluster, capsys):
    broker, _ = cluster
    argv = ["topics", "--bootstrap-server", broker.address, "--describe", "--topic", "nope"]
    assert run(argv, capsys)[:2] == (
        1, "Error while executing topic command : Topic 'nope' does not exist as expected\n")
    assert run(argv + ["--if-exists"], capsys)[:2] == (0, "")


def test_topics_create_and_its_errors(cluster, capsys):
    broker, controller = cluster
    answers = {"new": 0, "demo": Errors.TOPIC_ALREADY_EXISTS}
    controller.on("CreateTopics", lambda request, _c: pb.CreateTopicsResponse(topics=[
        pb.CreateTopicsResponse.CreatableTopicResult(
            name=t.name, error_code=answers[t.name],
            error_message="Topic 'demo' already exists." if answers[t.name] else "")
        for t in request.topics]))
    base = ["topics", "--bootstrap-server", broker.address, "--create"]
    assert run(base + ["--topic", "new", "--partitions", "6", "--replication-factor", "1", "--config",
                       "retention.ms=1"], capsys)[:2] == (0, "Created topic new.\n")
    request = controller.requests("CreateTopics")[-1].topics[0]
    assert (request.num_partitions, request.replication_factor) == (6, 1)
    assert [(c.name, c.value) for c in request.configs] == [("retention.ms", "1")]
    assert run(base + ["--topic", "demo"], capsys)[:2] == (
        1, "Error while executing topic command : Topic 'demo' already exists.\n")
    assert run(base + ["--topic", "demo", "--if-not-exists"], capsys)[:2] == (0, "")
    assert run(base + ["--topic", "x", "--partitions", "0"], capsys)[1] == (
        "Error while executing topic command : The partitions must be greater than 0\n")
    assert run(base + ["--topic", "x", "--replication-factor", "0"], capsys)[1] == (
        "Error while executing topic command : "
        "The replication factor must be between 1 and 32767 inclusive\n")
    code, out, _ = run(base + ["--topic", "new.x", "--partitions", "1"], capsys)
    assert out.startswith("WARNING: Due to limitations in metric names")


def test_topics_alter_and_delete(cluster, capsys):
    broker, controller = cluster
    controller.on("CreatePartitions", lambda request, _c: pb.CreatePartitionsResponse(results=[
        pb.CreatePartitionsResponse.CreatePartitionsTopicResult(name=t.name) for t in request.topics]))
    controller.on("IncrementalAlterConfigs", lambda request, _c: pb.IncrementalAlterConfigsResponse(
        responses=[pb.AlterConfigsResourceResponse(resource_type=2, resource_name=r.resource_name)
                   for r in request.resources]))
    controller.on("DeleteTopics", lambda request, _c: pb.DeleteTopicsResponse(responses=[
        pb.DeleteTopicsResponse.DeletableTopicResult(name=n) for n in request.topic_names]))
    base = ["topics", "--bootstrap-server", broker.address]
    grow = ["--alter", "--topic", "demo", "--partitions", "4", "--replica-assignment", "1,2,2:1,1"]
    assert run(base + grow, capsys)[0] == 0
    topic = controller.requests("CreatePartitions")[0].topics[0]
    new_replicas = [list(a.broker_ids) for a in topic.assignments]
    assert (topic.name, topic.count, new_replicas) == ("demo", 4, [[2, 1], [1]])
    assert run(base + ["--alter", "--topic", "demo", "--config", "retention.ms=5"], capsys)[0] == 0
    assert controller.requests("IncrementalAlterConfigs")[0].resources[0].configs[0].value == "5"
    assert run(base + ["--delete", "--topic", "demo|other"], capsys)[:2] == (0, "")
    assert list(controller.requests("DeleteTopics")[0].topic_names) == ["demo", "other"]
    assert run(base + ["--delete", "--topic", "gone"], capsys)[0] == 1
    assert run(base + ["--delete", "--topic", "gone", "--if-exists"], capsys)[0] == 0


# ------------------------------------------------------------------------------------------ produce / fetch

class FakeStdin:
    def __init__(self, data: bytes):
        self.buffer = io.BytesIO(data)

    def isatty(self) -> bool:
        return False


def test_read_batches_and_partition_choice():
    lines = io.BytesIO(b"a\nb\r\n\nc")
    assert list(cli.read_batches(lines, 2)) == [[b"a", b"b"], [b"", b"c"]]
    assert [next(cli.choose_partitions(2, None, 5)) for _ in range(2)] == [2, 2]
    keyed = cli.choose_partitions(None, b"key", 5)
    assert next(keyed) == next(keyed) == partition_for_key(b"key", 5)
    unkeyed = cli.choose_partitions(None, None, 3)
    assert [next(unkeyed) for _ in range(4)] == [0, 1, 2, 0]


def test_produce_sends_stdin_lines_in_batches(fake_nodes, capsys, monkeypatch):
    (broker,) = fake_nodes(1)
    two = [partition(0, 1), partition(1, 1)]
    broker.on("Metadata", metadata_response([broker.node()], topics={"t": two}))
    broker.on("Produce", lambda request, _c: broker_pb2.ProduceResponse(responses=[
        broker_pb2.ProduceResponse.TopicProduceResponse(name="t", partition_responses=[
            broker_pb2.ProduceResponse.PartitionProduceResponse(index=request.topic_data[0].partition_data[0].index)
        ])]))
    monkeypatch.setattr(sys, "stdin", FakeStdin(b"".join(b"line %d\n" % i for i in range(501))))
    code, out, err = run(["produce", "--bootstrap-server", broker.address, "--topic", "t", "--partition", "1",
                          "--key", "k", "--acks", "all"], capsys)
    assert (code, out, err) == (0, "", "")
    first, second = broker.requests("Produce")
    assert first.acks == -1 and first.topic_data[0].partition_data[0].index == 1
    records = list(iter_records(first.topic_data[0].partition_data[0].records))
    assert len(records) == 500 and records[0].key == b"k" and records[0].value == b"line 0"
    assert [r.value for r in iter_records(second.topic_data[0].partition_data[0].records)] == [b"line 500"]


def test_produce_reports_partition_errors(fake_nodes, capsys, monkeypatch):
    (broker,) = fake_nodes(1)
    broker.on("Metadata", metadata_response([broker.node()], topics={"t": [partition(0, 1)]}))
    rejected = broker_pb2.ProduceResponse.PartitionProduceResponse(
        index=0, error_code=Errors.RECORD_LIST_TOO_LARGE, base_offset=-1)
    broker.on("Produce", broker_pb2.ProduceResponse(responses=[
        broker_pb2.ProduceResponse.TopicProduceResponse(name="t", partition_responses=[rejected])]))
    monkeypatch.setattr(sys, "stdin", FakeStdin(b"x\n"))
    code, _, err = run(["produce", "--bootstrap-server", broker.address, "--topic", "t"], capsys)
    assert code == 1 and "RECORD_LIST_TOO_LARGE (18)" in err


def test_fetch_prints_records_until_the_high_watermark(fake_nodes, capsys):
    (broker,) = fake_nodes(1)
    broker.on("Metadata", metadata_response([broker.node()], topics={"t": [partition(0, 1)]}))
    log = [build_batch([b"a", b"b"], [None, b"k"], base_offset=0), build_batch([b"c"], base_offset=2)]

    def fetch(request, _context):
        offset = request.topics[0].partitions[0].fetch_offset
        batch = log[0] if offset < 2 else log[1]  # one batch per answer: the one holding the offset
        response = broker_pb2.FetchResponse()
        response.responses.add(topic="t", partitions=[broker_pb2.FetchResponse.PartitionData(
            partition_index=0, high_watermark=3, log_start_offset=0, records=batch)])
        return response

    def list_offsets(request, _context):
        response = broker_pb2.ListOffsetsResponse()
        response.topics.add(name="t", partitions=[broker_pb2.ListOffsetsResponse.ListOffsetsPartitionResponse(
            partition_index=0, offset=0, timestamp=-1)])
        return response

    broker.on("Fetch", fetch)
    broker.on("ListOffsets", list_offsets)
    base = ["fetch", "--bootstrap-server", broker.address, "--topic", "t", "--partition", "0"]
    assert run(base, capsys)[:2] == (0, "0\tnull\ta\n1\tk\tb\n2\tnull\tc\n")
    assert run(base + ["--offset", "1", "--max-messages", "1"], capsys)[:2] == (0, "1\tk\tb\n")
    assert run(base + ["--offset", "bogus"], capsys)[0] == 1


# --------------------------------------------------------------------------------------------- dev

def test_dev_status_and_down_without_a_cluster(tmp_path: Path, capsys):
    code, out, _ = run(["dev", "status", "--dir", str(tmp_path)], capsys)
    assert code == 1 and "no cluster.json" in out
    code, out, _ = run(["dev", "down", "--dir", str(tmp_path)], capsys)
    assert code == 0 and "nothing to stop" in out


def test_dev_status_reports_services_that_are_down(tmp_path: Path, capsys):
    LocalCluster(tmp_path, brokers=1, controllers=1, free_ports=True).write_layout()
    code, out, _ = run(["dev", "status", "--dir", str(tmp_path)], capsys)
    assert code == 1
    lines = out.splitlines()
    assert any(line.split()[:1] == ["zookeeper"] and line.endswith("down") for line in lines)
    assert any(line.split()[:1] == ["broker-1"] and "down (log:" in line for line in lines)
    assert any(line.split()[:1] == ["controller-1001"] for line in lines)


def test_failure_report_adds_the_failing_services_log_tail(tmp_path: Path):
    cluster = LocalCluster(tmp_path, brokers=1, controllers=1, free_ports=True)
    cluster.log_path("broker-1").parent.mkdir(parents=True)
    cluster.log_path("broker-1").write_text("first\nbind failed\n")
    report = failure_report(cluster, RuntimeError("broker-1 is already running"))
    assert report.startswith("broker-1 is already running\n--- ") and report.endswith("bind failed")
    with_tail = RuntimeError("broker-1 exited while starting:\nthe tail")
    assert failure_report(cluster, with_tail) == str(with_tail)


def test_dev_up_reports_a_cluster_already_running_and_down_stops_it(tmp_path: Path, capsys):
    cluster = LocalCluster(tmp_path, brokers=1, controllers=0, free_ports=True)
    cluster.write_layout()
    # A stand-in process whose command line names broker-1's config, as the launcher checks.
    stand_in = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()",
                                 str(cluster.config_path("broker-1"))], stdin=subprocess.PIPE)
    try:
        write_pid_file(cluster.pid_path("broker-1"), stand_in.pid)
        code, out, _ = run(["dev", "up", "--dir", str(tmp_path)], capsys)
        assert code == 1
        assert "already running" in out and f"pid {stand_in.pid}" in out and "odradek dev down" in out
        code, out, _ = run(["dev", "down", "--dir", str(tmp_path)], capsys)
        assert code == 0 and "Stopped" in out
        assert stand_in.wait(timeout=10) is not None
    finally:
        if stand_in.poll() is None:
            stand_in.stdin.close()
            stand_in.wait(timeout=10)


def test_sigterm_stops_a_tool_as_ctrl_c_does():
    import os
    import signal

    from services.clients.cli import _sigterm_interrupts

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), _sigterm_interrupts():
        os.kill(os.getpid(), signal.SIGTERM)   # the handler runs as soon as kill returns
    assert signal.getsignal(signal.SIGTERM) is before
