"""The Kafka 0.8 high-level consumer, for applications written against it.

`ZookeeperConsumerConnector(ZkConsumerConfig(...))` keeps group membership and partition
ownership in ZooKeeper under `/consumers/<group>`, and its offsets there or at the group
coordinator (`offsets.storage`); `create_message_streams` hands out `KafkaStream`s whose
iterators yield `MessageAndMetadata`. `Whitelist` and `Blacklist` are topic filters;
`ConsumerRebalanceListener` is the 0.8 rebalance listener (not the Consumer's, which
`odradek` exports). The errors are 0.8's.
"""

from services.clients.zk_consumer import *  # noqa: F403
from services.clients.zk_consumer import __all__ as __all__
