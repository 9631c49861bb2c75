"""`MemberMetadata`: one member of a group, as Kafka's MemberMetadata.

A member is identified by its member id (and, for a static member, its group.instance.id). It
carries its supported protocols in preference order (name, metadata), the assignment it was given
at the last SyncGroup, its parked JoinGroup / SyncGroup replies, and its liveness state: the
heartbeat deadline and the timer event that expires it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.coordinator.group.api import Reply
from services.coordinator.group.effects import HeartbeatExpired


@dataclass(eq=False, slots=True)
class MemberMetadata:
    member_id: str
    group_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join_reply: Reply | None = None
    awaiting_sync_reply: Reply | None = None
    is_new: bool = False
    is_leaving: bool = False
    heartbeat_deadline_ms: float | None = None
    heartbeat_timer: HeartbeatExpired | None = field(default=None, repr=False)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join_reply is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync_reply is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether `protocols` are exactly this member's, names and metadata, in order."""
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among `candidates`."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """At heartbeat expiry: whether the member is still considered alive.

        A member parked in a JoinGroup or SyncGroup is alive while it waits, except a new member
        whose first JoinGroup has not been answered yet (Kafka expires those after
        NEW_MEMBER_JOIN_TIMEOUT_MS). Everyone else needed a heartbeat before the deadline, and
        every heartbeat moves the deadline, so reaching it means the member failed."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync
