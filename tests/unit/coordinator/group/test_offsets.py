"""OffsetCommit / OffsetFetch and offset retention."""

from __future__ import annotations

from services.common.errors import Errors
from services.coordinator.group import CommittedOffset, TopicPartition
from services.coordinator.group.records import OffsetCommitKey, decode_key, decode_offset_commit_value
from tests.unit.coordinator.group.support import Harness, subscription

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
DAY_MS = 24 * 3600 * 1000
NEVER = 10**12  # no periodic expiration during the test


def test_commit_from_the_current_generation_is_visible_after_the_write():
    h = Harness()
    (a,), generation = h.stable_group(1)
    h.store.hold = True
    box = h.commit({T0: 5, T1: CommittedOffset(9, leader_epoch=3, metadata="meta")}, a, generation)
    assert not box.done
    assert h.fetch([T0, T1]) == {T0: -1, T1: -1}
    h.store.release(0)
    assert box.value == {T0: Errors.NONE, T1: Errors.NONE}
    _, fetched = h.coordinator.handle_fetch_offsets("group-a", None)
    assert (fetched[T1].offset, fetched[T1].leader_epoch, fetched[T1].metadata) == (9, 3, "meta")
    assert h.fetch() == {T0: 5, T1: 9}
    key, value = h.store.records()[-1]
    assert decode_key(key) == OffsetCommitKey("group-a", "t", 1)
    assert decode_offset_commit_value(value).commit_timestamp_ms == h.clock.time_ms()


def test_require_stable_reports_pending_commits():
    h = Harness()
    h.store.hold = True
    h.commit({T0: 5})
    error, fetched = h.coordinator.handle_fetch_offsets("group-a", [T0], require_stable=True)
    assert (error, fetched[T0].error_code) == (Errors.NONE, Errors.UNSTABLE_OFFSET_COMMIT)


def test_failed_write_is_reported_and_never_visible():
    h = Harness()
    (a,), generation = h.stable_group(1)
    h.store.fail_code = Errors.NOT_LEADER_OR_FOLLOWER
    assert h.commit({T0: 5}, a, generation).value == {T0: Errors.NOT_COORDINATOR}
    h.store.fail_code = Errors.MESSAGE_TOO_LARGE
    assert h.commit({T0: 5}, a, generation).value == {T0: Errors.INVALID_COMMIT_OFFSET_SIZE}
    h.store.fail_code = Errors.REQUEST_TIMED_OUT
    assert h.commit({T0: 5}, a, generation).value == {T0: Errors.REQUEST_TIMED_OUT}
    assert h.fetch([T0]) == {T0: -1}


def test_commit_from_an_old_generation_or_unknown_member_is_rejected():
    h = Harness()
    (a,), generation = h.stable_group(1)
    assert h.commit({T0: 1}, a, generation - 1).value == {T0: Errors.ILLEGAL_GENERATION}
    assert h.commit({T0: 1}, "stranger", generation).value == {T0: Errors.UNKNOWN_MEMBER_ID}
    assert h.commit({T0: 1}, "", -1).value == {T0: Errors.UNKNOWN_MEMBER_ID}  # group has members
    assert h.commit({T0: 1}, "someone", 3, group="absent").value == {T0: Errors.ILLEGAL_GENERATION}


def test_standalone_commit_creates_an_empty_group():
    h = Harness()
    assert h.commit({T0: 42}).value == {T0: Errors.NONE}
    described = h.describe()
    assert (described.state, described.protocol_type, described.members) == ("Empty", "", [])
    assert h.fetch() == {T0: 42}
    assert h.commit({T0: 43}).value == {T0: Errors.NONE}
    assert h.fetch([T0]) == {T0: 43}


def test_commit_during_completing_rebalance_is_refused_and_during_preparing_accepted():
    h = Harness()
    a, box = h.join_dynamic()
    h.tick()
    generation = box.value.generation_id
    assert h.commit({T0: 1}, a, generation).value == {T0: Errors.REBALANCE_IN_PROGRESS}
    h.sync(a, generation, {a: b""})
    b, _ = h.join_dynamic()  # a newcomer: PreparingRebalance, a is still of the current generation
    assert h.state() == "PreparingRebalance"
    assert h.commit({T0: 2}, a, generation).value == {T0: Errors.NONE}


def test_metadata_too_large():
    h = Harness(offset_metadata_max_bytes=4)
    result = h.commit({T0: CommittedOffset(1, metadata="12345"), T1: CommittedOffset(1, metadata="1234")})
    assert result.value == {T0: Errors.OFFSET_METADATA_TOO_LARGE, T1: Errors.NONE}
    only_large = h.commit({T0: CommittedOffset(1, metadata="12345")})
    assert only_large.value == {T0: Errors.OFFSET_METADATA_TOO_LARGE}
    assert h.fetch() == {T1: 1}


def test_fetch_of_unknown_group_and_partitions():
    h = Harness()
    assert h.fetch([T0], group="nobody") == {T0: -1}
    assert h.fetch(None, group="nobody") == {}
    h.commit({T0: 3})
    assert h.fetch([T0, T1]) == {T0: 3, T1: -1}


def test_offsets_of_an_empty_group_expire_a_retention_after_it_emptied():
    h = Harness(offsets_retention_minutes=24 * 60, offsets_retention_check_interval_ms=NEVER)
    (a,), generation = h.stable_group(1)
    h.commit({T0: 7}, a, generation)
    h.coordinator.handle_leave_group("group-a", [(a, None)])
    assert h.state() == "Empty"
    h.tick(DAY_MS - 1)
    assert h.coordinator.cleanup_expired_offsets() == 0
    h.tick(1)
    appends = len(h.store.appends)
    assert h.coordinator.cleanup_expired_offsets() == 1
    assert h.state() == "Dead"  # no offsets left: gone (describe of an unknown group says Dead)
    tombstones = h.store.records()[-2:]
    assert len(h.store.appends) == appends + 1
    assert [value for _, value in tombstones] == [None, None]
    assert [type(decode_key(key)).__name__ for key, _ in tombstones] == ["OffsetCommitKey", "GroupMetadataKey"]


def test_late_commit_to_an_empty_group_counts_from_the_commit():
    h = Harness(offsets_retention_minutes=24 * 60, offsets_retention_check_interval_ms=NEVER)
    (a,), generation = h.stable_group(1)
    h.coordinator.handle_leave_group("group-a", [(a, None)])
    h.tick(DAY_MS // 2)
    h.commit({T0: 1})
    h.tick(DAY_MS // 2)
    assert h.coordinator.cleanup_expired_offsets() == 0
    h.tick(DAY_MS // 2)
    assert h.coordinator.cleanup_expired_offsets() == 1


def test_standalone_offsets_expire_from_their_commit_time_and_explicit_expiry_wins():
    h = Harness(offsets_retention_minutes=60, offsets_retention_check_interval_ms=NEVER)
    now = h.clock.time_ms()
    h.commit({T0: 1, T1: CommittedOffset(2, expire_timestamp_ms=now + 1000)})
    h.tick(1000)
    assert h.coordinator.cleanup_expired_offsets() == 1
    assert h.fetch() == {T0: 1}
    h.tick(3600 * 1000)
    assert h.coordinator.cleanup_expired_offsets() == 1
    assert h.fetch([T0]) == {T0: -1}


def test_stable_consumer_group_expires_only_unsubscribed_topics():
    h = Harness(offsets_retention_minutes=60, offsets_retention_check_interval_ms=NEVER)
    (a,), generation = h.stable_group(1, protocols=[("range", subscription("t"))], session_timeout_ms=600000)
    other = TopicPartition("old-topic", 0)
    h.commit({T0: 1, other: 2}, a, generation)
    for _ in range(13):
        h.tick(5 * 60 * 1000)
        assert h.heartbeat(a, generation) == Errors.NONE
    assert h.coordinator.cleanup_expired_offsets() == 1
    assert h.fetch() == {T0: 1}
    assert h.state() == "Stable"


def test_periodic_cleanup_runs_on_the_scheduler():
    h = Harness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=30000)
    h.commit({T0: 1})
    h.tick(60000)
    assert h.fetch([T0]) == {T0: -1}
    assert h.state() == "Dead"


def test_a_deleted_topics_offsets_leave_every_group_with_tombstones():
    h = Harness(offsets_retention_check_interval_ms=NEVER)
    (a,), generation = h.stable_group(1)
    kept = TopicPartition("kept", 0)
    h.commit({T0: 1, T1: 2, kept: 3}, a, generation)
    h.commit({T0: 4}, group="standalone")
    h.commit({kept: 5}, group="other")
    assert h.coordinator.run(lambda core: core.offset_topics()) == {"t", "kept"}
    appends = len(h.store.appends)
    removed = h.coordinator.run(lambda core: core.handle_deleted_topics({"t"}))
    assert removed == 3
    assert h.fetch() == {kept: 3} and h.state() == "Stable"
    assert h.fetch(group="standalone") == {} and h.state("standalone") == "Dead"
    assert h.fetch(group="other") == {kept: 5}
    tombstones = [decode_key(key) for _, batch in h.store.appends[appends:] for key, value in batch if value is None]
    assert sorted(tombstones, key=repr) == [OffsetCommitKey("group-a", "t", 0), OffsetCommitKey("group-a", "t", 1),
                                            OffsetCommitKey("standalone", "t", 0)]
    assert h.coordinator.run(lambda core: core.offset_topics()) == {"kept"}
    assert h.coordinator.run(lambda core: core.handle_deleted_topics({"t"})) == 0
    assert len(h.store.appends) == appends + 2


def test_a_commit_in_flight_for_a_deleted_topic_does_not_bring_it_back():
    h = Harness(offsets_retention_check_interval_ms=NEVER)
    h.commit({T0: 1})
    h.store.hold = True
    box = h.commit({T0: 2})
    h.coordinator.run(lambda core: core.handle_deleted_topics({"t"}))
    h.store.release(0)
    assert box.value == {T0: Errors.NONE}
    assert h.fetch() == {}
