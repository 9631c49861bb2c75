"""ControllerServiceConfig: the launcher's keys, Kafka's defaults, the core's keys inherited, and
the shape of the service package (short modules, each documented)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import services.controller as controller_package
from services.common.config import ConfigError
from services.controller.config import ControllerServiceConfig
from services.controller.state.config import ControllerConfig


def test_the_launchers_config_loads(tmp_path):
    path = tmp_path / "controller.properties"
    path.write_text(
        "controller.id=1001\nlisteners=PLAINTEXT://127.0.0.1:9193\nzookeeper.connect=127.0.0.1:2181/odradek\n"
        "zookeeper.session.timeout.ms=6000\nleader.imbalance.check.interval.seconds=1\n"
    )
    config = ControllerServiceConfig.load(path, env={})
    assert isinstance(config, ControllerConfig)
    assert (config.controller_id, config.zookeeper_session_timeout_ms, config.metrics_port) == (
        1001,
        6000,
        -1,
    )
    assert config.listener.address == "127.0.0.1:9193"
    assert config.connection_timeout_s == 6.0
    assert config.leader_imbalance_check_interval_ms == 1000
    assert config.delete_topic_enable and config.auto_leader_rebalance_enable
    assert config.request_timeout_ms == 30000 and config.zookeeper_connection_timeout_ms is None


def test_advertised_listener_fills_in_host_and_bound_port():
    config = ControllerServiceConfig.load(
        {"controller.id": 1, "zookeeper.connect": "zk", "listeners": "PLAINTEXT://:0"}, env={}
    )
    advertised = config.advertised_listener(45678)
    assert (advertised.host, advertised.port) == ("127.0.0.1", 45678)
    config = ControllerServiceConfig.load(
        {"controller.id": 1, "zookeeper.connect": "zk", "advertised.listeners": "PLAINTEXT://ctl-1:9093"},
        env={},
    )
    assert config.advertised_listener(1).address == "ctl-1:9093"


def test_controller_id_and_zookeeper_are_required():
    with pytest.raises(ConfigError):
        ControllerServiceConfig.load({"zookeeper.connect": "zk"}, env={})


def test_service_modules_are_short_and_documented():
    package_dir = Path(controller_package.__file__).parent
    files = sorted(package_dir.glob("*.py"))
    assert len(files) > 10
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert len(text.splitlines()) < 500, path.name
        assert ast.get_docstring(ast.parse(text)), path.name
