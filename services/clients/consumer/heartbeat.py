"""Group membership state shared by the consumer's thread and the heartbeat thread, the heartbeat
timers, and the heartbeat thread itself (Kafka's AbstractCoordinator state, Heartbeat and
HeartbeatThread).

`GroupMembership` is everything both threads read and change, under its own lock (never the
consumer's single-thread guard): the coordinator's endpoint, the `Generation` (generation id,
member id, protocol name), the `MemberState`, whether a rejoin is needed and why, and a fatal
error for the consumer's thread to raise. Member states:

    UNJOINED              not in the group (initially, after leaving, after being dropped)
    PREPARING_REBALANCE   JoinGroup sent, waiting for the rebalance
    COMPLETING_REBALANCE  JoinGroup answered, SyncGroup pending (heartbeats go out)
    STABLE                assignment received

`Heartbeat` holds three timers in monotonic milliseconds: the next heartbeat (every
heartbeat.interval.ms, retry.backoff.ms after a failed one), the session (session.timeout.ms
since the last answered heartbeat) and the poll interval (max.poll.interval.ms since the
application last called poll).

The heartbeat thread starts once a coordinator is found and runs only while enabled (from the
JoinGroup answer until the member leaves the joined states). Each round (`run_once`): without a
coordinator it looks one up; when the session expired it forgets the coordinator; when the
application has not polled within max.poll.interval.ms it leaves the group (a static member only
resets its generation: it never sends LeaveGroup), so the next poll rejoins; otherwise it sends a
Heartbeat when one is due. Answers: REBALANCE_IN_PROGRESS asks a STABLE member to rejoin;
UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION and FENCED_INSTANCE_ID reset the generation (member id
"") and ask for a rejoin, in which the owned partitions count as lost, and FENCED_INSTANCE_ID is
also raised by the next poll; NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and failed calls forget
the coordinator.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from typing import NamedTuple

from services.clients.cluster import Node
from services.clients.consumer.errors import FencedInstanceIdError
from services.clients.transport import COORDINATOR, ChannelPool, PendingCall
from services.common.clock import Clock
from services.common.errors import Errors, KafkaError, error_for_code
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb

logger = logging.getLogger(__name__)

COORDINATOR_GONE = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE, Errors.NETWORK_EXCEPTION,
                              Errors.REQUEST_TIMED_OUT})
GENERATION_GONE = frozenset({Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION, Errors.FENCED_INSTANCE_ID})
POLL_TIMEOUT_REASON = ("consumer poll timeout has expired: more than max.poll.interval.ms passed between two "
                       "calls to poll(), usually because processing the records took too long; raise "
                       "max.poll.interval.ms or lower max.poll.records")


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    PREPARING_REBALANCE = "preparing_rebalance"
    COMPLETING_REBALANCE = "completing_rebalance"
    STABLE = "stable"

    @property
    def has_not_joined_group(self) -> bool:
        return self in (MemberState.UNJOINED, MemberState.PREPARING_REBALANCE)


class Generation(NamedTuple):
    generation_id: int = -1
    member_id: str = ""
    protocol_name: str | None = None

    @property
    def has_member_id(self) -> bool:
        return self.member_id != ""

    @property
    def is_reset(self) -> bool:
        return self.generation_id == NO_GENERATION.generation_id and self.protocol_name is None


NO_GENERATION = Generation()


class Heartbeat:
    """The heartbeat, session and poll-interval timers; see the module docstring."""

    def __init__(self, session_timeout_ms: int, heartbeat_interval_ms: int, max_poll_interval_ms: int,
                 retry_backoff_ms: int, now_ms: int):
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.in_flight = False
        self.last_poll_ms = now_ms
        self._next_heartbeat_ms = now_ms
        self._session_deadline_ms = now_ms + session_timeout_ms
        self._poll_deadline_ms = now_ms + max_poll_interval_ms

    def poll(self, now_ms: int) -> None:
        """The application polled: the poll interval starts again."""
        self.last_poll_ms = now_ms
        self._poll_deadline_ms = now_ms + self.max_poll_interval_ms

    def sent_heartbeat(self, now_ms: int) -> None:
        self.in_flight = True
        self._next_heartbeat_ms = now_ms + self.heartbeat_interval_ms

    def fail_heartbeat(self, now_ms: int) -> None:
        self.in_flight = False
        self._next_heartbeat_ms = now_ms + self.retry_backoff_ms

    def receive_heartbeat(self, now_ms: int) -> None:
        self.in_flight = False
        self._session_deadline_ms = now_ms + self.session_timeout_ms

    def should_heartbeat(self, now_ms: int) -> bool:
        return now_ms >= self._next_heartbeat_ms

    def time_to_next_heartbeat(self, now_ms: int) -> int:
        return max(0, self._next_heartbeat_ms - now_ms)

    def session_timeout_expired(self, now_ms: int) -> bool:
        return now_ms >= self._session_deadline_ms

    def poll_timeout_expired(self, now_ms: int) -> bool:
        return now_ms >= self._poll_deadline_ms

    def reset_session_timeout(self, now_ms: int) -> None:
        self._session_deadline_ms = now_ms + self.session_timeout_ms

    def reset_timeouts(self, now_ms: int) -> None:
        self.in_flight = False
        self.reset_session_timeout(now_ms)
        self.poll(now_ms)
        self._next_heartbeat_ms = now_ms + self.heartbeat_interval_ms


class GroupMembership:
    """State shared by the consumer's thread and the heartbeat thread; every method takes `lock`."""

    def __init__(self, heartbeat: Heartbeat, clock: Clock):
        self.lock = threading.Condition(threading.RLock())
        self.heartbeat = heartbeat
        self.clock = clock
        self.coordinator: Node | None = None
        self.generation = NO_GENERATION
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self.rejoin_reason = "the consumer has not joined the group yet"
        self.fatal_error: KafkaError | None = None
        self.closing = False
        self.poked = False

    def poke(self) -> None:
        """Wakes the heartbeat thread to look at the state again."""
        with self.lock:
            self.poked = True
            self.lock.notify_all()

    def mark_coordinator_unknown(self, reason: str) -> None:
        with self.lock:
            if self.coordinator is not None:
                logger.info("Group coordinator %s is unavailable or invalid (%s); it will be looked up again",
                            self.coordinator, reason)
                self.coordinator = None
                self.heartbeat.in_flight = False
            self.poke()

    def set_coordinator(self, node: Node) -> None:
        with self.lock:
            if self.coordinator != node:
                logger.info("Discovered group coordinator %s", node)
            self.coordinator = node
            self.heartbeat.reset_session_timeout(self.clock.monotonic_ms())
            self.poke()

    def request_rejoin(self, reason: str) -> None:
        with self.lock:
            if not self.rejoin_needed:
                logger.info("Request joining group due to: %s", reason)
            self.rejoin_needed = True
            self.rejoin_reason = reason

    def reset_state_and_generation(self, reason: str) -> None:
        with self.lock:
            logger.info("Resetting generation and member id due to: %s", reason)
            self.state = MemberState.UNJOINED
            self.generation = NO_GENERATION
            self.poke()

    def reset_state_and_rejoin(self, reason: str) -> None:
        with self.lock:
            self.reset_state_and_generation(reason)
            self.request_rejoin(reason)

    def snapshot(self) -> tuple[Generation, MemberState]:
        with self.lock:
            return self.generation, self.state

    def generation_if_stable(self) -> Generation | None:
        with self.lock:
            return self.generation if self.state is MemberState.STABLE else None

    def rebalance_in_progress(self) -> bool:
        with self.lock:
            return self.state in (MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE)

    def take_fatal_error(self) -> KafkaError | None:
        with self.lock:
            error, self.fatal_error = self.fatal_error, None
            return error


class HeartbeatThread(threading.Thread):
    """Sends heartbeats while enabled; see the module docstring. `lookup_coordinator()` (blocking)
    and `leave_group(reason)` are the coordinator's thread-safe operations."""

    def __init__(self, membership: GroupMembership, pool: ChannelPool, *, group_id: str,
                 group_instance_id: str | None, request_timeout_ms: int, retry_backoff_ms: int,
                 lookup_coordinator: Callable[[], None], leave_group: Callable[[str], None]):
        super().__init__(name=f"odradek-coordinator-heartbeat-thread | {group_id}", daemon=True)
        self._membership = membership
        self._pool = pool
        self._group_id = group_id
        self._group_instance_id = group_instance_id
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._lookup_coordinator = lookup_coordinator
        self._leave_group = leave_group
        self._enabled = False
        self._in_flight: PendingCall | None = None

    @property
    def enabled(self) -> bool:
        with self._membership.lock:
            return self._enabled

    def enable(self) -> None:
        membership = self._membership
        with membership.lock:
            logger.debug("Enabling heartbeat thread")
            self._enabled = True
            membership.heartbeat.reset_timeouts(membership.clock.monotonic_ms())
            membership.poke()

    def disable(self) -> None:
        with self._membership.lock:
            self._enabled = False

    def close(self, timeout_s: float | None = None) -> None:
        membership = self._membership
        with membership.lock:
            membership.closing = True
            membership.poke()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout_s)

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        membership = self._membership
        try:
            while True:
                wait_ms = self.run_once()
                with membership.lock:
                    if membership.closing:
                        return
                    timeout_s = None if wait_ms is None else wait_ms / 1000
                    membership.lock.wait_for(lambda: membership.poked or membership.closing, timeout_s)
                    membership.poked = False
        except Exception as error:  # noqa: BLE001 - the consumer's thread raises it
            logger.exception("Heartbeat thread for group %s failed", self._group_id)
            with membership.lock:
                membership.fatal_error = KafkaError(f"the heartbeat thread failed: {error!r}")
        finally:
            logger.debug("Heartbeat thread has closed")

    def run_once(self) -> float | None:
        """One round of the loop; returns how long to wait (ms) before the next, None for until poked."""
        membership = self._membership
        with membership.lock:
            if membership.closing or not self._enabled:
                return None
            if membership.state.has_not_joined_group or membership.fatal_error is not None:
                self._enabled = False
                return None
            now_ms = membership.clock.monotonic_ms()
            heartbeat = membership.heartbeat
            if membership.coordinator is None:
                action = self._lookup_coordinator
            elif heartbeat.session_timeout_expired(now_ms):
                membership.mark_coordinator_unknown("session timed out without receiving a heartbeat response")
                return 0
            elif heartbeat.poll_timeout_expired(now_ms):
                logger.warning("%s", POLL_TIMEOUT_REASON)
                action = lambda: self._leave_group(POLL_TIMEOUT_REASON)  # noqa: E731
            elif heartbeat.in_flight or not heartbeat.should_heartbeat(now_ms):
                return min(self._retry_backoff_ms, max(1, heartbeat.time_to_next_heartbeat(now_ms)))
            else:
                heartbeat.sent_heartbeat(now_ms)
                self._send_heartbeat(membership.coordinator, membership.generation)
                return min(self._retry_backoff_ms, heartbeat.heartbeat_interval_ms)
        action()  # blocking work happens outside the lock
        return self._retry_backoff_ms

    # ------------------------------------------------------------------ heartbeats

    def _send_heartbeat(self, coordinator: Node, generation: Generation) -> None:
        request = pb.HeartbeatRequest(group_id=self._group_id, generation_id=generation.generation_id,
                                      member_id=generation.member_id, group_instance_id=self._group_instance_id)
        logger.debug("Sending Heartbeat request with generation %d and member id %s to coordinator %s",
                     generation.generation_id, generation.member_id, coordinator)
        call = self._pool.send(coordinator.address, COORDINATOR, "Heartbeat", request, self._request_timeout_ms)
        self._in_flight = call
        call.add_done_callback(lambda done: self._on_heartbeat_done(done, generation))

    def _on_heartbeat_done(self, call: PendingCall, sent: Generation) -> None:
        """Applies a heartbeat answer (on a gRPC thread, under the membership lock)."""
        membership = self._membership
        with membership.lock:
            if call is not self._in_flight:
                return  # an answer nobody waits for any more
            self._in_flight = None
            response, failure = call.outcome()
            self._apply_answer(response.error_code if failure is None else failure.code, sent)
            membership.poke()

    def _apply_answer(self, error: int, sent: Generation) -> None:
        membership = self._membership
        heartbeat = membership.heartbeat
        now_ms = membership.clock.monotonic_ms()
        error_name = error_for_code(error).name
        if error == Errors.NONE:
            logger.debug("Received successful Heartbeat response")
            heartbeat.receive_heartbeat(now_ms)
        elif error == Errors.REBALANCE_IN_PROGRESS:
            if membership.state is MemberState.STABLE:
                membership.request_rejoin("group is already rebalancing")
            heartbeat.receive_heartbeat(now_ms)  # heartbeats go on until the member rejoins
        elif error in GENERATION_GONE:
            if membership.generation != sent:
                heartbeat.receive_heartbeat(now_ms)  # about an older generation: ignored
                return
            membership.reset_state_and_rejoin(f"Heartbeat answered {error_name}")
            heartbeat.fail_heartbeat(now_ms)
            if error == Errors.FENCED_INSTANCE_ID:
                logger.error("Static member %s was fenced by another member with the same group.instance.id",
                             self._group_instance_id)
                membership.fatal_error = FencedInstanceIdError(
                    f"group.instance.id {self._group_instance_id} was fenced by another member")
        elif error in COORDINATOR_GONE:
            membership.mark_coordinator_unknown(f"Heartbeat answered {error_name}")
            heartbeat.fail_heartbeat(now_ms)
        else:
            logger.warning("Heartbeat failed with %s", error_name)
            heartbeat.fail_heartbeat(now_ms)

