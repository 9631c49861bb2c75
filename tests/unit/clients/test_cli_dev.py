"""`odradek dev start|stop|restart|kill SERVICE`: arguments, names checked against the layout, and
stop and kill of a stand-in process recorded as the service (starting real services is for the
integration tests)."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.clients import cli
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import write_pid_file


def run(argv: list[str], capsys) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().out


@pytest.fixture
def layout(tmp_path: Path) -> LocalCluster:
    cluster = LocalCluster(tmp_path, brokers=2, controllers=1, coordinators=1, free_ports=True)
    cluster.write_layout()
    return cluster


@pytest.fixture
def stand_in(layout: LocalCluster) -> Iterator[subprocess.Popen]:
    """A process recorded as broker-1 whose command line names broker-1's config, as the launcher checks."""
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()",
                                str(layout.config_path("broker-1"))], stdin=subprocess.PIPE)
    write_pid_file(layout.pid_path("broker-1"), process.pid)
    yield process
    if process.poll() is None:
        process.kill()
    process.stdin.close()
    process.wait(timeout=10)


@pytest.mark.parametrize("command", ["start", "stop", "restart", "kill"])
def test_each_command_takes_one_service_name(command):
    args = cli.build_parser().parse_args(["dev", command, "broker-1", "--dir", "x"])
    assert (args.service, args.dir) == ("broker-1", "x")
    assert cli.build_parser().parse_args(["dev", command, "controller-1001"]).dir == "./var"


def test_timeouts_default_to_a_minute():
    parser = cli.build_parser()
    assert parser.parse_args(["dev", "start", "broker-1"]).timeout == 60.0
    assert parser.parse_args(["dev", "restart", "broker-1", "--timeout", "90"]).timeout == 90.0


@pytest.mark.parametrize("command", ["start", "stop", "restart", "kill"])
def test_without_a_cluster_nothing_is_done(command, tmp_path: Path, capsys):
    code, out = run(["dev", command, "broker-1", "--dir", str(tmp_path)], capsys)
    assert code == 1 and "no cluster.json" in out


@pytest.mark.parametrize("command", ["start", "stop", "restart", "kill"])
def test_an_unknown_service_is_named_with_the_clusters_services(command, layout, capsys):
    code, out = run(["dev", command, "broker-9", "--dir", str(layout.base_dir)], capsys)
    assert code == 1
    assert "No service 'broker-9'" in out
    assert "controller-1001, broker-1, broker-2, coordinator-2001" in out


def test_start_refuses_a_running_service(layout, stand_in, capsys):
    code, out = run(["dev", "start", "broker-1", "--dir", str(layout.base_dir)], capsys)
    assert code == 1
    assert f"broker-1 is already running (pid {stand_in.pid})" in out
    assert stand_in.poll() is None


def test_stop_sends_sigterm_and_waits_for_the_exit(layout, stand_in, capsys):
    code, out = run(["dev", "stop", "broker-1", "--dir", str(layout.base_dir)], capsys)
    assert code == 0
    assert f"Stopped broker-1 (pid {stand_in.pid})." in out
    assert stand_in.wait(timeout=10) == -signal.SIGTERM

    code, out = run(["dev", "stop", "broker-1", "--dir", str(layout.base_dir)], capsys)
    assert (code, out) == (0, "broker-1 is not running.\n")


def test_kill_sends_sigkill(layout, stand_in, capsys):
    code, out = run(["dev", "kill", "broker-1", "--dir", str(layout.base_dir)], capsys)
    assert (code, out) == (0, f"Killed broker-1 (pid {stand_in.pid}) with SIGKILL.\n")
    assert stand_in.wait(timeout=10) == -signal.SIGKILL

    code, out = run(["dev", "kill", "broker-1", "--dir", str(layout.base_dir)], capsys)
    assert code == 1 and "broker-1 is not running" in out


def test_every_service_gets_a_metrics_endpoint_that_the_layout_keeps(tmp_path: Path):
    cluster = LocalCluster(tmp_path, brokers=2, controllers=1, coordinators=1, gateways=1,
                           broker_config={"metrics.port": 7071}, zookeeper_connect="zk:2181")
    assert cluster.service_config("controller-1001")["metrics.port"] == "9103"
    assert cluster.metrics_url("broker-2") == "http://127.0.0.1:7071/metrics"  # a configured port wins
    assert cluster.metrics_url("coordinator-2001") == "http://127.0.0.1:9104/metrics"
    assert cluster.metrics_url("gateway-1") == "http://127.0.0.1:8080/metrics"
    cluster.write_layout()
    assert LocalCluster.load(tmp_path).metrics_url("controller-1001") == "http://127.0.0.1:9103/metrics"


def test_a_broker_added_to_the_layout_takes_the_next_id_and_ports(tmp_path: Path):
    cluster = LocalCluster(tmp_path, brokers=3, controllers=1, broker_config={"log.segment.bytes": 1048576},
                           zookeeper_connect="zk:2181")
    cluster.write_layout()
    loaded = LocalCluster.load(tmp_path)
    assert loaded.add_broker() == "broker-4"
    again = LocalCluster.load(tmp_path)
    config = again.service_config("broker-4")
    assert config["broker.id"] == "4" and config["listeners"] == "PLAINTEXT://127.0.0.1:9392"
    assert config["kafka.listeners"] == "PLAINTEXT://127.0.0.1:19392" and config["metrics.port"] == "9402"
    assert config["log.segment.bytes"] == "1048576"  # configured as the others
    assert again.bootstrap_servers.endswith(",127.0.0.1:9392")


def test_add_broker_needs_a_cluster(tmp_path: Path, capsys):
    code, out = run(["dev", "add-broker", "--dir", str(tmp_path)], capsys)
    assert code == 1 and "No cluster in" in out


def test_a_secured_cluster_reaches_its_own_zookeeper_over_tls_and_keeps_that_in_its_layout(tmp_path: Path):
    cluster = LocalCluster(tmp_path, brokers=1, controllers=1, coordinators=1, gateways=1, free_ports=True,
                           secure=True)
    assert cluster.zookeeper_tls and cluster.admin_zk_tls is not None
    for name in cluster.all_names:
        config = cluster.service_config(name)
        assert config["zookeeper.ssl.client.enable"] == "true"
        assert config["zookeeper.ssl.keystore.location"] == str(tmp_path / "tls" / f"{name}.keystore.pem")
        assert config["zookeeper.ssl.truststore.location"] == str(tmp_path / "tls" / "ca.pem")
    cluster.write_layout()
    assert LocalCluster.load(tmp_path).zookeeper_tls


@pytest.mark.parametrize("layout", [{"secure": True, "zookeeper_tls": False}, {"secure": False},
                                    {"secure": True, "zookeeper_connect": "127.0.0.1:2181"}])
def test_zookeeper_stays_plaintext_when_asked_unsecured_or_external(tmp_path: Path, layout):
    cluster = LocalCluster(tmp_path, brokers=1, controllers=1, free_ports=True, **layout)
    assert not cluster.zookeeper_tls and cluster.admin_zk_tls is None
    assert not any(key.startswith("zookeeper.ssl") for key in cluster.service_config("broker-1"))


def test_zookeeper_over_tls_needs_a_secured_cluster_with_its_own_zookeeper(tmp_path: Path):
    with pytest.raises(ValueError, match="ZooKeeper over TLS"):
        LocalCluster(tmp_path, brokers=1, controllers=1, free_ports=True, secure=True, zookeeper_tls=True,
                     zookeeper_connect="127.0.0.1:2181")


def test_dev_up_takes_zk_plaintext():
    args = cli.build_parser().parse_args(["dev", "up", "--secure", "--zk-plaintext"])
    assert args.secure and args.zk_plaintext
