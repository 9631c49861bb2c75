"""`GroupConfig`: the broker keys (Kafka 2.8 names and defaults) the group coordinator reads.

Group membership bounds (`group.*`) and the offsets store (`offsets.*`, `offset.metadata.max.bytes`).
`NEW_MEMBER_JOIN_TIMEOUT_MS` is Kafka's fixed (not configurable) limit on how long a member that
has just been added may wait for its first JoinGroup response before it is expired.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.common.config import Config, ConfigType, at_least, setting

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
INT_MAX = 2**31 - 1


class GroupConfig(Config):
    group_min_session_timeout_ms: int = setting(
        ConfigType.INT, 6000, doc="Smallest session timeout a member may ask for."
    )
    group_max_session_timeout_ms: int = setting(
        ConfigType.INT, 1800000, doc="Largest session timeout a member may ask for."
    )
    group_initial_rebalance_delay_ms: int = setting(
        ConfigType.INT,
        3000,
        at_least(0),
        doc="How long the first rebalance of an empty group waits for more members to join.",
    )
    group_max_size: int = setting(
        ConfigType.INT, INT_MAX, at_least(1), doc="Most members a single group may have."
    )
    offsets_topic_num_partitions: int = setting(
        ConfigType.INT, 50, at_least(1), doc="Partitions of __consumer_offsets (fixed once created)."
    )
    offsets_retention_minutes: int = setting(
        ConfigType.INT,
        10080,
        at_least(1),
        doc="How long committed offsets of a group without members (or of unsubscribed topics) are kept.",
    )
    offsets_retention_check_interval_ms: int = setting(
        ConfigType.LONG, 600000, at_least(1), doc="How often expired offsets are looked for."
    )
    offset_metadata_max_bytes: int = setting(
        ConfigType.INT, 4096, doc="Longest metadata string an offset commit may carry."
    )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> GroupConfig:
        """The declared keys found in `values` (dotted keys); other keys are ignored."""
        return cls.load({k: v for k, v in values.items() if k in cls.__settings__}, env={})

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60 * 1000
