"""The fetching side of an incremental fetch session (KIP-227): what one fetcher (a follower, a
consumer) has told one leader broker, and what its next FetchRequest must say.

A session opens with a full fetch naming every partition (epoch 0); the leader's answer names the
session, and each later fetch (epoch 1, 2, ... wrapping from 2**31-1 to 1) names only the
partitions added or whose fetch offset, leader epoch or partition_max_bytes changed since the
last request, and the partitions to forget; the leader fetches the others from where its session
has them. An idle partition costs nothing per fetch: `set_partition` and `remove_partition` note
the partitions that changed and `build()` visits only those. A partition removed and set again
between two requests (a follower's only partition backing off after an error) is named in the next
one even if unchanged: the leader may not have served it in the session yet.

Whenever what the leader holds is in doubt (an error answer, a failed call whose request may or
may not have been applied) the next fetch is full: with the session id and epoch 0 (close it and
open another), or with id 0 when the leader did not know the session. A leader that answers a
full fetch with session id 0 had no room for a session: every fetch is then full and asks again.

Plain Python, not thread-safe (its owner serialises calls), and at most one request per handler
in flight: `build()`, then `handle_response()` or `handle_error()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, Protocol

from services.common.errors import Errors

# tp -> (fetch_offset, current_leader_epoch, partition_max_bytes): what the leader is asked for
PartitionFetch = tuple[int, int, int]

NO_SESSION_ID = 0
FULL_EPOCH = 0  # opens a session (closing the one named, if any)
CLOSE_EPOCH = -1  # closes the session named and fetches outside any session
MAX_EPOCH = 2**31 - 1


class SessionFetch(NamedTuple):
    """What to send: the session fields, the partitions to name and those to forget. For a full
    fetch `partitions` is every partition, left as it is until the next `build()`."""

    session_id: int
    session_epoch: int
    partitions: Mapping[tuple[str, int], PartitionFetch]
    forgotten: list[tuple[str, int]]

    @property
    def full(self) -> bool:
        return self.session_epoch <= FULL_EPOCH


class FetchAnswerHeader(Protocol):
    """The fields of a FetchResponse the session needs (a `FetchResponse` message has them)."""

    error_code: int
    session_id: int


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


class FetchSessionHandler:
    """One fetcher's session with one leader; see the module docstring."""

    def __init__(self) -> None:
        self.session_id = NO_SESSION_ID
        self._epoch = FULL_EPOCH  # the epoch of the next request
        self._sent_epoch = FULL_EPOCH  # the epoch of the request awaiting its answer
        self._wanted: dict[tuple[str, int], PartitionFetch] = {}
        self._sent: dict[tuple[str, int], PartitionFetch] = {}  # the leader's session as the last request left it
        self._changed: dict[tuple[str, int], None] = {}  # partitions whose wanted may differ from sent
        # partitions removed since the last request: one set again before it is named in it even
        # when unchanged, so the leader fetches it once more (it may not have served it yet: an
        # error answered, then its backoff with no request between)
        self._left: set[tuple[str, int]] = set()

    @property
    def has_partitions(self) -> bool:
        return bool(self._wanted)

    @property
    def partitions(self) -> Mapping[tuple[str, int], PartitionFetch]:
        """The partitions to fetch, as set."""
        return self._wanted

    @property
    def session_partitions(self) -> Mapping[tuple[str, int], PartitionFetch]:
        """The partitions the last request left in the leader's session, each with what it is
        fetched from: the fetch a partition of the answer to that request was made from."""
        return self._sent

    # ------------------------------------------------------------------ what to fetch

    def set_partition(self, tp: tuple[str, int], fetch_offset: int, leader_epoch: int, max_bytes: int) -> None:
        """Adds a partition or changes what it is fetched from; nothing when that is unchanged."""
        value = (fetch_offset, leader_epoch, max_bytes)
        if self._wanted.get(tp) != value:
            self._wanted[tp] = value
            self._changed[tp] = None

    def remove_partition(self, tp: tuple[str, int]) -> None:
        if self._wanted.pop(tp, None) is not None:
            self._changed[tp] = None
            self._left.add(tp)

    def build_from(self, wanted: Mapping[tuple[str, int], PartitionFetch]) -> SessionFetch:
        """`build()` for a fetcher that states every partition it wants each time: the partitions
        missing from `wanted` leave the session."""
        for tp in [tp for tp in self._wanted if tp not in wanted]:
            self.remove_partition(tp)
        for tp, value in wanted.items():
            if self._wanted.get(tp) != value:
                self._wanted[tp] = value
                self._changed[tp] = None
        return self.build()

    def build(self) -> SessionFetch:
        """The next request: full, or the partitions changed since the last request."""
        self._sent_epoch = epoch = self._epoch
        changed, self._changed = self._changed, {}
        left, self._left = self._left, set()
        if epoch <= FULL_EPOCH:
            self._sent = dict(self._wanted)
            return SessionFetch(self.session_id, epoch, self._sent, [])
        wanted, sent = self._wanted, self._sent
        named: dict[tuple[str, int], PartitionFetch] = {}
        forgotten = []
        for tp in changed:
            value = wanted.get(tp)
            if value is None:
                if sent.pop(tp, None) is not None:
                    forgotten.append(tp)
            elif sent.get(tp) != value or tp in left:
                sent[tp] = named[tp] = value
        return SessionFetch(self.session_id, epoch, named, forgotten)

    # ------------------------------------------------------------------ answers

    def handle_response(self, response: FetchAnswerHeader) -> bool:
        """Moves the session on after an answer; False when the answer is an error (then the next
        fetch is full)."""
        error_code = response.error_code
        if error_code == Errors.FETCH_SESSION_ID_NOT_FOUND:
            self.session_id, self._epoch = NO_SESSION_ID, FULL_EPOCH
            return False
        if error_code != Errors.NONE:
            self._epoch = FULL_EPOCH
            return False
        if response.session_id == NO_SESSION_ID:  # no room for a session, or it was closed
            self.session_id, self._epoch = NO_SESSION_ID, FULL_EPOCH
        elif self._sent_epoch <= FULL_EPOCH:
            self.session_id, self._epoch = response.session_id, 1
        else:
            self._epoch = next_epoch(self._sent_epoch)
        return True

    def handle_error(self) -> None:
        """The request failed without an answer: the leader may or may not have applied it."""
        self._epoch = FULL_EPOCH

    def close(self) -> None:
        """The next request closes the session and fetches outside any; after it the handler asks
        for a new session again."""
        if self.session_id != NO_SESSION_ID:
            self._epoch = CLOSE_EPOCH
