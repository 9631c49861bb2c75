"""One partition hosted by this broker: its log, its leadership as the controller last set it, and
on the leader the state of every follower (log end offset, last time it was caught up), from which
the high watermark and the ISR follow.

High watermark (leader): the smallest log end offset over the ISR, the leader's own included; it
never moves backwards. A follower counts as caught up at time T when a fetch at T asked for the
leader's log end offset as of T, or as of its previous fetch (Kafka's rule); one whose fetch
session holds the partition at the log end was caught up at the session's last fetch. A follower
that has not been caught up for `replica.lag.time.max.ms` leaves the ISR; one whose log end offset
reached the high watermark and the start of the current leader epoch rejoins it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from services.broker.log.info import UNKNOWN_OFFSET
from services.common.errors import Errors, KafkaError
from services.common.logging_setup import LEADERSHIP_EVENT
from services.common.shared_types import PartitionStateInfo
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


@dataclass
class FollowerState:
    """What the leader knows of one follower."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_leader_end_offset: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0
    extra: dict = field(default_factory=dict)


class Partition:
    """Leadership, ISR and high watermark of one partition around its `Log`."""

    def __init__(self, topic: str, partition: int, local_broker_id: int, log) -> None:
        self.topic = topic
        self.partition = partition
        self.key = TopicPartition(topic, partition)
        self.local_broker_id = local_broker_id
        self.log = log
        self.lock = threading.RLock()
        self.leader_id = -1
        self.leader_epoch = -1
        self.leader_epoch_start_offset = 0
        self.controller_epoch = -1
        self.zk_version = 0
        self.isr: tuple[int, ...] = ()
        self.replicas: tuple[int, ...] = ()
        self.followers: dict[int, FollowerState] = {}
        self.isr_update_in_flight = False

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    def apply_leader_and_isr(self, state: PartitionStateInfo, now_ms: int) -> bool:
        """Takes the controller's state if its leader epoch is newer; returns whether it did."""
        with self.lock:
            if state.leader_epoch <= self.leader_epoch and not state.is_new:
                return False
            was_leader, was_epoch = self.is_leader, self.leader_epoch
            self.leader_id = state.leader
            self.leader_epoch = state.leader_epoch
            self.controller_epoch = state.controller_epoch
            self.zk_version = state.zk_version
            self.isr = tuple(state.isr)
            self.replicas = tuple(state.replicas)
            self.isr_update_in_flight = False
            if self.is_leader:
                self.leader_epoch_start_offset = self.log.log_end_offset
                # the epoch starts here even before its first append, so OffsetForLeaderEpoch
                # answers for it (a consumer validating a position on an empty log needs that)
                self.log.leader_epoch_cache.assign(self.leader_epoch, self.leader_epoch_start_offset)
                if not was_leader:
                    # a new leader knows nothing of its followers yet: ISR members count as caught
                    # up now, so they are not dropped before their first fetch
                    self.followers = {r: FollowerState(last_caught_up_ms=now_ms if r in self.isr else 0)
                                      for r in self.replicas if r != self.local_broker_id}
                else:
                    self.followers = {r: self.followers.get(r) or FollowerState(last_caught_up_ms=now_ms)
                                      for r in self.replicas if r != self.local_broker_id}
                self.maybe_increment_high_watermark()
            else:
                self.followers = {}
            self._log_leadership(was_leader, was_epoch)
            return True

    def stop_leading(self) -> None:
        """Forgets the leader (StopReplica, an offline log dir): this broker no longer leads."""
        with self.lock:
            was_leader = self.is_leader
            self.leader_id = -1
            self._log_leadership(was_leader, self.leader_epoch)

    def _log_leadership(self, was_leader: bool, was_epoch: int) -> None:
        """One line when this broker starts leading (at a new leader epoch) or stops leading."""
        if self.is_leader and (not was_leader or was_epoch != self.leader_epoch):
            change, epoch = "leads", self.leader_epoch
        elif was_leader and not self.is_leader:
            change, epoch = "stopped leading", was_epoch
        else:
            return
        logger.info("%s-%d: %s at leader epoch %d", self.topic, self.partition, change, epoch,
                    extra={"event": LEADERSHIP_EVENT, "broker": self.local_broker_id, "topic": self.topic,
                           "partition": self.partition, "leader": self.is_leader, "leader_epoch": epoch})

    def check_leader_epoch(self, requested_epoch: int) -> None:
        """Kafka's fencing of a client's view of the leader epoch (-1 skips the check)."""
        if requested_epoch < 0:
            return
        if requested_epoch < self.leader_epoch:
            raise KafkaError(f"leader epoch {requested_epoch} is older than {self.leader_epoch}",
                             error=Errors.FENCED_LEADER_EPOCH)
        if requested_epoch > self.leader_epoch:
            raise KafkaError(f"leader epoch {requested_epoch} is newer than {self.leader_epoch}",
                             error=Errors.UNKNOWN_LEADER_EPOCH)

    def require_leader(self, requested_epoch: int = -1) -> None:
        if not self.is_leader:
            raise KafkaError(f"broker {self.local_broker_id} is not the leader of "
                             f"{self.topic}-{self.partition}", error=Errors.NOT_LEADER_OR_FOLLOWER)
        self.check_leader_epoch(requested_epoch)

    # ------------------------------------------------------------------ leader: followers

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """Records a follower's fetch; returns whether the high watermark moved (only a follower
        whose log end offset moved can move it: the fetches of idle partitions skip the check)."""
        follower = self.followers.get(replica_id)
        if follower is not None and fetch_offset == follower.log_end_offset == self.log.log_end_offset:
            # caught up and still where it was (an idle partition, thousands per fetch): only the
            # times move, and each is one store, as good without the lock as with it
            follower.last_caught_up_ms = follower.last_fetch_ms = now_ms
            follower.last_fetch_leader_end_offset = fetch_offset
            return False
        with self.lock:
            follower = self.followers.get(replica_id)
            if follower is None:
                return False
            leader_end = self.log.log_end_offset
            if fetch_offset >= leader_end:
                follower.last_caught_up_ms = now_ms
            elif fetch_offset >= follower.last_fetch_leader_end_offset >= 0:
                follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
            moved = fetch_offset != follower.log_end_offset
            follower.log_end_offset = fetch_offset
            follower.last_fetch_leader_end_offset = leader_end
            follower.last_fetch_ms = now_ms
            return moved and self.maybe_increment_high_watermark()

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min log end offset over the ISR; it only moves forward. Returns whether it moved."""
        with self.lock:
            candidate = self.log.log_end_offset
            for replica in self.isr:
                if replica != self.local_broker_id:
                    follower = self.followers.get(replica)
                    offset = follower.log_end_offset if follower is not None else UNKNOWN_OFFSET
                    if offset < candidate:
                        candidate = offset
            if candidate < 0:
                return False
            return self.log.maybe_increment_high_watermark(candidate) is not None

    def isr_to_expand(self, alive: frozenset[int] | None = None) -> tuple[int, ...] | None:
        """The ISR with every caught-up follower added, or None when nobody qualifies. With
        `alive` (the live brokers), only followers on live brokers join, as Kafka's ZooKeeper-mode
        leader checks before it expands the ISR."""
        with self.lock:
            joining = [r for r, f in self.followers.items()
                       if r not in self.isr and f.log_end_offset >= self.high_watermark
                       and f.log_end_offset >= self.leader_epoch_start_offset
                       and (alive is None or r in alive)]
            return tuple(self.isr) + tuple(sorted(joining)) if joining else None

    def isr_to_shrink(self, now_ms: int, lag_max_ms: int,
                      session_fetch_ms: Callable[[int, TopicPartition], int] | None = None
                      ) -> tuple[int, ...] | None:
        """The ISR without followers not caught up for `lag_max_ms`, or None when all are.
        `session_fetch_ms(replica, key)`: when the replica's fetch session last fetched this
        partition without naming it, i.e. at the offset it last named; a follower whose offset is
        the log end was caught up then."""
        return self.isr_shrink_check(now_ms, lag_max_ms, session_fetch_ms)[0]

    def isr_shrink_check(self, now_ms: int, lag_max_ms: int,
                         session_fetch_ms: Callable[[int, TopicPartition], int] | None = None
                         ) -> tuple[tuple[int, ...] | None, bool]:
        """`isr_to_shrink`, and whether the partition is *settled*: every replica is in the ISR
        and every follower is at the log end and held in a fetch session that fetched within
        `lag_max_ms`. A settled partition cannot shrink until its log end, ISR, followers or
        their sessions change, or one of those sessions stops fetching for `lag_max_ms`."""
        with self.lock:
            lagging = set()
            settled = all(r in self.isr for r in self.replicas)
            end = self.log.log_end_offset
            for r in self.isr:
                follower = self.followers.get(r) if r != self.local_broker_id else None
                if follower is None:
                    continue
                caught_up_ms = follower.last_caught_up_ms
                session_ms = 0
                if session_fetch_ms is not None and follower.log_end_offset >= end:
                    session_ms = session_fetch_ms(r, self.key)
                    caught_up_ms = max(caught_up_ms, session_ms)
                if now_ms - caught_up_ms > lag_max_ms:
                    lagging.add(r)
                if not session_ms or now_ms - session_ms > lag_max_ms:
                    settled = False
            if not lagging:
                return None, settled
            return tuple(r for r in self.isr if r not in lagging), False

    def apply_isr(self, isr: tuple[int, ...], zk_version: int) -> None:
        """The leader's own ISR change, once written to ZooKeeper."""
        with self.lock:
            self.isr = tuple(isr)
            self.zk_version = zk_version
            self.maybe_increment_high_watermark()

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, isr={list(self.isr)}, hw={self.high_watermark})")
