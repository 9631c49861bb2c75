"""Overlapping appends to one partition reach a parked follower fetch together: the fetch is tried
after the last of them, not after the first (one fetch response for a burst of produces)."""

from __future__ import annotations

import threading

import pytest

from services.broker.log.config import LogConfig, LogManagerConfig
from services.broker.log.manager import LogManager
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_fetch import FetchParams, FetchPartition
from services.broker.replica_manager import ReplicaManager
from services.common.records import build_batch, iter_records
from services.common.shared_types import PartitionStateInfo
from services.common.topic_partition import TopicPartition
from services.devcluster.proc import wait_until

TP = ("t", 0)
FOLLOWER = 2


@pytest.fixture
def manager(tmp_path):
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "logs"),)), LogConfig())
    logs.startup()
    rm = ReplicaManager(1, logs, MetadataCache())
    state = PartitionStateInfo(TopicPartition("t", 0), 1, 1, 0, (1, 2), 0, (1, 2), is_new=True)
    rm.become_leader_or_follower(1001, 1, [state])
    yield rm
    rm.shutdown()
    logs.shutdown()


def park_follower_fetch(manager, offset: int):
    done = threading.Event()
    box = {}

    def respond(results):
        box.update(results)
        done.set()

    params = FetchParams(FOLLOWER, 30_000, 1, 1 << 20, (FetchPartition("t", 0, offset, 1 << 20, 0),))
    manager.fetch_messages(params, respond)
    return done, box


def append(manager, value: bytes) -> None:
    manager.append_records(1, 1000, {TP: build_batch([value])}, lambda results: None)


def test_a_parked_fetch_waits_for_the_last_overlapping_append(manager):
    done, box = park_follower_fetch(manager, 0)
    assert not done.is_set()
    log = manager.partition(*TP).log
    real_append = log.append_as_leader
    inside, release = threading.Event(), threading.Event()

    def slow_append(records, epoch, *origin):
        log.append_as_leader = real_append
        inside.set()
        assert release.wait(10)
        return real_append(records, epoch, *origin)

    log.append_as_leader = slow_append
    first = threading.Thread(target=append, args=(manager, b"first"))
    first.start()
    assert inside.wait(10)
    # the second produce queues behind the first one's append (the partition lock)
    second = threading.Thread(target=append, args=(manager, b"second"))
    second.start()
    wait_until(lambda: manager._appends_in_progress.get(TP) == 2, 10, 0.01, message="the second append to start")
    release.set()
    first.join(10)
    second.join(10)
    assert done.wait(10)
    assert [r.value for r in iter_records(box[TP].records)] == [b"first", b"second"]


def test_a_lone_append_completes_the_parked_fetch_at_once(manager):
    done, box = park_follower_fetch(manager, 0)
    append(manager, b"only")
    assert done.wait(10)
    assert [r.value for r in iter_records(box[TP].records)] == [b"only"]
