"""ReplicaFetcherThread against a leader that never answers: stopping the thread (as removing its
last partition does, inside LeaderAndIsr) must not wait for the hung request's timeout; against
leaders whose answers fail or are invalid records; against leaders without fetch sessions (every
fetch full) and with them (each fetch names only the partitions whose fetch changed)."""

from __future__ import annotations

import threading
import time

from services.broker.replication.fetcher import FetchAnswer, FetcherConfig, ReplicaFetcherThread
from services.common.clock import SYSTEM_CLOCK, ManualClock
from services.common.errors import Errors
from services.common.records import build_batch
from tests.unit.broker.log.support import misframed, open_log

TP = ("t", 0)


class HungLeader:
    """A leader endpoint whose fetch blocks until the endpoint is closed (a paused leader)."""

    def __init__(self) -> None:
        self.fetching = threading.Event()
        self.closed = threading.Event()

    def fetch(self, replica_id, max_wait_ms, min_bytes, max_bytes, fetch) -> FetchAnswer:
        self.fetching.set()
        self.closed.wait(60)
        return FetchAnswer(Errors.NETWORK_EXCEPTION, 0, {})

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
    """A leader without fetch sessions that answers every partition with NOT_LEADER_OR_FOLLOWER."""

    def __init__(self) -> None:
        self.requests = []

    def fetch(self, replica_id, max_wait_ms, min_bytes, max_bytes, fetch) -> FetchAnswer:
        assert fetch.full, "the leader answered outside any session"
        self.requests.append(fetch)
        return FetchAnswer(Errors.NONE, 0, {tp: self.answer(tp, values) for tp, values in fetch.partitions.items()})

    def answer(self, tp, values):
        return _NotLeader()

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

    def answer(self, tp, values):
        return _Empty()


class CountingFollower(FollowerWithEmptyLog):
    def __init__(self) -> None:
        self.appends = 0

    def append_as_follower(self, tp, records, leader_high_watermark, leader_log_start_offset=-1):
        self.appends += 1
        return 0


def test_idle_answers_with_an_unchanged_high_watermark_touch_no_log():
    follower, leader = CountingFollower(), IdleLeader()
    fetcher = ReplicaFetcherThread(2, leader, follower, FetcherConfig(replica_id=1), SYSTEM_CLOCK)
    fetcher.add_partitions({("t", i): 3 for i in range(50)})
    assert fetcher._run_once()
    assert follower.appends == 50  # the first answer brings each partition's high watermark
    assert fetcher._run_once() and fetcher._run_once()
    assert follower.appends == 50
    assert [(f.session_id, f.session_epoch, len(f.partitions)) for f in leader.requests] == [(0, 0, 50)] * 3


class _Records(_Empty):
    def __init__(self, records: bytes) -> None:
        self.records = records


class RecordsLeader(FailingLeader):
    """A leader answering each partition with the batch at the fetch offset: misframed for t-0."""

    def answer(self, tp, values):
        offset = values[0]
        return _Records(misframed(base_offset=offset) if tp == ("t", 0) else build_batch([b"v"], base_offset=offset))


class FollowerOfLogs(FollowerWithEmptyLog):
    def __init__(self, path) -> None:
        self.logs = {("t", i): open_log(path / f"t-{i}") for i in range(2)}

    def append_as_follower(self, tp, records, leader_high_watermark, leader_log_start_offset=-1):
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


# --------------------------------------------------------------------------------------------- fetch sessions

class _Answer:
    def __init__(self, error_code: int = Errors.NONE, high_watermark: int = -1, log_start_offset: int = 0,
                 records: bytes = b"") -> None:
        self.error_code, self.high_watermark = error_code, high_watermark
        self.log_start_offset, self.records = log_start_offset, records


class SessionLeader:
    """A leader keeping one fetch session (KIP-227) over logs of `ends[tp]` records each: it answers
    partitions with records, an error (`errors[tp]`) or a high watermark it has not answered yet."""

    def __init__(self, ends: dict) -> None:
        self.ends = dict(ends)
        self.errors: dict = {}
        self.log_start = 0
        self.session_id, self.epoch = 0, 0
        self.session: dict = {}  # tp -> fetch offset
        self.answered: dict = {}  # tp -> the high watermark last answered
        self.requests = []
        self.fail_calls = 0

    def fetch(self, replica_id, max_wait_ms, min_bytes, max_bytes, fetch) -> FetchAnswer:
        self.requests.append(fetch)
        if self.fail_calls:
            self.fail_calls -= 1
            return FetchAnswer(Errors.NETWORK_EXCEPTION, 0, {})
        if fetch.full:
            self.session_id, self.epoch = self.session_id + 1, 1
            self.session, self.answered = {tp: values[0] for tp, values in fetch.partitions.items()}, {}
        elif fetch.session_id != self.session_id:
            return FetchAnswer(Errors.FETCH_SESSION_ID_NOT_FOUND, 0, {})
        elif fetch.session_epoch != self.epoch:
            return FetchAnswer(Errors.INVALID_FETCH_SESSION_EPOCH, 0, {})
        else:
            self.epoch += 1
            for tp in fetch.forgotten:
                del self.session[tp]
                self.answered.pop(tp, None)
            self.session.update((tp, values[0]) for tp, values in fetch.partitions.items())
        answers = {}
        for tp, offset in self.session.items():
            end = self.ends[tp]
            if tp in self.errors:
                answers[tp] = _Answer(self.errors[tp])
            elif offset < self.log_start:
                answers[tp] = _Answer(Errors.OFFSET_OUT_OF_RANGE, log_start_offset=self.log_start)
            elif offset < end or self.answered.get(tp) != end:
                records = build_batch([b"v"] * (end - offset), base_offset=offset) if offset < end else b""
                answers[tp] = _Answer(high_watermark=end, records=records)
                self.answered[tp] = end
        return FetchAnswer(Errors.NONE, self.session_id, answers)

    def offsets_for_leader_epoch(self, partitions) -> dict:
        raise AssertionError("not asked: the local log has no epoch")

    def close(self) -> None:
        pass


class Follower(FollowerWithEmptyLog):
    """Logs as log end offsets: an append adds the batch's record count."""

    def __init__(self) -> None:
        self.ends: dict = {}
        self.appends = 0

    def append_as_follower(self, tp, records, leader_high_watermark, leader_log_start_offset=-1):
        self.appends += 1
        if records:
            self.ends[tp] = int.from_bytes(records[:8], "big") + int.from_bytes(records[57:61], "big")
        return self.ends.get(tp, 0)

    def restart_follower_at(self, tp, offset):
        self.ends[tp] = offset
        return offset


def session_fetcher(partitions: int = 1000, **ends):
    clock = ManualClock()
    leader = SessionLeader({("t", i): 0 for i in range(partitions)})
    follower = Follower()
    fetcher = ReplicaFetcherThread(2, leader, follower, FetcherConfig(replica_id=1, backoff_ms=1000), clock)
    fetcher.add_partitions({tp: 3 for tp in leader.ends})
    assert fetcher._run_once()
    first = leader.requests[-1]
    assert (first.session_id, first.session_epoch, len(first.partitions)) == (0, 0, partitions)
    return fetcher, leader, follower, clock


def named(fetch) -> dict:
    return {tp: values[0] for tp, values in fetch.partitions.items()}


def test_idle_partitions_are_neither_named_nor_answered_once_the_session_is_open():
    fetcher, leader, follower, _clock = session_fetcher()
    assert follower.appends == 1000  # the full answer: every partition's high watermark
    for epoch in (1, 2, 3):
        assert fetcher._run_once()
        fetch = leader.requests[-1]
        assert (fetch.session_id, fetch.session_epoch, fetch.partitions, fetch.forgotten) == (1, epoch, {}, [])
    assert follower.appends == 1000


def test_a_partition_that_got_records_is_named_again_at_its_new_offset():
    fetcher, leader, follower, _clock = session_fetcher()
    leader.ends[("t", 5)] = 3
    fetcher._run_once()  # the leader fetches t-5 from where its session has it
    assert follower.ends[("t", 5)] == 3 and fetcher.fetch_state(("t", 5)).fetch_offset == 3
    fetcher._run_once()
    assert named(leader.requests[-1]) == {("t", 5): 3}
    fetcher._run_once()
    assert named(leader.requests[-1]) == {}


def test_a_failing_partition_leaves_the_session_until_its_backoff_ends(caplog):
    fetcher, leader, _follower, clock = session_fetcher()
    leader.errors[("t", 7)] = Errors.NOT_LEADER_OR_FOLLOWER
    leader.ends[("t", 7)] = 1  # the answer changes: the leader says so
    with caplog.at_level("INFO", logger="services.broker.replication.fetcher"):
        fetcher._run_once()
    assert [r.getMessage() for r in caplog.records] == [
        "fetch of 1 partitions from leader 2 answered error 6 (t-7); backing off"]
    del leader.errors[("t", 7)]
    fetcher._run_once()
    assert leader.requests[-1].forgotten == [("t", 7)]
    clock.advance(999)
    fetcher._run_once()
    assert (named(leader.requests[-1]), leader.requests[-1].forgotten) == ({}, [])
    clock.advance(1)
    fetcher._run_once()
    assert named(leader.requests[-1]) == {("t", 7): 0}
    assert fetcher.fetch_state(("t", 7)).fetch_offset == 1


def test_a_session_the_leader_lost_is_opened_again_with_every_partition_at_once():
    fetcher, leader, _follower, _clock = session_fetcher(partitions=10)
    leader.ends[("t", 2)] = 4
    leader.session_id = 40  # evicted: the follower's session 1 is unknown now
    fetcher._run_once()
    assert fetcher.fetch_state(("t", 2)).delayed_until == 0
    fetcher._run_once()
    fetch = leader.requests[-1]
    assert (fetch.session_id, fetch.session_epoch, len(fetch.partitions)) == (0, 0, 10)
    assert fetcher.fetch_state(("t", 2)).fetch_offset == 4
    fetcher._run_once()
    assert (leader.requests[-1].session_id, leader.requests[-1].session_epoch) == (41, 1)


def test_after_a_failed_call_every_partition_backs_off_and_the_next_fetch_is_full():
    fetcher, leader, follower, clock = session_fetcher(partitions=10)
    fetcher.add_partitions({("t", 9): 4})  # truncated and named with its new epoch before the call fails
    leader.ends[("t", 3)] = 2
    leader.fail_calls = 1
    fetcher._run_once()
    assert leader.requests[-1].partitions == {("t", 9): (0, 4, 1024 * 1024)}
    assert all(fetcher.fetch_state(("t", i)).delayed_until == 1000 for i in range(10))
    assert not fetcher._run_once()  # nothing to fetch while all back off
    clock.advance(1000)
    fetcher._run_once()
    fetch = leader.requests[-1]
    assert (fetch.session_id, fetch.session_epoch) == (1, 0)  # close session 1, open another
    assert fetch.partitions[("t", 9)] == (0, 4, 1024 * 1024) and len(fetch.partitions) == 10
    assert follower.ends[("t", 3)] == 2


def test_a_fetch_offset_before_the_log_start_restarts_there_and_is_named():
    fetcher, leader, follower, _clock = session_fetcher(partitions=3)
    leader.ends = {tp: 10 for tp in leader.ends}
    leader.log_start = 5
    fetcher._run_once()
    assert all(fetcher.fetch_state(tp).fetch_offset == 5 for tp in leader.ends)
    fetcher._run_once()
    assert named(leader.requests[-1]) == {tp: 5 for tp in leader.ends}
    assert all(follower.ends[tp] == 10 for tp in leader.ends)


def test_removed_partitions_are_forgotten():
    fetcher, leader, _follower, _clock = session_fetcher(partitions=4)
    fetcher.remove_partitions([("t", 1), ("t", 3)])
    fetcher._run_once()
    assert leader.requests[-1].forgotten == [("t", 1), ("t", 3)] and set(leader.session) == {("t", 0), ("t", 2)}
