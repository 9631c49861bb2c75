"""Tests for services.clients.client_config: bootstrap address parsing and client config loading."""

from __future__ import annotations

import pytest

from services.clients.client_config import AdminConfig, load_client_config, parse_bootstrap_servers
from services.common.config import ConfigError


def test_bootstrap_servers_split_trim_and_keep_order():
    assert parse_bootstrap_servers(" h2:9192, h1:9092 ,") == [("h2", 9192), ("h1", 9092)]
    assert parse_bootstrap_servers(["127.0.0.1:1", "PLAINTEXT://b:2"]) == [("127.0.0.1", 1), ("b", 2)]
    assert parse_bootstrap_servers("[::1]:9092") == [("::1", 9092)]


@pytest.mark.parametrize("servers", ["", " , ", "host", "host:", "host:0", "host:70000", ":9092"])
def test_bad_bootstrap_servers_are_config_errors(servers):
    with pytest.raises(ConfigError) as raised:
        parse_bootstrap_servers(servers)
    assert raised.value.key == "bootstrap.servers"


def test_defaults_are_kafkas():
    config = load_client_config(AdminConfig, None, {"bootstrap_servers": "h:1"})
    assert config.request_timeout_ms == 30000
    assert config.retry_backoff_ms == 100
    assert config.metadata_max_age_ms == 300000
    assert config.default_api_timeout_ms == 60000
    assert config.reconnect_backoff_ms == 50


def test_dotted_mapping_and_snake_case_keywords_with_keywords_winning():
    config = load_client_config(
        AdminConfig, {"bootstrap.servers": "a:1", "request.timeout.ms": "5000", "retry.backoff.ms": 7},
        {"request_timeout_ms": 1234})
    assert config.bootstrap_servers == ("a:1",)
    assert config.request_timeout_ms == 1234
    assert config.retry_backoff_ms == 7


def test_environment_is_not_consulted(monkeypatch):
    monkeypatch.setenv("ODRADEK_REQUEST_TIMEOUT_MS", "1")
    config = load_client_config(AdminConfig, None, {"bootstrap_servers": "h:1"})
    assert config.request_timeout_ms == 30000


def test_missing_or_invalid_bootstrap_servers_fail():
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        load_client_config(AdminConfig, None, {})
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        load_client_config(AdminConfig, None, {"bootstrap_servers": "nohost"})
