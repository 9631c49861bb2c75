"""The controller's pure core: plain synchronous Python that decides, never does I/O.

It owns the controller's view of the cluster (`ControllerContext`, changed only by records), the
partition and replica state machines, leader election, replica assignment, topic validation,
controlled shutdown, preferred leader balance, topic deletion and the event queue. Decisions come
back as `Outcome`s: records already applied to the context, and effects (ZooKeeper writes and
broker requests) for the controller service to carry out. Nothing here imports grpc, kazoo or
generated stubs.
"""

from services.common.replica_assignment import (
    AdminOperationError,
    BrokerMetadata,
    assign_replicas_to_brokers,
    new_partitions_assignment,
)
from services.controller.state.config import ControllerConfig
from services.controller.state.context import ControllerContext
from services.controller.state.core import ClusterSnapshot, ControllerCore, TopicDescription
from services.controller.state.effects import Effect, Outcome, PartitionStateChangeOutcome, StateChangeFailed
from services.controller.state.election import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    ElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
    ReassignPartitionLeaderElectionStrategy,
)
from services.controller.state.event_manager import ControllerEventManager, QueuedEvent
from services.controller.state.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, PartitionAndReplica
from services.controller.state.partition_state_machine import PartitionStateMachine
from services.controller.state.replica_state_machine import ReplicaStateMachine
from services.controller.state.states import PartitionState, ReplicaState

__all__ = [
    "AdminOperationError",
    "BrokerMetadata",
    "ClusterSnapshot",
    "ControlledShutdownPartitionLeaderElectionStrategy",
    "ControllerConfig",
    "ControllerContext",
    "ControllerCore",
    "ControllerEventManager",
    "Effect",
    "ElectionStrategy",
    "LeaderAndIsr",
    "LeaderIsrAndControllerEpoch",
    "OfflinePartitionLeaderElectionStrategy",
    "Outcome",
    "PartitionAndReplica",
    "PartitionState",
    "PartitionStateChangeOutcome",
    "PartitionStateMachine",
    "PreferredReplicaPartitionLeaderElectionStrategy",
    "QueuedEvent",
    "ReassignPartitionLeaderElectionStrategy",
    "ReplicaState",
    "ReplicaStateMachine",
    "StateChangeFailed",
    "TopicDescription",
    "assign_replicas_to_brokers",
    "new_partitions_assignment",
]
