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
from services.clients.channels import ChannelPool
from services.clients.client_config import AdminConfig, CommonClientConfig
from services.clients.cluster import Cluster, Node, PartitionInfo, TopicPartition
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
from services.clients.partition_requests import FetchResult, ListOffsetsResult, ProduceResult
from services.clients.producer import Producer, RecordMetadata
from services.common.errors import KafkaError

__all__ = [
    "Admin", "AdminConfig", "ChannelPool", "Cluster", "ClusterDescription", "CommitFailedError", "CommonClientConfig",
    "ConfigEntry", "Consumer", "ConsumerGroupMetadata", "ConsumerRebalanceListener", "ConsumerRecord",
    "ConsumerRecords", "CreateTopicResult", "FetchResult", "KafkaError", "ListOffsetsResult", "LowLevelClient",
    "Metadata", "NewPartitions", "NewTopic", "Node", "OffsetAndMetadata", "OffsetAndTimestamp", "PartitionInfo",
    "ProduceResult", "Producer", "RecordMetadata", "TopicDescription", "TopicPartition",
]
