"""The 0.8 consumer's config keys and defaults."""

import pytest

from services.clients.zk_consumer import ZkConsumerConfig
from services.common.config import ConfigError


def test_defaults_are_kafka_0_8s():
    config = ZkConsumerConfig.load({"zookeeper.connect": "zk:2181/odradek", "group.id": "g"}, env={})
    assert (config.auto_commit_enable, config.auto_commit_interval_ms, config.auto_offset_reset) == (True, 60000,
                                                                                                    "largest")
    assert (config.consumer_timeout_ms, config.rebalance_max_retries, config.rebalance_backoff_ms) == (-1, 4, 2000)
    assert (config.fetch_message_max_bytes, config.queued_max_message_chunks, config.num_consumer_fetchers) == (
        1048576, 2, 1)
    assert (config.refresh_leader_backoff_ms, config.zookeeper_session_timeout_ms) == (200, 6000)
    assert (config.fetch_wait_max_ms, config.fetch_min_bytes, config.consumer_id) == (100, 1, None)
    assert config.partition_assignment_strategy == "range"


def test_bad_values_name_their_key():
    with pytest.raises(ConfigError, match="auto.offset.reset"):
        ZkConsumerConfig.load({"zookeeper.connect": "zk:2181", "group.id": "g", "auto.offset.reset": "earliest"},
                              env={})
    with pytest.raises(ConfigError, match="group.id"):
        ZkConsumerConfig.load({"zookeeper.connect": "zk:2181"}, env={})


def test_an_unknown_assignment_strategy_names_the_allowed_ones():
    base = {"zookeeper.connect": "zk:2181", "group.id": "g"}
    config = ZkConsumerConfig.load({**base, "partition.assignment.strategy": "roundrobin"}, env={})
    assert config.partition_assignment_strategy == "roundrobin"
    with pytest.raises(ConfigError, match="partition.assignment.strategy.*range, roundrobin"):
        ZkConsumerConfig.load({**base, "partition.assignment.strategy": "sticky"}, env={})


def test_offsets_storage_keys_have_0_8_2s_defaults_and_an_unknown_storage_names_the_allowed_ones():
    base = {"zookeeper.connect": "zk:2181", "group.id": "g"}
    config = ZkConsumerConfig.load(base, env={})
    assert (config.offsets_storage, config.dual_commit_enabled) == ("zookeeper", True)
    assert (config.offsets_channel_backoff_ms, config.offsets_channel_socket_timeout_ms,
            config.offsets_commit_max_retries) == (1000, 10000, 5)
    config = ZkConsumerConfig.load({**base, "offsets.storage": "kafka", "dual.commit.enabled": "false"}, env={})
    assert (config.offsets_storage, config.dual_commit_enabled) == ("kafka", False)
    with pytest.raises(ConfigError, match="offsets.storage.*zookeeper, kafka"):
        ZkConsumerConfig.load({**base, "offsets.storage": "redis"}, env={})
    with pytest.raises(ConfigError, match="offsets.commit.max.retries"):
        ZkConsumerConfig.load({**base, "offsets.commit.max.retries": -1}, env={})
