"""The leader's fetch session cache: opening, incremental epochs, forgotten partitions, the
changed marks, and the eviction rules of a full cache."""

from __future__ import annotations

from services.broker.fetch_session_cache import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    MAX_EPOCH,
    FetchSessionCache,
    next_epoch,
)
from services.broker.replica_fetch import FetchPartition
from services.common.errors import Errors


def named(*indexes: int, offset: int = 0, topic: str = "t") -> list[FetchPartition]:
    return [FetchPartition(topic, i, offset, 1 << 20, 0) for i in indexes]


def open_session(cache, replica_id=1, partitions=(0, 1, 2), now_ms=0):
    context = cache.new_context(replica_id, 0, INITIAL_EPOCH, named(*partitions), [], False, now_ms)
    assert context.error == Errors.NONE and context.full
    return context.session


def test_a_full_fetch_opens_a_session_an_incremental_one_continues_it():
    cache = FetchSessionCache()
    session = open_session(cache)
    assert session.id > 0 and cache.size == 1 and cache.partitions_cached == 3
    cache.take_changed(session)
    context = cache.new_context(1, session.id, 1, named(1, offset=5), [], False, 10)
    assert context.error == Errors.NONE and not context.full and context.session is session
    assert session.epoch == 2 and session.last_used_ms == 10
    assert [key for key, _ in cache.take_changed(session)] == [("t", 1)]
    assert session.partitions[("t", 1)].fetch_offset == 5
    assert cache.take_changed(session) == []


def test_wrong_epochs_and_unknown_sessions_are_refused():
    cache = FetchSessionCache()
    session = open_session(cache)
    assert cache.new_context(1, session.id, 7, [], [], False, 0).error == Errors.INVALID_FETCH_SESSION_EPOCH
    assert cache.new_context(2, session.id, 1, [], [], False, 0).error == Errors.INVALID_FETCH_SESSION_EPOCH
    assert cache.new_context(1, session.id + 1, 1, [], [], False, 0).error == Errors.FETCH_SESSION_ID_NOT_FOUND
    assert cache.new_context(1, session.id, 1, [], [], False, 0).error == Errors.NONE


def test_epoch_zero_replaces_a_session_and_final_epoch_closes_it():
    cache = FetchSessionCache()
    first = open_session(cache)
    second = cache.new_context(1, first.id, INITIAL_EPOCH, named(0), [], False, 0).session
    assert first.closed and second.id != first.id and cache.size == 1
    context = cache.new_context(1, second.id, FINAL_EPOCH, named(0), [], False, 0)
    assert context.session is None and context.full and cache.size == 0 and second.closed
    assert cache.holders(("t", 0)) == []


def test_forgotten_partitions_leave_the_session_and_its_marks():
    cache = FetchSessionCache()
    session = open_session(cache)
    cache.take_changed(session)
    cache.mark_changed(("t", 2))
    cache.new_context(1, session.id, 1, [], [("t", 2)], False, 0)
    assert ("t", 2) not in session.partitions and cache.take_changed(session) == []
    assert cache.mark_changed(("t", 2)) == []
    assert cache.mark_changed(("t", 0)) == [session]


def test_changes_mark_only_the_sessions_holding_the_partition():
    cache = FetchSessionCache()
    one, two = open_session(cache, 1, (0, 1)), open_session(cache, 2, (1, 2))
    for session in (one, two):
        cache.take_changed(session)
    assert set(s.id for s in cache.mark_changed(("t", 1))) == {one.id, two.id}
    assert cache.mark_changed(("t", 9)) == []
    assert cache.peek_changed(one)[0][0] == ("t", 1) and cache.has_changed(one)
    assert [key for key, _ in cache.take_changed(two)] == [("t", 1)] and not cache.has_changed(two)


def test_the_epoch_wraps_to_one():
    assert next_epoch(MAX_EPOCH) == 1 and next_epoch(1) == 2


def test_session_fetch_time_is_that_of_the_replicas_session_holding_the_partition():
    cache = FetchSessionCache()
    session = open_session(cache, replica_id=2, partitions=(0,), now_ms=100)
    cache.new_context(2, session.id, 1, [], [], False, 250)
    assert cache.last_fetch_ms(2, ("t", 0)) == 250
    assert cache.last_fetch_ms(3, ("t", 0)) == 0
    assert cache.last_fetch_ms(2, ("t", 1)) == 0


def test_a_full_cache_answers_outside_a_session_unless_it_may_evict():
    cache = FetchSessionCache(max_slots=1)
    consumer = open_session(cache, replica_id=-1, partitions=(0, 1))
    # another consumer's session with no more partitions may not take the slot
    refused = cache.new_context(-1, 0, INITIAL_EPOCH, named(5, 6), [], False, 1000)
    assert refused.session is None and refused.session_id == 0 and cache.size == 1
    # a follower's session outranks any consumer's
    follower = open_session(cache, replica_id=2, partitions=(0,), now_ms=2000)
    assert consumer.closed and cache.size == 1 and cache.evictions == 1
    # a consumer never takes a follower's slot, nor a follower one with as many partitions
    assert cache.new_context(-1, 0, INITIAL_EPOCH, named(*range(10)), [], False, 3000).session is None
    assert cache.new_context(3, 0, INITIAL_EPOCH, named(7), [], False, 3000).session is None
    # a follower with more partitions does
    bigger = open_session(cache, replica_id=3, partitions=(0, 1), now_ms=4000)
    assert follower.closed and cache.size == 1 and bigger.id in {s.id for s in cache.holders(("t", 0))}


def test_a_session_unused_for_the_eviction_time_gives_its_slot_to_anyone():
    cache = FetchSessionCache(max_slots=1, eviction_ms=1000)
    follower = open_session(cache, replica_id=2, partitions=tuple(range(10)), now_ms=0)
    consumer = cache.new_context(-1, 0, INITIAL_EPOCH, named(0), [], False, 1001).session
    assert follower.closed and consumer is not None and cache.evictions == 1


def test_no_slots_means_no_sessions():
    cache = FetchSessionCache(max_slots=0)
    assert cache.new_context(2, 0, INITIAL_EPOCH, named(0), [], False, 0).session is None


def test_a_followers_new_session_replaces_its_previous_one():
    cache = FetchSessionCache(max_slots=2)
    first = open_session(cache, replica_id=2, partitions=(0, 1))
    consumer = open_session(cache, replica_id=-1, partitions=(0,))
    second = open_session(cache, replica_id=2, partitions=(0,))
    assert first.closed and not consumer.closed and cache.size == 2 and cache.evictions == 0
    assert cache.holders(("t", 1)) == [] and set(cache.holders(("t", 0))) == {consumer, second}
