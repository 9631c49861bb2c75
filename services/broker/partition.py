"""One partition hosted by this broker: its log, its leadership as the controller last set it, and
the high watermark it serves consumers up to.

The leader tracks each in-sync replica's log end offset; the high watermark is the smallest of
them (the leader's own included) and never moves backwards. A partition whose ISR is only its
leader therefore exposes everything it appended.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from services.common.errors import KafkaError


@dataclass(frozen=True)
class LeaderAndIsrState:
    """The controller's decision for one partition, as LeaderAndIsr carries it."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    is_new: bool = False


class Partition:
    """Leadership, ISR and high watermark of one partition around its `Log`."""

    def __init__(self, topic: str, partition: int, local_broker_id: int, log) -> None:
        self.topic = topic
        self.partition = partition
        self.local_broker_id = local_broker_id
        self.log = log
        self.lock = threading.RLock()
        self.leader_id = -1
        self.leader_epoch = -1
        self.controller_epoch = -1
        self.zk_version = 0
        self.isr: tuple[int, ...] = ()
        self.replicas: tuple[int, ...] = ()
        self.follower_end_offsets: dict[int, int] = {}

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    def apply_leader_and_isr(self, state: LeaderAndIsrState) -> bool:
        """Takes the controller's state if its leader epoch is newer; returns whether it did."""
        with self.lock:
            if state.leader_epoch <= self.leader_epoch and not state.is_new:
                return False
            self.leader_id = state.leader
            self.leader_epoch = state.leader_epoch
            self.controller_epoch = state.controller_epoch
            self.zk_version = state.zk_version
            self.isr = tuple(state.isr)
            self.replicas = tuple(state.replicas)
            self.follower_end_offsets = {r: self.follower_end_offsets.get(r, 0)
                                         for r in self.replicas if r != self.local_broker_id}
            if self.is_leader:
                self.maybe_increment_high_watermark()
            return True

    def check_leader_epoch(self, requested_epoch: int) -> None:
        """Kafka's fencing of a client's view of the leader epoch (-1 skips the check)."""
        if requested_epoch < 0:
            return
        if requested_epoch < self.leader_epoch:
            raise KafkaError(f"leader epoch {requested_epoch} is older than {self.leader_epoch}",
                             error_name="FENCED_LEADER_EPOCH")
        if requested_epoch > self.leader_epoch:
            raise KafkaError(f"leader epoch {requested_epoch} is newer than {self.leader_epoch}",
                             error_name="UNKNOWN_LEADER_EPOCH")

    def require_leader(self, requested_epoch: int = -1) -> None:
        if not self.is_leader:
            raise KafkaError(f"broker {self.local_broker_id} is not the leader of "
                             f"{self.topic}-{self.partition}", error_name="NOT_LEADER_OR_FOLLOWER")
        self.check_leader_epoch(requested_epoch)

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min log end offset over the ISR; it only moves forward. Returns whether it moved."""
        with self.lock:
            end_offsets = [self.log.log_end_offset]
            end_offsets += [self.follower_end_offsets.get(r, 0) for r in self.isr
                            if r != self.local_broker_id]
            return self.log.maybe_increment_high_watermark(min(end_offsets)) is not None

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, isr={list(self.isr)}, hw={self.high_watermark})")
