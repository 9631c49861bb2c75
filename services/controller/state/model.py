"""The controller's value types: replicas and leader/ISR.

All are immutable. `LeaderAndIsr` is the content of a partition state znode
(`/brokers/topics/<t>/partitions/<p>/state`) plus that znode's version; every change the
controller makes to a leader or an ISR goes through `new_leader_and_isr`, which bumps the leader
epoch, as Kafka's controller does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from services.common.shared_types import NO_LEADER
from services.common.topic_partition import TopicPartition

NO_EPOCH = -1
EPOCH_DURING_DELETE = -2
INITIAL_LEADER_EPOCH = 0
INITIAL_ZK_VERSION = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0


@dataclass(frozen=True, slots=True, order=True)
class PartitionAndReplica:
    """One replica (a broker id) of one partition."""

    partition: TopicPartition
    replica: int

    @property
    def topic(self) -> str:
        return self.partition.topic

    def __str__(self) -> str:
        return f"[{self.partition},{self.replica}]"


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """Leader, leader epoch and ISR of a partition; `zk_version` is its state znode's version."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int = INITIAL_ZK_VERSION

    @classmethod
    def initial(cls, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        """A new partition's first state: leader epoch 0, znode version 0."""
        return cls(leader, INITIAL_LEADER_EPOCH, tuple(isr), INITIAL_ZK_VERSION)

    def new_leader_and_isr(self, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        """A controller change of leader and/or ISR: the leader epoch goes up by one."""
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), self.zk_version)

    def new_leader(self, leader: int) -> LeaderAndIsr:
        return self.new_leader_and_isr(leader, self.isr)

    def new_epoch(self) -> LeaderAndIsr:
        """Same leader and ISR, next leader epoch."""
        return self.new_leader_and_isr(self.leader, self.isr)

    def with_zk_version(self, zk_version: int) -> LeaderAndIsr:
        return replace(self, zk_version=zk_version)

    @property
    def leader_or_none(self) -> int | None:
        return None if self.leader == NO_LEADER else self.leader

    def equals_ignore_zk_version(self, other: LeaderAndIsr) -> bool:
        return (self.leader, self.leader_epoch, self.isr) == (other.leader, other.leader_epoch, other.isr)

    def __str__(self) -> str:
        isr = ",".join(map(str, self.isr))
        return (
            f"(leader={self.leader}, leader_epoch={self.leader_epoch}, isr=[{isr}], "
            f"zk_version={self.zk_version})"
        )


@dataclass(frozen=True, slots=True)
class LeaderIsrAndControllerEpoch:
    """A partition state znode's content: leader/ISR and the epoch of the controller that wrote it."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int
