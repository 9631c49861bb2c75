"""Tests for the producer's configuration: Kafka's defaults, dotted and snake_case keys, and the
cross-key rules of Kafka 3.x (idempotence conflicts, delivery.timeout.ms bound)."""

from __future__ import annotations

import pytest

from services.clients.producer.config import ProducerConfig, load_producer_config, resolve_serializer
from services.common.config import ConfigError

BOOTSTRAP = {"bootstrap.servers": "127.0.0.1:9092"}


def load(**overrides) -> ProducerConfig:
    config, _ = load_producer_config(BOOTSTRAP, overrides)
    return config


def test_defaults_are_kafkas():
    config = load()
    assert (config.acks, config.required_acks, config.enable_idempotence, config.retries) == ("all", -1, True,
                                                                                              2147483647)
    assert (config.batch_size, config.linger_ms, config.buffer_memory, config.max_block_ms) == (16384, 0,
                                                                                                33554432, 60000)
    assert (config.max_request_size, config.max_in_flight_requests_per_connection) == (1048576, 5)
    assert (config.delivery_timeout_ms, config.request_timeout_ms, config.retry_backoff_ms) == (120000, 30000,
                                                                                                100)
    assert (config.compression_type, config.metadata_max_age_ms) == ("none", 300000)


def test_dotted_keys_and_keywords_with_keywords_winning():
    config, _ = load_producer_config({**BOOTSTRAP, "linger.ms": "7", "compression.type": "lz4", "acks": "1"},
                                     {"linger_ms": 9, "client_id": "me"})
    assert (config.linger_ms, config.compression_type, config.client_id, config.required_acks) == (9, "lz4",
                                                                                                   "me", 1)


@pytest.mark.parametrize("acks, expected", [("all", -1), ("-1", -1), (-1, -1), (0, 0), ("1", 1), (1, 1)])
def test_acks_values(acks, expected):
    assert load(acks=acks, enable_idempotence=False).required_acks == expected


@pytest.mark.parametrize("key, value", [("acks", "2"), ("compression_type", "brotli"), ("batch_size", -1),
                                        ("retries", -1), ("max_in_flight_requests_per_connection", 0),
                                        ("linger_ms", "soon")])
def test_invalid_values(key, value):
    with pytest.raises(ConfigError):
        load(**{key: value})


def test_conflicting_settings_turn_default_idempotence_off():
    assert not load(acks=1).enable_idempotence
    assert not load(acks=0).enable_idempotence
    assert not load(retries=0).enable_idempotence
    assert not load(max_in_flight_requests_per_connection=6).enable_idempotence
    assert load(acks="all", max_in_flight_requests_per_connection=5).enable_idempotence


@pytest.mark.parametrize("key, value", [("acks", "1"), ("retries", 0), ("max_in_flight_requests_per_connection", 6)])
def test_conflicts_with_explicit_idempotence_are_errors(key, value):
    with pytest.raises(ConfigError) as error:
        load(enable_idempotence=True, **{key: value})
    assert error.value.key == key.replace("_", ".")
    with pytest.raises(ConfigError):
        load_producer_config({**BOOTSTRAP, "enable.idempotence": "true", key.replace("_", "."): value}, {})


def test_delivery_timeout_must_cover_linger_and_request_timeout():
    with pytest.raises(ConfigError, match="delivery.timeout.ms"):
        load(delivery_timeout_ms=1000, linger_ms=500, request_timeout_ms=1000)
    assert load(delivery_timeout_ms=1500, linger_ms=500, request_timeout_ms=1000).delivery_timeout_ms == 1500
    # not set explicitly: raised to the sum, as Kafka does
    assert load(linger_ms=100000, request_timeout_ms=30000).delivery_timeout_ms == 130000


def test_a_transactional_producer_must_be_idempotent():
    config = load(transactional_id="tx")
    assert (config.transactional_id, config.transaction_timeout_ms, config.enable_idempotence) == ("tx", 60000, True)
    with pytest.raises(ConfigError, match="transactional.id"):
        load(transactional_id="tx", enable_idempotence=False)
    with pytest.raises(ConfigError, match="transactional.id"):
        load(transactional_id="tx", acks="1")


def test_bootstrap_servers_are_required_and_checked():
    with pytest.raises(ConfigError):
        load_producer_config({}, {})
    with pytest.raises(ConfigError):
        load_producer_config({"bootstrap.servers": "no-port"}, {})


def test_plugins_from_keywords_or_dotted_keys():
    class Upper:
        def serialize(self, topic, data):
            return f"{topic}:{data}".upper().encode()

    class Interceptor:
        def on_send(self, record):
            return record

        def on_acknowledgement(self, metadata, exception):
            pass

    _, plugins = load_producer_config({**BOOTSTRAP, "value.serializer": Upper, "interceptor.classes": [Interceptor]},
                                      {"key_serializer": str.encode, "partitioner_class": "round_robin"})
    assert plugins.value_serializer("t", "x") == b"T:X"
    assert plugins.key_serializer("t", "k") == b"k"
    assert type(plugins.partitioner).__name__ == "RoundRobinPartitioner"
    assert len(plugins.interceptors) == 1 and isinstance(plugins.interceptors[0], Interceptor)
    assert resolve_serializer("key.serializer", None) is None
    with pytest.raises(ConfigError, match="value.serializer"):
        resolve_serializer("value.serializer", 42)
