"""GroupConfig: Kafka 2.8's names and defaults."""

from __future__ import annotations

import pytest

from services.common.config import ConfigError
from services.coordinator.group import GroupConfig


def test_kafka_defaults():
    config = GroupConfig()
    assert (config.group_min_session_timeout_ms, config.group_max_session_timeout_ms) == (6000, 1800000)
    assert (config.group_initial_rebalance_delay_ms, config.group_max_size) == (3000, 2**31 - 1)
    assert (config.offsets_topic_num_partitions, config.offsets_retention_minutes) == (50, 10080)
    assert (config.offsets_retention_check_interval_ms, config.offset_metadata_max_bytes) == (600000, 4096)
    assert config.offsets_retention_ms == 7 * 24 * 3600 * 1000


def test_from_mapping_takes_dotted_keys_and_ignores_others():
    config = GroupConfig.from_mapping(
        {"group.max.size": "10", "offsets.topic.num.partitions": 3, "log.segment.bytes": "1"}
    )
    assert (config.group_max_size, config.offsets_topic_num_partitions) == (10, 3)
    with pytest.raises(ConfigError, match="group.max.size"):
        GroupConfig.from_mapping({"group.max.size": "0"})
