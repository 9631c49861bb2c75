"""`ControllerConfig`: the broker configs (Kafka 2.8 names and defaults) the controller's logic reads."""

from __future__ import annotations

from services.common.config import Config, ConfigType, at_least, between, setting


class ControllerConfig(Config):
    default_replication_factor: int = setting(
        ConfigType.INT, 1, doc="Replication factor of topics created without one."
    )
    num_partitions: int = setting(
        ConfigType.INT, 1, at_least(1), doc="Partition count of topics created without one."
    )
    auto_leader_rebalance_enable: bool = setting(
        ConfigType.BOOLEAN, True, doc="Move leadership back to preferred replicas periodically."
    )
    leader_imbalance_per_broker_percentage: int = setting(
        ConfigType.INT,
        10,
        between(0, 100),
        doc="Share of a broker's preferred partitions led elsewhere above which a rebalance runs.",
    )
    leader_imbalance_check_interval_seconds: int = setting(
        ConfigType.LONG, 300, at_least(1), doc="How often the leader imbalance is checked."
    )
    unclean_leader_election_enable: bool = setting(
        ConfigType.BOOLEAN,
        False,
        doc="Allow a replica outside the ISR to become leader when no ISR member is alive (may lose data).",
    )
    delete_topic_enable: bool = setting(
        ConfigType.BOOLEAN, True, doc="Whether DeleteTopics (and /admin/delete_topics) deletes topics."
    )
    controlled_shutdown_enable: bool = setting(
        ConfigType.BOOLEAN, True, doc="Brokers move leadership away before shutting down."
    )
    controlled_shutdown_max_retries: int = setting(
        ConfigType.INT, 3, doc="How many times a broker retries a failed controlled shutdown."
    )
    controlled_shutdown_retry_backoff_ms: int = setting(
        ConfigType.LONG, 5000, doc="Wait between a broker's controlled shutdown attempts."
    )
    controller_socket_timeout_ms: int = setting(
        ConfigType.INT, 30000, doc="Timeout of controller-to-broker requests."
    )

    @classmethod
    def from_dict(cls, dotted_keys: dict[str, object]) -> ControllerConfig:
        """Build from a mapping of Kafka's dotted keys, ignoring the environment."""
        return cls.load(dotted_keys, env={})

    @property
    def leader_imbalance_check_interval_ms(self) -> int:
        return self.leader_imbalance_check_interval_seconds * 1000
