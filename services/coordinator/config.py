"""`CoordinatorServiceConfig`: the coordinator process's configuration.

Kafka's keys where Kafka has one: the group coordinator's (`group.*`, `offsets.*`, inherited from
`GroupConfig`), the transaction coordinator's (`transaction.*`, `transactional.id.expiration.ms`,
`transaction.state.log.*`, inherited from `TransactionConfig`) and the offsets topic's
(`offsets.topic.replication.factor`, `offsets.topic.segment.bytes`, `offsets.commit.timeout.ms`,
which also bounds writes to `__transaction_state`, `offsets.load.buffer.size`).
`kafka.listeners` (with `kafka.advertised.listeners`, `socket.request.max.bytes`,
`socket.listen.backlog.size`) serves the group and transaction APIs to Kafka clients, as on brokers.
`coordinator.id` and `bootstrap.servers` (the brokers it reads and writes `__consumer_offsets`
through) are Odradek's, since its coordinators are processes of their own rather than part of a
broker.
"""

from __future__ import annotations

from services.common.config import REQUIRED, ConfigType, at_least, setting
from services.common.kafka_wire.listener_config import KafkaListenerConfig
from services.common.service import DEFAULT_PARKED_MAX_REQUESTS, Listener, parse_listener
from services.common.zk.connect import ZkTlsConfig
from services.coordinator.group.config import GroupConfig
from services.coordinator.txn.config import TransactionConfig

DEFAULT_HOST = "127.0.0.1"


class CoordinatorServiceConfig(GroupConfig, TransactionConfig, KafkaListenerConfig, ZkTlsConfig):
    coordinator_id: int = setting(ConfigType.INT, REQUIRED, at_least(0),
                                  doc="This coordinator's id (written to /coordinators/ids).")
    listeners: str = setting(ConfigType.STRING, "PLAINTEXT://:9094", doc="Where the CoordinatorService listens.")
    advertised_listeners: str | None = setting(ConfigType.STRING, None,
                                               doc="Where clients reach it (default: listeners).")
    zookeeper_connect: str = setting(ConfigType.STRING, REQUIRED, doc="ZooKeeper connect string.")
    zookeeper_session_timeout_ms: int = setting(ConfigType.INT, 18000, at_least(1000),
                                                doc="ZooKeeper session timeout.")
    zookeeper_connection_timeout_ms: int | None = setting(
        ConfigType.INT, None, doc="How long to wait for the first connection (default: the session timeout).")
    bootstrap_servers: str | None = setting(
        ConfigType.STRING, None,
        doc="Brokers to reach the internal topics through (default: the brokers registered in ZooKeeper).")
    metrics_port: int = setting(ConfigType.INT, -1, doc="Prometheus endpoint port; -1 disables it.")
    num_io_threads: int = setting(ConfigType.INT, 32, at_least(1),
                                  doc="Threads serving the gRPC calls that answer at once; the calls "
                                      "that wait (JoinGroup, SyncGroup, commits) hold none.")
    parked_max_requests: int = setting(
        ConfigType.INT, DEFAULT_PARKED_MAX_REQUESTS, at_least(1),
        doc="Waiting requests (JoinGroup, SyncGroup, OffsetCommit, DeleteGroups, OffsetDelete) held at once; one more "
            "is answered at once with THROTTLING_QUOTA_EXCEEDED.")
    offsets_topic_replication_factor: int = setting(
        ConfigType.SHORT, 3, at_least(1),
        doc="Replication factor of __consumer_offsets; it is created once that many brokers are live.")
    offsets_topic_segment_bytes: int = setting(ConfigType.INT, 104857600, at_least(1),
                                               doc="segment.bytes of __consumer_offsets.")
    offsets_topic_compression_codec: int = setting(ConfigType.INT, 0, at_least(0),
                                                   doc="Codec of the batches written to __consumer_offsets.")
    offsets_commit_timeout_ms: int = setting(
        ConfigType.INT, 5000, at_least(1),
        doc="How long a write to __consumer_offsets waits for all in-sync replicas.")
    offsets_load_buffer_size: int = setting(ConfigType.INT, 5242880, at_least(1),
                                            doc="Bytes read per fetch while loading a partition.")
    request_timeout_ms: int = setting(ConfigType.INT, 30000, at_least(1),
                                      doc="Bound on calls to brokers and the controller.")

    @property
    def listener(self) -> Listener:
        return parse_listener(self.listeners.split(",")[0])

    def advertised_listener(self, bound_port: int = 0) -> Listener:
        listener = parse_listener((self.advertised_listeners or self.listeners).split(",")[0])
        return Listener(listener.protocol, listener.host or DEFAULT_HOST, listener.port or bound_port)

    @property
    def connection_timeout_s(self) -> float:
        timeout_ms = self.zookeeper_connection_timeout_ms
        return (self.zookeeper_session_timeout_ms if timeout_ms is None else timeout_ms) / 1000

    def group_config(self) -> GroupConfig:
        """The group coordinator's keys alone (with the environment already applied)."""
        return GroupConfig(**{s.attribute: getattr(self, s.attribute) for s in GroupConfig.__settings__.values()})

    def transaction_config(self) -> TransactionConfig:
        """The transaction coordinator's keys alone (with the environment already applied)."""
        return TransactionConfig(**{s.attribute: getattr(self, s.attribute)
                                    for s in TransactionConfig.__settings__.values()})
