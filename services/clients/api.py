"""The clients' public names in one place: `from services.clients.api import Admin, NewTopic, ...`."""

from services.clients.admin import Admin
from services.clients.admin_types import (
    ClusterDescription,
    ConfigEntry,
    CreateTopicResult,
    NewPartitions,
    NewTopic,
    TopicDescription,
)
from services.clients.client_config import AdminConfig, CommonClientConfig
from services.clients.cluster import Cluster, Node, PartitionInfo
from services.clients.consumer import (
    CommitFailedError,
    Consumer,
    ConsumerGroupMetadata,
    ConsumerRebalanceListener,
    ConsumerRecord,
    ConsumerRecords,
    OffsetAndMetadata,
    OffsetAndTimestamp,
)
from services.clients.lowlevel import LowLevelClient
from services.clients.metadata import Metadata
from services.clients.partition_requests import FetchResult, ListOffsetsResult
from services.clients.producer import Producer, RecordMetadata
from services.clients.transport import ChannelPool
from services.common.errors import KafkaError
from services.common.shared_types import ProduceResult
from services.common.topic_partition import TopicPartition

__all__ = [
    "Admin", "AdminConfig", "ChannelPool", "Cluster", "ClusterDescription", "CommitFailedError", "CommonClientConfig",
    "ConfigEntry", "Consumer", "ConsumerGroupMetadata", "ConsumerRebalanceListener", "ConsumerRecord",
    "ConsumerRecords", "CreateTopicResult", "FetchResult", "KafkaError", "ListOffsetsResult", "LowLevelClient",
    "Metadata", "NewPartitions", "NewTopic", "Node", "OffsetAndMetadata", "OffsetAndTimestamp", "PartitionInfo",
    "ProduceResult", "Producer", "RecordMetadata", "TopicDescription", "TopicPartition",
]
