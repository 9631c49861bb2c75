"""`OdradekZkClient`: every service's typed access to Kafka's ZooKeeper layout, as Kafka's
KafkaZkClient. It wraps a started kazoo client (already chrooted if the cluster lives under one)
and a clock for registration timestamps:

    zk = OdradekZkClient(kazoo_client)
    zk.ensure_paths()
    epoch = zk.register_broker(BrokerInfo(1, (EndPoint("h1", 9092),)))

The operations live in mixins by concern: `client_registry` (brokers, coordinators, cluster id,
producer ids), `client_topics` (assignments, partition states, configs, ISR notifications),
`client_controller` (election, topic deletion, admin requests) and `client_legacy` (the 0.8
consumer). Controller writes are fenced by the controller epoch (`fencing`); the JSON of each
znode is owned by its own module (`brokers`, `topics`, `partition_state`, ...).

Calls block on ZooKeeper and raise kazoo's exceptions for connection loss; a caller retries after
rereading, since a write whose answer was lost may or may not have been applied.
"""

from __future__ import annotations

import logging

from services.common.zk import (
    admin,
    brokers,
    configs,
    consumers,
    coordinators,
    isr_change,
    log_dir_event,
    producer_ids,
    topics,
)
from services.common.zk.client_controller import ControllerOps
from services.common.zk.client_legacy import LegacyConsumerOps
from services.common.zk.client_registry import RegistryOps
from services.common.zk.client_topics import TopicOps

# Kafka's ZkData.PersistentZkPaths, plus Odradek's coordinator registry.
PERSISTENT_PATHS = (
    consumers.CONSUMERS_PATH,
    brokers.BROKER_IDS_PATH,
    topics.TOPICS_PATH,
    configs.CONFIG_CHANGES_PATH,
    admin.DELETE_TOPICS_PATH,
    brokers.BROKER_SEQID_PATH,
    isr_change.ISR_CHANGE_NOTIFICATION_PATH,
    producer_ids.PRODUCER_ID_BLOCK_PATH,
    log_dir_event.LOG_DIR_EVENT_NOTIFICATION_PATH,
    *(configs.entity_type_path(t) for t in configs.ENTITY_TYPES),
    coordinators.COORDINATOR_IDS_PATH,
)


class OdradekZkClient(RegistryOps, TopicOps, ControllerOps, LegacyConsumerOps):
    def ensure_paths(self) -> None:
        """Creates the persistent top-level znodes every process expects (Kafka's
        createTopLevelPaths); existing ones are left alone."""
        for path in PERSISTENT_PATHS:
            self.zk.ensure_path(path)


def close_session(zk_raw) -> None:
    """Ends a service's ZooKeeper session (its ephemeral znodes go at once, so others react now
    rather than after the session timeout); a failure is logged, never raised."""
    try:
        zk_raw.stop()
        zk_raw.close()
    except Exception:
        logging.getLogger(__name__).exception("Closing the ZooKeeper session failed")
