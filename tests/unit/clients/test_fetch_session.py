"""FetchSessionHandler: a full fetch opens the session, later fetches name only what changed and
forget what left, any doubt about the leader's session makes the next fetch full, the epoch
wraps, and a leader without room for a session gets full fetches asking for one."""

from __future__ import annotations

from types import SimpleNamespace

from services.clients.fetch_session import MAX_EPOCH, FetchSessionHandler, SessionFetch
from services.clients.partition_requests import session_fetch_request
from services.common.errors import Errors


def answer(session_id: int, error_code: int = Errors.NONE) -> SimpleNamespace:
    return SimpleNamespace(error_code=error_code, session_id=session_id)


def opened(partitions: int = 3, session_id: int = 7) -> FetchSessionHandler:
    """A handler whose session holds t-0 .. t-(partitions-1), all at offset 0, epoch 1 next."""
    session = FetchSessionHandler()
    for i in range(partitions):
        session.set_partition(("t", i), 0, 5, 1024)
    fetch = session.build()
    assert fetch.full and len(fetch.partitions) == partitions
    assert session.handle_response(answer(session_id))
    return session


def test_a_full_fetch_opens_the_session_and_then_only_changes_are_sent():
    session = FetchSessionHandler()
    session.set_partition(("t", 0), 0, 5, 1024)
    session.set_partition(("t", 1), 0, 5, 1024)
    first = session.build()
    assert (first.session_id, first.session_epoch, first.full) == (0, 0, True)
    assert first.partitions == {("t", 0): (0, 5, 1024), ("t", 1): (0, 5, 1024)} and first.forgotten == []
    assert session.handle_response(answer(7))
    idle = session.build()
    assert (idle.session_id, idle.session_epoch, idle.full) == (7, 1, False)
    assert idle.partitions == {} and idle.forgotten == []
    assert session.handle_response(answer(7))
    session.set_partition(("t", 1), 4, 5, 1024)
    session.set_partition(("t", 0), 0, 5, 1024)  # unchanged: not sent
    moved = session.build()
    assert (moved.session_epoch, moved.partitions) == (2, {("t", 1): (4, 5, 1024)})
    assert session.session_partitions == {("t", 0): (0, 5, 1024), ("t", 1): (4, 5, 1024)}


def test_epoch_and_max_bytes_changes_are_sent_and_a_change_undone_is_not():
    session = opened()
    session.set_partition(("t", 0), 0, 6, 1024)
    session.set_partition(("t", 1), 0, 5, 2048)
    session.set_partition(("t", 2), 3, 5, 1024)
    session.set_partition(("t", 2), 0, 5, 1024)
    assert session.build().partitions == {("t", 0): (0, 6, 1024), ("t", 1): (0, 5, 2048)}


def test_removed_partitions_are_forgotten_once_and_added_ones_named():
    session = opened()
    session.remove_partition(("t", 1))
    session.remove_partition(("t", 9))  # never there
    session.set_partition(("u", 0), 8, 1, 1024)
    fetch = session.build()
    assert fetch.partitions == {("u", 0): (8, 1, 1024)} and fetch.forgotten == [("t", 1)]
    assert session.handle_response(answer(7))
    assert session.build().forgotten == []


def test_a_partition_removed_and_added_back_before_the_next_fetch_is_named_again():
    # a follower's only partition answered an error, backed off with no fetch between, came back:
    # the leader may never have served it in the session, so it is named once more, even unchanged
    session = opened()
    session.remove_partition(("t", 0))
    session.set_partition(("t", 0), 0, 5, 1024)
    session.remove_partition(("t", 1))
    session.set_partition(("t", 1), 2, 5, 1024)
    fetch = session.build()
    assert fetch.partitions == {("t", 0): (0, 5, 1024), ("t", 1): (2, 5, 1024)} and fetch.forgotten == []
    assert session.handle_response(answer(7))
    assert session.build().partitions == {}  # named once


def test_build_from_forgets_what_is_missing_and_sends_what_changed():
    session = FetchSessionHandler()
    first = session.build_from({("t", 0): (0, 5, 1024), ("t", 1): (0, 5, 1024)})
    assert first.full and len(first.partitions) == 2
    assert session.handle_response(answer(3))
    fetch = session.build_from({("t", 0): (0, 5, 1024), ("t", 2): (9, 5, 1024)})
    assert fetch.partitions == {("t", 2): (9, 5, 1024)} and fetch.forgotten == [("t", 1)]
    assert session.partitions == {("t", 0): (0, 5, 1024), ("t", 2): (9, 5, 1024)}


def test_a_session_error_makes_the_next_fetch_full_with_every_partition():
    session = opened()
    session.set_partition(("t", 0), 4, 5, 1024)
    session.build()
    assert not session.handle_response(answer(0, Errors.INVALID_FETCH_SESSION_EPOCH))
    fetch = session.build()
    assert (fetch.session_id, fetch.session_epoch) == (7, 0)  # close session 7, open another
    assert fetch.partitions == {("t", 0): (4, 5, 1024), ("t", 1): (0, 5, 1024), ("t", 2): (0, 5, 1024)}
    assert session.handle_response(answer(8))
    assert (session.build().session_id, session.build().session_epoch) == (8, 1)


def test_an_unknown_session_is_not_named_again():
    session = opened()
    session.build()
    assert not session.handle_response(answer(0, Errors.FETCH_SESSION_ID_NOT_FOUND))
    fetch = session.build()
    assert (fetch.session_id, fetch.session_epoch, len(fetch.partitions)) == (0, 0, 3)


def test_a_change_whose_answer_was_lost_is_sent_again():
    session = opened()
    session.set_partition(("t", 1), 6, 5, 1024)
    session.remove_partition(("t", 2))
    assert session.build().partitions == {("t", 1): (6, 5, 1024)}
    session.handle_error()  # the call failed: did the leader apply it?
    fetch = session.build()
    assert (fetch.session_id, fetch.session_epoch) == (7, 0)
    assert fetch.partitions == {("t", 0): (0, 5, 1024), ("t", 1): (6, 5, 1024)} and fetch.forgotten == []
    session.handle_response(answer(0, Errors.NETWORK_EXCEPTION))  # an error answer is the same doubt
    assert session.build().full


def test_changes_made_while_a_request_is_in_flight_go_in_the_next_one():
    session = opened()
    in_flight = session.build()
    session.set_partition(("t", 0), 9, 5, 1024)
    assert in_flight.partitions == {}
    assert session.handle_response(answer(7))
    assert session.build().partitions == {("t", 0): (9, 5, 1024)}


def test_the_epoch_wraps_to_one():
    session = opened()
    session._epoch = MAX_EPOCH - 1
    assert session.build().session_epoch == MAX_EPOCH - 1
    session.handle_response(answer(7))
    assert session.build().session_epoch == MAX_EPOCH
    session.handle_response(answer(7))
    assert session.build().session_epoch == 1


def test_a_leader_without_room_for_a_session_gets_full_fetches_asking_for_one():
    session = opened(session_id=0)
    for _ in range(2):
        session.set_partition(("t", 0), 3, 5, 1024)
        fetch = session.build()
        assert (fetch.session_id, fetch.session_epoch, len(fetch.partitions)) == (0, 0, 3)
        assert session.handle_response(answer(0))
    session.build()
    assert session.handle_response(answer(4))  # room at last
    assert (session.build().session_id, session.session_partitions[("t", 0)]) == (4, (3, 5, 1024))


def test_close_fetches_once_outside_the_session_then_asks_for_a_new_one():
    session = opened()
    session.close()
    fetch = session.build()
    assert (fetch.session_id, fetch.session_epoch, len(fetch.partitions)) == (7, -1, 3)
    assert session.handle_response(answer(0))
    assert (session.build().session_id, session.build().session_epoch) == (0, 0)


def test_the_request_message_carries_the_session_and_forgotten_partitions():
    fetch = SessionFetch(7, 3, {("a", 1): (10, 2, 100), ("b", 0): (0, -1, 100), ("a", 4): (1, 2, 100)},
                         [("a", 2), ("c", 0), ("a", 3)])
    request = session_fetch_request(fetch, replica_id=2, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20)
    assert (request.replica_id, request.session_id, request.session_epoch) == (2, 7, 3)
    assert {(t.topic, p.partition): (p.fetch_offset, p.current_leader_epoch, p.partition_max_bytes)
            for t in request.topics for p in t.partitions} == fetch.partitions
    assert [(t.topic, list(t.partitions)) for t in request.forgotten_topics_data] == [("a", [2, 3]), ("c", [0])]
