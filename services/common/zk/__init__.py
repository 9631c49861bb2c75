"""Odradek's ZooKeeper data layer: Kafka 2.8's znode layout, one module per znode family (each
states its path and JSON shape), and `OdradekZkClient`, the typed operations every service uses,
with controller writes fenced by the controller epoch."""

from services.common.zk.client import PERSISTENT_PATHS, OdradekZkClient
from services.common.zk.client_topics import PartitionStateUpdates
from services.common.zk.codec import CONFLICT, ConditionalUpdate, Versioned
from services.common.zk.consumers import ConsumerRegistration
from services.common.zk.controller import ControllerEpoch, ControllerInfo
from services.common.zk.coordinators import CoordinatorInfo, CoordinatorOwnership, PartitionOwner
from services.common.zk.errors import ControllerMovedError, DuplicateRegistrationError, ZnodeFormatError
from services.common.zk.fencing import FencedTransaction, ZkTransaction
from services.common.zk.partition_state import PartitionStateZnode
from services.common.zk.producer_ids import ProducerIdBlock
from services.common.zk.topics import TopicAssignment, new_topic_id
from services.common.zk.watches import ZkEvent, enqueue_watch

__all__ = [
    "CONFLICT",
    "PERSISTENT_PATHS",
    "ConditionalUpdate",
    "ConsumerRegistration",
    "ControllerEpoch",
    "ControllerInfo",
    "ControllerMovedError",
    "CoordinatorInfo",
    "CoordinatorOwnership",
    "DuplicateRegistrationError",
    "FencedTransaction",
    "OdradekZkClient",
    "PartitionOwner",
    "PartitionStateZnode",
    "PartitionStateUpdates",
    "ProducerIdBlock",
    "TopicAssignment",
    "Versioned",
    "ZkEvent",
    "ZkTransaction",
    "ZnodeFormatError",
    "enqueue_watch",
    "new_topic_id",
]
