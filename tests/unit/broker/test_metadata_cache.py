"""The broker's metadata cache before and after the controller's first UpdateMetadata."""

import threading

from services.broker.metadata_cache import BrokerNode, MetadataCache
from services.common.shared_types import PartitionStateInfo
from services.common.topic_partition import TopicPartition


def _update(cache: MetadataCache) -> None:
    cache.update(controller_id=1, controller_epoch=1, live_brokers=[BrokerNode(1, "127.0.0.1", 9092)],
                 partition_states=[PartitionStateInfo(TopicPartition("t", 0), controller_epoch=1, leader=1,
                                                      leader_epoch=0, isr=(1,), zk_version=0, replicas=(1,))])


def test_a_new_cache_is_not_initialized_and_waits_for_the_first_update():
    cache = MetadataCache()
    assert not cache.initialized
    assert not cache.wait_initialized(0.01)
    waiter_saw: list[bool] = []
    waiter = threading.Thread(target=lambda: waiter_saw.append(cache.wait_initialized(10)))
    waiter.start()
    _update(cache)
    waiter.join(10)
    assert waiter_saw == [True]
    assert cache.initialized and cache.topics() == ["t"]
