"""The console and perf-test tools against a real one-broker cluster with a group coordinator: lines
in, records out, console consumers of one group sharing the work through committed offsets (and the
`consumer-groups` tool showing them), and both perf tests printing Kafka's report formats."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

import pytest

from services.clients import cli
from services.clients.admin import Admin
from services.clients.admin_types import NewTopic
from services.clients.lowlevel import LowLevelClient
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import TEST_COORDINATOR_CONFIG, module_cluster

READY_TIMEOUT_S = 30.0
COORDINATOR_CONFIG = {"group.initial.rebalance.delay.ms": 0}


class LinesOnStdin:
    def __init__(self, data: bytes):
        self.buffer = io.BytesIO(data)

    def isatty(self) -> bool:
        return False


@pytest.fixture(scope="module")
def small_cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client,
                  tmp_path_factory) -> Iterator[LocalCluster]:
    """One cluster for the module: each test has topics and groups of its own."""
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "cli-clients", brokers=1,
                        controllers=1, coordinators=1,
                        coordinator_config={**TEST_COORDINATOR_CONFIG, **COORDINATOR_CONFIG}) as cluster:
        yield cluster


def create(cluster: LocalCluster, topic: str, partitions: int) -> None:
    with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
        admin.wait_for_topic(topic, READY_TIMEOUT_S, partitions=partitions)


def run(argv: list[str], capsys, monkeypatch, stdin: bytes = b"") -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", LinesOnStdin(stdin))
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_console_producer_then_console_consumer(small_cluster: LocalCluster, capsys, monkeypatch):
    bootstrap = small_cluster.bootstrap_servers
    create(small_cluster, "console", 3)
    lines = b"".join(b"user%d:hello %d\n" % (i % 4, i) for i in range(40))
    code, _, err = run(["console-producer", "--bootstrap-server", bootstrap, "--topic", "console",
                        "--property", "parse.key=true", "--property", "key.separator=:"],
                       capsys, monkeypatch, lines)
    assert (code, err) == (0, "")

    code, out, err = run(["console-consumer", "--bootstrap-server", bootstrap, "--topic", "console",
                          "--from-beginning", "--max-messages", "40", "--property", "print.key=true",
                          "--property", "key.separator=="], capsys, monkeypatch)
    assert code == 0 and "Processed a total of 40 messages" in err
    printed = out.splitlines()
    assert sorted(printed) == sorted(f"user{i % 4}=hello {i}" for i in range(40))
    by_key: dict[str, list[int]] = {}
    for line in printed:  # records of one key share a partition, so their order is kept
        key, value = line.split("=")
        by_key.setdefault(key, []).append(int(value.split()[1]))
    assert all(values == sorted(values) for values in by_key.values())

    code, out, err = run(["console-consumer", "--bootstrap-server", bootstrap, "--topic", "console",
                          "--partition", "0", "--offset", "1", "--timeout-ms", "1500",
                          "--property", "print.offset=true"], capsys, monkeypatch)
    assert code == 0
    offsets = [int(line.split("\t")[0].removeprefix("Offset:")) for line in out.splitlines()]
    assert offsets and offsets[0] == 1 and offsets == list(range(1, 1 + len(offsets)))


def produce_lines(bootstrap: str, topic: str, values: list[str], capsys, monkeypatch) -> None:
    lines = "".join(f"{value}\n" for value in values).encode()
    code, _, err = run(["console-producer", "--bootstrap-server", bootstrap, "--topic", topic], capsys, monkeypatch,
                       lines)
    assert (code, err) == (0, "")


def consume_lines(bootstrap: str, topic: str, group: str, capsys, monkeypatch, *options: str) -> list[str]:
    code, out, err = run(["console-consumer", "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
                          "--from-beginning", *options], capsys, monkeypatch)
    assert code == 0, err
    printed = out.splitlines()
    assert f"Processed a total of {len(printed)} messages" in err
    return printed


def describe_rows(bootstrap: str, group: str, capsys, monkeypatch) -> list[dict[str, str]]:
    code, out, err = run(["consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group],
                         capsys, monkeypatch)
    assert code == 0, out + err
    lines = [line.split() for line in out.splitlines() if line.strip() and not line.startswith("Consumer group")]
    header, rows = lines[0], lines[1:]
    return [dict(zip(header, row, strict=True)) for row in rows]


def test_console_consumers_of_one_group_read_each_record_once(small_cluster: LocalCluster, capsys, monkeypatch):
    bootstrap = small_cluster.bootstrap_servers
    create(small_cluster, "shared", 2)
    first = [f"first {i}" for i in range(20)]
    produce_lines(bootstrap, "shared", first, capsys, monkeypatch)
    assert sorted(consume_lines(bootstrap, "shared", "readers", capsys, monkeypatch, "--max-messages", "20")) == \
        sorted(first)

    second = [f"second {i}" for i in range(10)]
    produce_lines(bootstrap, "shared", second, capsys, monkeypatch)
    # the group's committed offsets, not --from-beginning, say where each run starts; a run stopped by
    # --max-messages inside a fetched batch leaves the records it did not print to the next run
    some = consume_lines(bootstrap, "shared", "readers", capsys, monkeypatch, "--max-messages", "4")
    rest = consume_lines(bootstrap, "shared", "readers", capsys, monkeypatch, "--timeout-ms", "2000")
    assert len(some) == 4 and sorted(some + rest) == sorted(second)

    rows = describe_rows(bootstrap, "readers", capsys, monkeypatch)
    assert sorted((row["TOPIC"], row["PARTITION"]) for row in rows) == [("shared", "0"), ("shared", "1")]
    assert all(row["CURRENT-OFFSET"] == row["LOG-END-OFFSET"] and row["LAG"] == "0" for row in rows)
    assert sum(int(row["CURRENT-OFFSET"]) for row in rows) == 30


def test_console_consumer_include_pattern_and_partition_with_group(small_cluster: LocalCluster, capsys,
                                                                    monkeypatch):
    bootstrap = small_cluster.bootstrap_servers
    create(small_cluster, "metrics-a", 1)
    create(small_cluster, "metrics-b", 1)
    create(small_cluster, "other", 1)
    for topic in ("metrics-a", "metrics-b", "other"):
        produce_lines(bootstrap, topic, [f"{topic} {i}" for i in range(3)], capsys, monkeypatch)
    code, out, err = run(["console-consumer", "--bootstrap-server", bootstrap, "--include", "metrics-.*",
                          "--from-beginning", "--max-messages", "6"], capsys, monkeypatch)
    assert code == 0, err
    assert sorted(out.splitlines()) == sorted(f"{t} {i}" for t in ("metrics-a", "metrics-b") for i in range(3))

    # with --partition the tool assigns and seeks; --group then only commits where it stopped
    code, out, err = run(["console-consumer", "--bootstrap-server", bootstrap, "--topic", "other", "--partition",
                          "0", "--offset", "1", "--group", "pinned", "--max-messages", "1"], capsys, monkeypatch)
    assert (code, out) == (0, "other 1\n"), err
    rows = describe_rows(bootstrap, "pinned", capsys, monkeypatch)
    assert [(row["TOPIC"], row["PARTITION"], row["CURRENT-OFFSET"]) for row in rows] == [("other", "0", "2")]


def test_console_producer_reports_a_line_without_separator(small_cluster: LocalCluster, capsys, monkeypatch):
    create(small_cluster, "strict", 1)
    code, _, err = run(["console-producer", "--bootstrap-server", small_cluster.bootstrap_servers,
                        "--topic", "strict", "--property", "parse.key=true", "--property", "key.separator=:"],
                       capsys, monkeypatch, b"k:v\nnone here\n")
    assert code == 1 and "No key separator found on line number 2: 'none here'" in err


def test_perf_tests_report_kafka_formats(small_cluster: LocalCluster, capsys, monkeypatch):
    bootstrap = small_cluster.bootstrap_servers
    create(small_cluster, "perf", 2)
    code, out, err = run(["producer-perf-test", "--topic", "perf", "--num-records", "30000", "--record-size",
                          "100", "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
                          "acks=all", "linger.ms=5", "--print-metrics"], capsys, monkeypatch)
    assert code == 0, err
    lines = out.splitlines()
    summary = next(line for line in lines if " records sent, " in line and " 50th, " in line)
    assert "record-send-total : 30000" in lines[lines.index(summary) + 1:]
    assert re.fullmatch(r"30000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
                        r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.",
                        summary), summary
    with LowLevelClient(bootstrap_servers=bootstrap) as client:
        ends = [client.list_offset("perf", p, "latest").offset for p in (0, 1)]
    assert sum(ends) == 30000

    code, out, err = run(["consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", "perf",
                          "--messages", "30000", "--timeout", "5000"], capsys, monkeypatch)
    assert code == 0, err
    header, line = out.splitlines()
    assert header.startswith("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg")
    fields = [field.strip() for field in line.split(",")]
    assert fields[4] == "30000" and float(fields[2]) == pytest.approx(30000 * 100 / 1024 / 1024, rel=1e-3)
    assert int(fields[6]) > 0 and int(fields[7]) > 0  # joining the group, then fetching

    # a group's second run starts at the offsets its first run committed: nothing is left to read
    code, out, err = run(["consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", "perf",
                          "--messages", "30000", "--group", "perf-readers", "--hide-header"], capsys, monkeypatch)
    assert code == 0 and out.split(",")[4].strip() == "30000", err
    code, out, err = run(["consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", "perf",
                          "--messages", "1", "--group", "perf-readers", "--timeout", "1500", "--hide-header"],
                         capsys, monkeypatch)
    assert code == 0 and "Exiting before consuming the expected number of messages" in err
    assert out.split(",")[4].strip() == "0"

    code, out, err = run(["consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", "perf",
                          "--messages", "50000", "--timeout", "500", "--hide-header"], capsys, monkeypatch)
    assert code == 0 and "Exiting before consuming the expected number of messages" in err
    assert out.split(",")[4].strip() == "30000"
