"""Fixtures of the broker tests: a ReplicaManager over real logs in a temp dir (broker 1, no
metadata, default topic configs); modules with topic configs of their own define their own."""

from __future__ import annotations

import pytest

from services.broker.log.config import LogConfig, LogManagerConfig
from services.broker.log.manager import LogManager
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_manager import ReplicaManager


@pytest.fixture
def manager(tmp_path):
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "logs"),)), LogConfig())
    logs.startup()
    rm = ReplicaManager(1, logs, MetadataCache())
    yield rm
    rm.shutdown()
    logs.shutdown()
