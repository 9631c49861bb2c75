"""`GroupMetadata` and `GroupState`: one consumer group's membership, protocol and offsets.

States and the states each may be entered from (Kafka 2.8):

    Empty                <- PreparingRebalance
    PreparingRebalance   <- Stable, CompletingRebalance, Empty
    CompletingRebalance  <- PreparingRebalance
    Stable               <- CompletingRebalance
    Dead                 <- Stable, PreparingRebalance, CompletingRebalance, Empty, Dead

Any other transition raises `IllegalStateTransition`. The leader is the first member to join
(when the leader leaves, the longest-standing remaining member). The protocol of a generation is
voted: among the protocols every member supports, each member votes for its first choice, and
the most votes win; a tie goes to the candidate that comes first in the longest-standing member's
preference order. Committed offsets become visible only once written (`pending_offset_commits`
holds those in flight); `offset_positions` keeps the log offset of each committed offset's record,
and `pending_txn_offsets` the offsets of open transactions by producer id (see txn_offsets.py). A
GroupMetadata is plain data; the runtime serialises access to it.
"""

from __future__ import annotations

import enum
import struct
import uuid
from collections import Counter
from dataclasses import dataclass

from services.common.clock import Clock
from services.common.errors import Errors
from services.common.shared_types import CONSUMER_PROTOCOL_TYPE
from services.coordinator.group.api import (
    CommittedOffset,
    JoinGroupMember,
    Reply,
    TopicPartition,
)
from services.coordinator.group.member import MemberMetadata


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_ALL_STATES = frozenset(GroupState)
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: _ALL_STATES,
}


class IllegalStateTransition(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class PendingTxnOffset:
    """An offset committed in an open transaction; `position` is its record's log offset once written."""

    offset: CommittedOffset
    position: int | None = None


class GroupMetadata:
    def __init__(self, group_id: str, state: GroupState, clock: Clock) -> None:
        self.group_id = group_id
        self.state = state
        self._clock = clock
        self.current_state_timestamp_ms: int | None = clock.time_ms()
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: set[str] = set()
        self.num_members_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        self.offsets: dict[TopicPartition, CommittedOffset] = {}
        self.pending_offset_commits: dict[TopicPartition, CommittedOffset] = {}
        self.offset_positions: dict[TopicPartition, int] = {}
        self.pending_txn_offsets: dict[int, dict[TopicPartition, PendingTxnOffset]] = {}
        self.subscribed_topics: frozenset[str] | None = None
        self.new_member_added = False
        self.join_op: object | None = None  # the current delayed join (see rebalance.py)

    # ---------------------------------------------------------------------------------------------
    # state

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    @property
    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def transition_to(self, target: GroupState) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalStateTransition(
                f"group {self.group_id} cannot move from {self.state} to {target} "
                f"(valid previous states: {', '.join(sorted(s.value for s in VALID_PREVIOUS_STATES[target]))})"
            )
        self.state = target
        self.current_state_timestamp_ms = self._clock.time_ms()

    # ---------------------------------------------------------------------------------------------
    # members

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata, reply: Reply | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if member.group_id != self.group_id or member.protocol_type != self.protocol_type:
            raise ValueError(f"member {member.member_id} does not fit group {self.group_id}")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names)
        member.awaiting_join_reply = reply
        if member.is_awaiting_join:
            self.num_members_awaiting_join += 1

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names)
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member(
        self, member: MemberMetadata, protocols: list[tuple[str, bytes]], reply: Reply | None
    ) -> None:
        self.supported_protocols.subtract(member.protocol_names)
        member.protocols = list(protocols)
        self.supported_protocols.update(member.protocol_names)
        if reply is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif reply is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.awaiting_join_reply = reply

    def take_join_reply(self, member: MemberMetadata) -> Reply | None:
        """Detach the member's parked JoinGroup reply (the caller answers it)."""
        reply = member.awaiting_join_reply
        if reply is not None:
            member.awaiting_join_reply = None
            self.num_members_awaiting_join -= 1
        return reply

    def take_sync_reply(self, member: MemberMetadata) -> Reply | None:
        reply = member.awaiting_sync_reply
        member.awaiting_sync_reply = None
        return reply

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else promote any rejoined member; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    @property
    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @staticmethod
    def generate_member_id(client_id: str, group_instance_id: str | None) -> str:
        prefix = client_id if group_instance_id is None else group_instance_id
        return f"{prefix}-{uuid.uuid4()}"

    # pending (MEMBER_ID_REQUIRED) members

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members and member_id not in self.members

    def add_pending_member(self, member_id: str) -> None:
        self.pending_members.add(member_id)

    def remove_pending_member(self, member_id: str) -> None:
        self.pending_members.discard(member_id)

    # static members

    def has_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self.static_members

    def get_static_member_id(self, group_instance_id: str) -> str:
        return self.static_members[group_instance_id]

    def add_static_member(self, group_instance_id: str, member_id: str) -> None:
        self.static_members[group_instance_id] = member_id

    def remove_static_member(self, group_instance_id: str | None) -> None:
        if group_instance_id is not None:
            self.static_members.pop(group_instance_id, None)

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A known group.instance.id presented with a member id other than its current one."""
        return self.has_static_member(group_instance_id) and self.static_members[group_instance_id] != member_id

    def member_error(self, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
        """Whether a request of this member for this generation may go on (Errors.NONE), as every
        member request checks it: Dead group, fenced static member, unknown member, generation."""
        if self.is_(GroupState.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        if self.is_static_member_fenced(member_id, group_instance_id):
            return Errors.FENCED_INSTANCE_ID
        if not self.has(member_id):
            return Errors.UNKNOWN_MEMBER_ID
        if generation_id != self.generation_id:
            return Errors.ILLEGAL_GENERATION
        return Errors.NONE

    def replace_group_instance(
        self, old_member_id: str, new_member_id: str, group_instance_id: str
    ) -> tuple[MemberMetadata, Reply | None, Reply | None]:
        """Give a static member a new member id; returns it and the parked replies of the old
        id, which the caller must answer FENCED_INSTANCE_ID."""
        member = self.members.pop(old_member_id)
        join_reply = self.take_join_reply(member)
        sync_reply = self.take_sync_reply(member)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.add_static_member(group_instance_id, new_member_id)
        return member, join_reply, sync_reply

    # ---------------------------------------------------------------------------------------------
    # protocols and generations

    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the longest-standing member's preference order."""
        everyone = len(self.members)
        ordered: dict[str, None] = {}
        for member in self.members.values():
            for name in member.protocol_names:
                if self.supported_protocols[name] == everyone:
                    ordered.setdefault(name, None)
        return list(ordered)

    def select_protocol(self) -> str:
        if not self.members:
            raise IllegalStateTransition(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes = Counter(member.vote(set(candidates)) for member in self.members.values())
        most = max(votes.values())
        return next(name for name in candidates if votes[name] == most)

    def supports_protocols(self, member_protocol_type: str, member_protocols: set[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(member_protocol_type) and bool(member_protocols)
        everyone = len(self.members)
        return self.protocol_type == member_protocol_type and any(
            self.supported_protocols[name] == everyone for name in member_protocols
        )

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)

    def current_member_metadata(self) -> list[JoinGroupMember]:
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE) or self.protocol_name is None:
            raise IllegalStateTransition(f"no member metadata for group {self.group_id} in state {self.state}")
        return [
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        ]

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Topics the members of a "consumer" group subscribe to; None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # ---------------------------------------------------------------------------------------------
    # offsets

    def offset(self, topic_partition: TopicPartition) -> CommittedOffset | None:
        return self.offsets.get(topic_partition)

    @property
    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits) or bool(self.pending_txn_offsets)

    def adopt_offsets(self, other: GroupMetadata) -> None:
        """Take over the committed and transactional offsets of `other` (a group replaced by a record)."""
        self.offsets.update(other.offsets)
        self.offset_positions.update(other.offset_positions)
        self.pending_txn_offsets.update(other.pending_txn_offsets)

    def prepare_offset_commit(self, offsets: dict[TopicPartition, CommittedOffset]) -> None:
        self.pending_offset_commits.update(offsets)

    def fail_pending_offset_write(self, topic_partition: TopicPartition, offset: CommittedOffset) -> None:
        if self.pending_offset_commits.get(topic_partition) == offset:
            del self.pending_offset_commits[topic_partition]

    def has_pending_offset_commit(self, topic_partition: TopicPartition) -> bool:
        return topic_partition in self.pending_offset_commits

    def has_unstable_offset(self, topic_partition: TopicPartition) -> bool:
        """A commit of the partition is in flight or in an open transaction (OffsetFetch's require_stable)."""
        return self.has_pending_offset_commit(topic_partition) or any(
            topic_partition in pending for pending in self.pending_txn_offsets.values()
        )


def parse_subscription_topics(metadata: bytes) -> list[str] | None:
    """Topics of a ConsumerProtocolSubscription (version int16, then [topic STRING] as every
    version starts); None when the bytes do not parse."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos, topics = 6, []
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, pos)
            if length < 0 or pos + 2 + length > len(metadata):
                return None
            topics.append(bytes(metadata[pos + 2 : pos + 2 + length]).decode("utf-8"))
            pos += 2 + length
        return topics if count >= 0 else None
    except (struct.error, UnicodeDecodeError):
        return None
