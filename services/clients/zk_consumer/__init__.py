"""The legacy (Kafka 0.8) high-level consumer: `ZookeeperConsumerConnector` with KafkaStreams,
group membership and partition ownership in ZooKeeper under `/consumers/<group>`, offsets there
or at the group coordinator (`offsets.storage`).

Modules: `config` (0.8 keys), `topic_count` (consumer and thread ids, subscriptions, topic
filters), `assignment` (range and round-robin assignment), `rebalance` (planning and claiming in
ZooKeeper), `listener` (the rebalance listener), `fetcher` (leader finder and fetcher threads),
`stream` (queues, iterators and decoders), `offset_storage` (offsets in ZooKeeper and/or Kafka),
`connector`.
"""

from services.clients.zk_consumer.config import ZkConsumerConfig
from services.clients.zk_consumer.connector import ZookeeperConsumerConnector
from services.clients.zk_consumer.errors import (
    ConsumerRebalanceFailedError,
    ConsumerTimeoutError,
    MessageDecodeError,
    MessageSizeTooLargeError,
    MessageStreamsExistError,
    SubscriptionMismatchError,
)
from services.clients.zk_consumer.listener import ConsumerRebalanceListener
from services.clients.zk_consumer.stream import KafkaStream, MessageAndMetadata
from services.clients.zk_consumer.topic_count import Blacklist, Whitelist

__all__ = [
    "Blacklist", "ConsumerRebalanceFailedError", "ConsumerRebalanceListener", "ConsumerTimeoutError",
    "KafkaStream", "MessageAndMetadata", "MessageDecodeError", "MessageSizeTooLargeError", "MessageStreamsExistError",
    "SubscriptionMismatchError", "Whitelist", "ZkConsumerConfig", "ZookeeperConsumerConnector",
]
