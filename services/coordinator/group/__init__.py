"""The group coordinator: consumer group membership, rebalances and committed offsets (Kafka 2.8's
GroupCoordinator and GroupMetadataManager), over the `__consumer_offsets` records.

`GroupCoordinatorCore` (coordinator.py) is the pure core: commands in, `Outcome`s out (records to
append, responses, timers), state changed by replaying records. `GroupCoordinator` (runtime.py)
runs it for the service with a lock, a `Scheduler` and a `GroupStore`.
"""

from services.common.scheduler import Cancellable, ManualScheduler, Scheduler
from services.coordinator.group.api import (
    CommittedOffset,
    DescribedGroup,
    DescribedMember,
    FetchedOffset,
    GroupStore,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupResult,
    ListedGroup,
    MemberLeaveResult,
    SyncGroupResult,
    TopicPartition,
)
from services.coordinator.group.config import GroupConfig
from services.coordinator.group.coordinator import GroupCoordinatorCore
from services.coordinator.group.effects import Outcome
from services.coordinator.group.group import GroupMetadata, GroupState, IllegalStateTransition
from services.coordinator.group.manager import GroupMetadataManager
from services.coordinator.group.member import MemberMetadata
from services.coordinator.group.records import RecordFormatError
from services.coordinator.group.runtime import GroupCoordinator

__all__ = [
    "Cancellable",
    "DescribedGroup",
    "DescribedMember",
    "FetchedOffset",
    "GroupConfig",
    "GroupCoordinator",
    "GroupCoordinatorCore",
    "GroupMetadata",
    "GroupMetadataManager",
    "GroupState",
    "GroupStore",
    "IllegalStateTransition",
    "JoinGroupMember",
    "JoinGroupResult",
    "LeaveGroupResult",
    "ListedGroup",
    "ManualScheduler",
    "MemberLeaveResult",
    "MemberMetadata",
    "CommittedOffset",
    "Outcome",
    "RecordFormatError",
    "Scheduler",
    "SyncGroupResult",
    "TopicPartition",
]
