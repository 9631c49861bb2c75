"""ControllerConfig: Kafka's keys and defaults."""

from __future__ import annotations

import pytest

from services.common.config import ConfigError
from services.controller.state.config import ControllerConfig


def test_kafka_defaults():
    config = ControllerConfig()
    assert config.as_dict() == {
        "default.replication.factor": 1,
        "num.partitions": 1,
        "auto.leader.rebalance.enable": True,
        "leader.imbalance.per.broker.percentage": 10,
        "leader.imbalance.check.interval.seconds": 300,
        "unclean.leader.election.enable": False,
        "delete.topic.enable": True,
        "controlled.shutdown.enable": True,
        "controlled.shutdown.max.retries": 3,
        "controlled.shutdown.retry.backoff.ms": 5000,
        "controller.socket.timeout.ms": 30000,
    }
    assert config.leader_imbalance_check_interval_ms == 300_000


def test_from_dotted_keys():
    config = ControllerConfig.from_dict(
        {"num.partitions": "3", "unclean.leader.election.enable": "true", "log.dirs": "/x"}
    )
    assert config.num_partitions == 3
    assert config.unclean_leader_election_enable is True
    assert config.unknown() == {"log.dirs": "/x"}


@pytest.mark.parametrize(
    "bad",
    [
        {"num.partitions": "0"},
        {"leader.imbalance.per.broker.percentage": "101"},
        {"leader.imbalance.check.interval.seconds": "0"},
        {"delete.topic.enable": "maybe"},
    ],
)
def test_invalid_values(bad):
    with pytest.raises(ConfigError):
        ControllerConfig.from_dict(bad)
