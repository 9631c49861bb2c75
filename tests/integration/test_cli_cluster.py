"""The command line and the admin / low-level clients against a real cluster (one for the module:
two controllers and three brokers): kafka-topics.sh behaviour, produce and fetch, and admin calls
that outlive a controller failover.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator

import pytest

from services.clients import cli
from services.clients.admin import Admin
from services.clients.admin_types import NewTopic
from services.clients.lowlevel import LowLevelClient
from services.common.records import build_batch
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import module_cluster

READY_TIMEOUT_S = 30.0
ERROR_PREFIX = "Error while executing topic command : "


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    """Each test has topics of its own; the controller failover comes last."""
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "cli-cluster", brokers=3,
                        controllers=2) as local:
        yield local


def run(argv: list[str], capsys) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().out


class LinesOnStdin:
    def __init__(self, data: bytes):
        self.buffer = io.BytesIO(data)

    def isatty(self) -> bool:
        return False


def test_topics_command_creates_describes_alters_and_deletes(cluster: LocalCluster, capsys):
    topics = ["topics", "--bootstrap-server", cluster.bootstrap_servers]
    assert run(topics + ["--create", "--topic", "cli-t", "--partitions", "3", "--replication-factor", "2"],
               capsys) == (0, "Created topic cli-t.\n")
    with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.wait_for_topic("cli-t", READY_TIMEOUT_S)
        assert "cli-t" in run(topics + ["--list"], capsys)[1].splitlines()

        code, out = run(topics + ["--describe", "--topic", "cli-t"], capsys)
        lines = out.splitlines()
        assert code == 0 and lines[0].startswith("Topic: cli-t\t")
        assert "\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: " in lines[0]
        assert [line.split("\t")[2] for line in lines[1:]] == ["Partition: 0", "Partition: 1", "Partition: 2"]
        assert all(line.startswith("\tTopic: cli-t\tPartition: ") and "\tLeader: " in line
                   for line in lines[1:])

        code, out = run(topics + ["--create", "--topic", "cli-t"], capsys)
        assert code == 1 and out.startswith(ERROR_PREFIX)
        assert run(topics + ["--create", "--topic", "cli-t", "--if-not-exists"], capsys) == (0, "")

        assert run(topics + ["--alter", "--topic", "cli-t", "--partitions", "5"], capsys)[0] == 0
        assert len(admin.wait_for_topic("cli-t", READY_TIMEOUT_S, partitions=5).partitions) == 5
        code, out = run(topics + ["--alter", "--topic", "cli-t", "--partitions", "2"], capsys)
        assert code == 1 and out.startswith(ERROR_PREFIX)

        assert run(topics + ["--delete", "--topic", "cli-t"], capsys)[0] == 0
        wait_until(lambda: "cli-t" not in admin.list_topics(), READY_TIMEOUT_S, 0.2, "cli-t to be deleted")
        code, out = run(topics + ["--describe", "--topic", "cli-t"], capsys)
        assert (code, out) == (1, f"{ERROR_PREFIX}Topic 'cli-t' does not exist as expected\n")


def test_produce_and_fetch_commands_round_trip(cluster: LocalCluster, capsys, monkeypatch):
    with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("lines", 2, 1)])
        admin.wait_for_topic("lines", READY_TIMEOUT_S)
    monkeypatch.setattr(sys, "stdin", LinesOnStdin(b"one\ntwo\nthree\n"))
    assert run(["produce", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "lines",
                "--partition", "1", "--key", "k", "--acks", "all"], capsys) == (0, "")
    code, out = run(["fetch", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "lines",
                     "--partition", "1"], capsys)
    assert (code, out) == (0, "0\tk\tone\n1\tk\ttwo\n2\tk\tthree\n")

    with LowLevelClient(bootstrap_servers=cluster.bootstrap_servers) as client:
        produced = client.produce("lines", 0, build_batch([b"a", b"b"]), acks=-1)
        assert (produced.base_offset, produced.error_code) == (0, 0)
        records, fetched = client.fetch_records("lines", 0, 1)
        assert [(r.offset, r.value) for r in records] == [(1, b"b")] and fetched.high_watermark == 2
        assert client.list_offset("lines", 0, "latest").offset == 2
        assert client.list_offset("lines", 0, "earliest").offset == 0


def test_admin_calls_survive_a_controller_failover(cluster: LocalCluster):
    """Last in the module: the active controller is killed."""
    with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        before = admin.describe_cluster()
        assert before.controller is not None and len(before.nodes) == 3
        active = next(name for name in cluster.controller_names
                      if cluster.endpoint(name) == before.controller.address)
        cluster.kill_service(active)
        admin.create_topics([NewTopic("after-failover", 1, 1)])
        admin.wait_for_topic("after-failover", READY_TIMEOUT_S)
        assert admin.describe_cluster().controller.address != before.controller.address
