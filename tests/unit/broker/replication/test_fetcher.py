"""ReplicaFetcherThread against a leader that never answers: stopping the thread (as removing its
last partition does, inside LeaderAndIsr) must not wait for the hung request's timeout; against
leaders whose answers fail or are invalid records."""

from __future__ import annotations

import threading
import time

from services.broker.replication.fetcher import FetcherConfig, ReplicaFetcherThread
from services.common.clock import SYSTEM_CLOCK
from services.common.errors import Errors
from services.common.records import build_batch
from tests.unit.broker.log.support import misframed, open_log

TP = ("t", 0)


class HungLeader:
    """A leader endpoint whose fetch blocks until the endpoint is closed (a paused leader)."""

    def __init__(self) -> None:
        self.fetching = threading.Event()
        self.closed = threading.Event()

    def fetch(self, replica_id, max_wait_ms, min_bytes, max_bytes, partitions) -> dict:
        self.fetching.set()
        self.closed.wait(60)
        return {tp: _Failed() for tp in partitions}

    def offsets_for_leader_epoch(self, partitions) -> dict:
        raise AssertionError("not asked: the local log has no epoch")

    def close(self) -> None:
        self.closed.set()


class _Failed:
    error_code = Errors.NETWORK_EXCEPTION
    high_watermark = -1
    log_start_offset = -1
    records = b""


class FollowerWithEmptyLog:
    def latest_local_epoch(self, tp):
        return None

    def truncate_follower(self, tp, offset):
        return 0


def test_shutdown_ends_a_request_hung_on_the_leader():
    leader = HungLeader()
    fetcher = ReplicaFetcherThread(2, leader, FollowerWithEmptyLog(),
                                   FetcherConfig(replica_id=1, request_timeout_ms=30000), SYSTEM_CLOCK)
    fetcher.start()
    fetcher.add_partitions({TP: 3})
    assert leader.fetching.wait(10)
    fetcher.remove_partitions([TP])
    started = time.monotonic()
    fetcher.shutdown()
    assert time.monotonic() - started < 5
    assert leader.closed.is_set()



class FailingLeader:
    """A leader that answers every partition of every fetch with NOT_LEADER_OR_FOLLOWER."""

    def fetch(self, replica_id, max_wait_ms, min_bytes, max_bytes, partitions) -> dict:
        return {tp: _NotLeader() for tp in partitions}

    def offsets_for_leader_epoch(self, partitions) -> dict:
        raise AssertionError("not asked: the local log has no epoch")

    def close(self) -> None:
        pass


class _NotLeader(_Failed):
    error_code = Errors.NOT_LEADER_OR_FOLLOWER


def test_a_failed_fetch_of_many_partitions_logs_one_line(caplog):
    fetcher = ReplicaFetcherThread(2, FailingLeader(), FollowerWithEmptyLog(),
                                   FetcherConfig(replica_id=1), SYSTEM_CLOCK)
    fetcher.add_partitions({("t", i): 3 for i in range(500)})
    with caplog.at_level("INFO", logger="services.broker.replication.fetcher"):
        assert fetcher._run_once()
    assert len(caplog.records) == 1
    assert "fetch of 500 partitions from leader 2 answered error 6" in caplog.records[0].getMessage()
    assert all(fetcher.fetch_state(("t", i)).delayed_until > 0 for i in range(500))


class _Empty:
    error_code = 0
    high_watermark = 4
    log_start_offset = 0
    records = b""


class IdleLeader(FailingLeader):
    """A leader whose partitions get nothing new: every answer is empty, with the same high watermark."""

    def fetch(self, replica_id, max_wait_ms, min_bytes, max_bytes, partitions) -> dict:
        return {tp: _Empty() for tp in partitions}


class CountingFollower(FollowerWithEmptyLog):
    def __init__(self) -> None:
        self.appends = 0

    def append_as_follower(self, tp, records, leader_high_watermark):
        self.appends += 1
        return 0


def test_idle_answers_with_an_unchanged_high_watermark_touch_no_log():
    follower = CountingFollower()
    fetcher = ReplicaFetcherThread(2, IdleLeader(), follower, FetcherConfig(replica_id=1), SYSTEM_CLOCK)
    fetcher.add_partitions({("t", i): 3 for i in range(50)})
    assert fetcher._run_once()
    assert follower.appends == 50  # the first answer brings each partition's high watermark
    assert fetcher._run_once() and fetcher._run_once()
    assert follower.appends == 50


class _Records(_Empty):
    def __init__(self, records: bytes) -> None:
        self.records = records


class RecordsLeader(FailingLeader):
    """A leader answering each partition with the batch at the fetch offset: misframed for t-0."""

    def fetch(self, replica_id, max_wait_ms, min_bytes, max_bytes, partitions) -> dict:
        answers = {}
        for tp, (offset, *_rest) in partitions.items():
            good = build_batch([b"v"], base_offset=offset)
            answers[tp] = _Records(misframed(base_offset=offset) if tp == ("t", 0) else good)
        return answers


class FollowerOfLogs(FollowerWithEmptyLog):
    def __init__(self, path) -> None:
        self.logs = {("t", i): open_log(path / f"t-{i}") for i in range(2)}

    def append_as_follower(self, tp, records, leader_high_watermark):
        log = self.logs[tp]
        log.append_as_follower(records)
        return log.log_end_offset


def test_invalid_records_from_the_leader_are_logged_and_not_appended(tmp_path, caplog):
    follower = FollowerOfLogs(tmp_path)
    fetcher = ReplicaFetcherThread(2, RecordsLeader(), follower, FetcherConfig(replica_id=1), SYSTEM_CLOCK)
    fetcher.add_partitions({("t", 0): 0, ("t", 1): 0})
    with caplog.at_level("ERROR", logger="services.broker.replication.fetcher"):
        fetcher._run_once()
    assert follower.logs[("t", 0)].log_end_offset == 0
    assert follower.logs[("t", 1)].log_end_offset == 1
    assert fetcher.fetch_state(("t", 0)).delayed_until > 0
    assert any("invalid records fetched for" in r.getMessage() for r in caplog.records)
