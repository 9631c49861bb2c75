"""The group coordinator's pure core: consumer group membership, rebalances and committed offsets
(Kafka 2.8's GroupCoordinator and GroupMetadataManager), over the `__consumer_offsets` records.

No network here: the service feeds it requests, partition ownership changes and replayed records,
and gives it a `GroupStore` to append records with, a clock and a scheduler.
"""

from services.coordinator.group.api import (
    DescribedGroup,
    DescribedMember,
    FetchedOffset,
    GroupStore,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupResult,
    ListedGroup,
    MemberLeaveResult,
    OffsetAndMetadata,
    SyncGroupResult,
    TopicPartition,
)
from services.coordinator.group.config import GroupConfig
from services.coordinator.group.coordinator import GroupCoordinator
from services.coordinator.group.group import GroupMetadata, GroupState, IllegalStateTransition
from services.coordinator.group.manager import GroupMetadataManager
from services.coordinator.group.member import MemberMetadata
from services.coordinator.group.records import RecordFormatError
from services.coordinator.group.scheduler import Cancellable, ManualScheduler, Scheduler, ThreadScheduler

__all__ = [
    "Cancellable",
    "DescribedGroup",
    "DescribedMember",
    "FetchedOffset",
    "GroupConfig",
    "GroupCoordinator",
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
    "OffsetAndMetadata",
    "RecordFormatError",
    "Scheduler",
    "SyncGroupResult",
    "ThreadScheduler",
    "TopicPartition",
]
