"""ZooKeeperServer's config files, java command line and missing-installation errors (no process)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from services.devcluster.zookeeper import (
    CONFIG_NAME,
    INSTALL_COMMAND,
    LOG4J_NAME,
    MAIN_CLASS,
    NETTY_SERVER_CNXN_FACTORY,
    ZooKeeperNotInstalledError,
    ZooKeeperServer,
    ZooKeeperTls,
    find_installation,
)


def read_properties(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def test_config_file_has_data_dir_loopback_port_and_test_settings(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk", port=21810, tick_time_ms=250, max_session_timeout_ms=60_000)

    path = server.write_config()

    assert path == tmp_path / "zk" / CONFIG_NAME
    config = read_properties(path)
    assert config["dataDir"] == str(tmp_path / "zk")
    assert config["clientPort"] == "21810"
    assert config["clientPortAddress"] == "127.0.0.1"
    assert config["tickTime"] == "250"
    assert config["maxSessionTimeout"] == "60000"
    assert config["4lw.commands.whitelist"] == "*"
    assert config["admin.enableServer"] == "false"
    assert config["maxClientCnxns"] == "0"
    assert config["forceSync"] == "no"
    assert server.connect_string == "127.0.0.1:21810"


def test_logging_config_writes_to_the_console_captured_in_the_log_file(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path, port=21811)

    server.write_config()

    log4j = read_properties(tmp_path / LOG4J_NAME)
    assert log4j["log4j.rootLogger"] == "INFO, CONSOLE"
    assert log4j["log4j.appender.CONSOLE"] == "org.apache.log4j.ConsoleAppender"
    assert server.log_path == tmp_path / "zookeeper.log"


def test_force_sync_and_tick_time_are_parameters(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path, port=21812, tick_time_ms=2000, force_sync=True)

    config = read_properties(server.write_config())

    assert config["forceSync"] == "yes"
    assert config["tickTime"] == "2000"


def test_a_free_port_is_picked_when_none_is_given(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path)

    assert 0 < server.port < 65536
    assert server.connect_string == f"127.0.0.1:{server.port}"


def test_command_runs_the_standalone_main_class_on_the_written_config(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path, port=21813, heap_mb=128)

    argv = server.command("/usr/bin/java", [Path("/jars/zookeeper.jar"), Path("/jars/zookeeper-jute.jar")])

    assert argv[0] == "/usr/bin/java"
    assert argv[-2:] == [MAIN_CLASS, str(tmp_path / CONFIG_NAME)]
    assert argv[argv.index("-cp") + 1] == "/jars/zookeeper.jar:/jars/zookeeper-jute.jar"
    assert f"-Dlog4j.configuration=file:{tmp_path / LOG4J_NAME}" in argv
    assert "-Xmx128m" in argv


def test_missing_java_names_the_packages_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty_path = tmp_path / "empty-bin"
    empty_path.mkdir()
    monkeypatch.setenv("PATH", str(empty_path))
    server = ZooKeeperServer(tmp_path / "zk", port=21814)

    with pytest.raises(ZooKeeperNotInstalledError, match=re.escape(INSTALL_COMMAND)) as raised:
        server.start()

    assert "java" in str(raised.value)
    assert INSTALL_COMMAND == "apt-get install default-jre-headless zookeeper"
    assert server.pid is None
    assert not server.log_path.exists()


def test_missing_jars_are_named_with_the_packages_to_install(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk", port=21815, java_dir=tmp_path / "no-jars")

    with pytest.raises(ZooKeeperNotInstalledError, match=re.escape(INSTALL_COMMAND)) as raised:
        server.start()

    assert str(tmp_path / "no-jars" / "zookeeper.jar") in str(raised.value)
    assert server.pid is None


def test_a_tls_server_has_only_a_secure_port_served_by_netty_requiring_client_certificates(tmp_path: Path) -> None:
    tls = ZooKeeperTls(keystore=tmp_path / "zookeeper.keystore.pem", truststore=tmp_path / "ca.pem",
                       client_keystore=tmp_path / "admin.keystore.pem")
    server = ZooKeeperServer(tmp_path / "zk", port=21816, tls=tls)

    config = read_properties(server.write_config())

    assert "clientPort" not in config
    assert config["secureClientPort"] == "21816"
    assert config["secureClientPortAddress"] == "127.0.0.1"
    assert config["serverCnxnFactory"] == NETTY_SERVER_CNXN_FACTORY
    assert config["ssl.keyStore.location"] == str(tmp_path / "zookeeper.keystore.pem")
    assert config["ssl.trustStore.location"] == str(tmp_path / "ca.pem")
    assert config["ssl.keyStore.type"] == config["ssl.trustStore.type"] == "PEM"
    assert config["ssl.clientAuth"] == "need"


def test_a_tls_server_loads_netty(tmp_path: Path) -> None:
    (tmp_path / "no-jars").mkdir()
    with pytest.raises(ZooKeeperNotInstalledError, match="netty-handler.jar"):
        find_installation(tmp_path / "no-jars", tls=True)
