"""The console and perf-test tools against a real one-broker cluster: lines in, records out, and
both perf tests printing Kafka's report formats."""

from __future__ import annotations

import io
import re

import pytest

from services.clients import cli
from services.clients.admin import Admin
from services.clients.admin_types import NewTopic
from services.clients.launcher import LocalCluster
from services.clients.lowlevel import LowLevelClient

READY_TIMEOUT_S = 30.0


class LinesOnStdin:
    def __init__(self, data: bytes):
        self.buffer = io.BytesIO(data)

    def isatty(self) -> bool:
        return False


@pytest.fixture
def small_cluster(cluster_factory) -> LocalCluster:
    return cluster_factory(brokers=1, controllers=1)


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

    code, out, err = run(["consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", "perf",
                          "--messages", "50000", "--timeout", "500", "--hide-header"], capsys, monkeypatch)
    assert code == 0 and "Exiting before consuming the expected number of messages" in err
    assert out.split(",")[4].strip() == "30000"
