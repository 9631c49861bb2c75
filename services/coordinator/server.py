"""`CoordinatorServer`: assembles one coordinator process and runs its lifecycle.

Start: the gRPC runtime (CoordinatorService + health), the ZooKeeper session (waiting first for
the session of a previous process with this id to go, see `previous_session`), the coordinator
directory (for FindCoordinator), the brokers' client, the group coordinator with its store
(`OffsetsLog` of `__consumer_offsets`), the transaction coordinator with its own (`OffsetsLog` of
`__transaction_state`), its producer ids (`ProducerIdManager`) and its `TxnMarkerWriter`, then
registration and ownership (`OwnershipManager`, over the partitions of both topics); the offsets
of deleted topics leave the groups served (`DeletedTopicOffsets`). Each topic's
partitions this instance comes to own are loaded by its `PartitionLoader`: the topic is created
through the controller if it does not exist yet (RF = <topic>.replication.factor, compacted;
as in Kafka, not before that many brokers are live), then each partition is replayed and fenced
(see `offsets_log`) before its groups or transactions are served; meanwhile they answer
COORDINATOR_LOAD_IN_PROGRESS. A partition that moves away is unloaded at once: its keys answer
NOT_COORDINATOR. The transaction coordinator's epoch of a `__transaction_state` partition is its
ownership epoch.

With `kafka.listeners` set it also serves the group and transaction APIs to Kafka clients
(`kafka_api`) and registers that listener beside its gRPC endpoint, so FindCoordinator and
Metadata name it.

Shutdown (SIGTERM): groups and transactions answer NOT_COORDINATOR, the writers stop, and closing
the ZooKeeper session removes the registration, so the other coordinators take the partitions over
at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading

from services.clients.admin import Admin
from services.clients.admin_types import NewTopic
from services.clients.lowlevel import LowLevelClient
from services.common.clock import SYSTEM_CLOCK
from services.common.errors import Errors, KafkaError
from services.common.kafka_wire import ApiRegistry, KafkaWireServer
from services.common.kafka_wire.forwarding import BrokerForwarder
from services.common.kafka_wire.security import SASL_PROTOCOLS, SSL_PROTOCOLS, listener_security
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2_grpc
from services.common.producer_id_manager import ProducerIdManager
from services.common.scheduler import Scheduler
from services.common.security.authorizer import node_authorizer
from services.common.security.grpc_credentials import node_password_verifier
from services.common.security.sasl import jaas_login
from services.common.service import ServiceRuntime, listener_tls
from services.common.shared_types import KAFKA_LISTENER_NAME
from services.common.topic_names import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from services.common.topic_partition import TopicPartition
from services.common.zk import OdradekZkClient
from services.common.zk.client import close_session
from services.common.zk.connect import zk_client
from services.common.zk.coordinator_directory import CoordinatorDirectory
from services.coordinator.config import CoordinatorServiceConfig
from services.coordinator.deleted_topics import DeletedTopicOffsets
from services.coordinator.group import GroupCoordinator
from services.coordinator.kafka_api import NOT_FORWARDED, CoordinatorKafkaApis
from services.coordinator.lag import LogEndOffsets
from services.coordinator.metrics import CoordinatorMetrics
from services.coordinator.offsets_log import LoadError, OffsetsLog
from services.coordinator.ownership import OwnedPartitions, OwnershipManager
from services.coordinator.partition_loader import LoadTarget, PartitionLoader
from services.coordinator.servicer import CoordinatorServicer
from services.coordinator.txn.runtime import TransactionCoordinator
from services.coordinator.txn_markers import TxnMarkerWriter, cached_unknown_partitions, unknown_partitions

logger = logging.getLogger(__name__)

LAG_END_OFFSETS_TIMEOUT_MS = 3000



class CoordinatorServer:
    def __init__(self, config: CoordinatorServiceConfig) -> None:
        self.config = config
        self.coordinator_id = config.coordinator_id
        self.group_config = config.group_config()
        self.runtime = ServiceRuntime("coordinator", config.listener.address,
                                      max_workers=config.num_io_threads, metrics_port=config.metrics_port,
                                      tls=listener_tls(config.listener, config))
        self.zk_raw = zk_client(config.zookeeper_connect, config.zk_tls(),
                                timeout_s=config.zookeeper_session_timeout_ms / 1000)
        self.zk = OdradekZkClient(self.zk_raw)
        self.directory = CoordinatorDirectory(self.zk)
        self.scheduler = Scheduler(name="group-coordinator-scheduler")
        self.scheduler.startup()
        self.client: LowLevelClient | None = None
        self.offsets_log: OffsetsLog | None = None
        self.groups: GroupCoordinator | None = None
        self.txn_config = config.transaction_config()
        self.txn_scheduler = Scheduler(name="transaction-coordinator-scheduler")
        self.txn_log: OffsetsLog | None = None
        self.txn_markers: TxnMarkerWriter | None = None
        self.transactions: TransactionCoordinator | None = None
        self.ownership: OwnershipManager | None = None
        self.deleted_topics: DeletedTopicOffsets | None = None
        self.metrics: CoordinatorMetrics | None = None
        self.endpoint = ""
        self.kafka_endpoint: str | None = None
        self.kafka_listener: KafkaWireServer | None = None
        self.bootstrap = ""
        self._loaders: dict[str, PartitionLoader] = {}
        self._stopping = threading.Event()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> int:
        self.zk_raw.start(timeout=self.config.connection_timeout_s)
        # a lost connection or an expired session while starting is waited out, as the broker does
        self.zk.until_connected(self.zk.ensure_paths)
        self.zk.await_previous_coordinator_session(self.coordinator_id, self.config.zookeeper_session_timeout_ms)
        self.directory.start()
        self.runtime.authorizer = node_authorizer(self.config, self.zk_raw)
        self.runtime.password_verifier = node_password_verifier(self.zk, self.config.listener_plain_jaas_config)
        bootstrap = self.bootstrap = self.config.bootstrap_servers or self._registered_brokers()
        client_config = {"bootstrap.servers": bootstrap, "request.timeout.ms": self.config.request_timeout_ms,
                         "client.id": f"coordinator-{self.coordinator_id}", **self._client_security()}
        self.client = LowLevelClient(client_config)
        self.offsets_log = OffsetsLog(self.client, self.coordinator_id, topic=GROUP_METADATA_TOPIC,
                                      commit_timeout_ms=self.config.offsets_commit_timeout_ms,
                                      load_buffer_bytes=self.config.offsets_load_buffer_size,
                                      compression=self.config.offsets_topic_compression_codec,
                                      on_in_doubt=lambda p: self._loaders[GROUP_METADATA_TOPIC].request_reload(p))
        self.groups = GroupCoordinator(self.group_config, SYSTEM_CLOCK, self.scheduler, self.offsets_log)
        self.groups.start()
        self.deleted_topics = DeletedTopicOffsets(self.zk_raw, self.zk, self.groups,
                                                  self.group_config.offsets_retention_check_interval_ms)
        self.deleted_topics.start()
        self._start_transactions()
        self.metrics = CoordinatorMetrics(self.coordinator_id, self.groups,
                                          LogEndOffsets(self._log_end_offsets, SYSTEM_CLOCK))
        servicer = CoordinatorServicer(self.groups, self.directory.snapshot,
                                       parked_max_requests=self.config.parked_max_requests,
                                       transactions=self.transactions, unknown_partitions=self._unknown_partitions,
                                       cached_unknown_partitions=self._cached_unknown_partitions)
        self.runtime.add_servicer(coordinator_pb2_grpc.add_CoordinatorServiceServicer_to_server, servicer)
        port = self.runtime.start()
        advertised = self.config.advertised_listener(port)
        self.endpoint = f"{advertised.host}:{advertised.port}"
        self._start_kafka_listener(servicer)
        partitions = [TopicPartition(GROUP_METADATA_TOPIC, p)
                      for p in range(self.group_config.offsets_topic_num_partitions)]
        partitions += [TopicPartition(TRANSACTION_STATE_TOPIC, p)
                       for p in range(self.txn_config.transaction_state_log_num_partitions)]
        self.ownership = OwnershipManager(self.zk_raw, self.zk, self.coordinator_id, self.endpoint, partitions,
                                          self._on_owned, kafka_endpoint=self.kafka_endpoint)
        self._start_loaders()
        self.ownership.start()
        self.directory.refresh()
        self.runtime.on_shutdown("coordinator", self._shutdown)
        self.runtime.on_shutdown("close ZooKeeper", self._close_zookeeper)
        # last: meanwhile Kafka clients are answered NOT_COORDINATOR and look up the coordinators
        # that take the partitions over, rather than finding the listener refusing connections
        self.runtime.on_shutdown("Kafka listener", self._stop_kafka_listener)
        self.runtime.set_serving(True)
        logger.info("Coordinator %d serving at %s (brokers %s, ZooKeeper %s)", self.coordinator_id,
                    self.endpoint, bootstrap, self.config.zookeeper_connect)
        return port

    def _client_security(self) -> dict[str, str]:
        """The Kafka client settings by which this node's client reaches the brokers: over TLS with
        this node's certificate when its own listener is SSL."""
        if self.runtime.tls is None:
            return {}
        return {"security.protocol": "SSL", "ssl.keystore.location": self.config.ssl_keystore_location,
                "ssl.truststore.location": self.config.ssl_truststore_location or "",
                **({"ssl.key.password": self.config.ssl_key_password} if self.config.ssl_key_password else {})}

    def run(self) -> None:
        self.start()
        self.runtime.run_until_stopped()

    def _log_end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's log end offset from its leader, for consumer lag (bounded: a scrape waits
        at most `LAG_END_OFFSETS_TIMEOUT_MS`)."""
        answers = self.client.list_offsets({tp: "latest" for tp in partitions},
                                           retry_timeout_ms=LAG_END_OFFSETS_TIMEOUT_MS)
        return {tp: result.offset for tp, result in answers.items() if result.error_code == Errors.NONE}

    def _start_kafka_listener(self, servicer: CoordinatorServicer) -> None:
        """Serves the group and transaction APIs on kafka.listeners, when set; other requests go to
        the brokers' Kafka listeners."""
        listener = self.config.kafka_listener
        if listener is None:
            return
        registry = ApiRegistry()
        CoordinatorKafkaApis(servicer, self.directory.snapshot).register(registry)
        security = listener_security(self.config, self.zk, self.runtime.authorizer)
        registry.forward_others(BrokerForwarder(self._broker_kafka_endpoints,
                                                request_timeout_s=self.config.request_timeout_ms / 1000,
                                                client_id=f"coordinator-{self.coordinator_id}",
                                                sasl_login=jaas_login(self.config.listener_plain_jaas_config)
                                                if listener.protocol in SASL_PROTOCOLS else None,
                                                ssl_context=security.tls.client_context()
                                                if listener.protocol in SSL_PROTOCOLS else None),
                               NOT_FORWARDED)
        self.kafka_listener = KafkaWireServer(registry, listener.host, listener.port,
                                              request_max_bytes=self.config.socket_request_max_bytes,
                                              listen_backlog=self.config.socket_listen_backlog_size,
                                              security=security)
        bound = self.runtime.call_on_loop(self.kafka_listener.start())
        advertised = self.config.kafka_advertised_listener(bound)
        self.kafka_endpoint = f"{advertised.host}:{advertised.port}"

    async def _broker_kafka_endpoints(self) -> list[tuple[str, int]]:
        """The Kafka listeners of the registered brokers, read from ZooKeeper off the loop."""
        def read() -> list[tuple[str, int]]:
            found = []
            for registered in self.zk.get_all_brokers().values():
                endpoint = registered.endpoint(KAFKA_LISTENER_NAME)
                if endpoint is not None:
                    found.append((endpoint.host or "127.0.0.1", endpoint.port))
            random.shuffle(found)
            return found
        return await asyncio.get_running_loop().run_in_executor(None, read)

    def _stop_kafka_listener(self) -> None:
        if self.kafka_listener is not None:
            self.runtime.call_on_loop(self.kafka_listener.stop())
            if self.kafka_listener.registry.forwarder is not None:
                self.runtime.call_on_loop(self.kafka_listener.registry.forwarder.close())

    def _registered_brokers(self) -> str:
        """The brokers registered in ZooKeeper, waiting for the first one to appear."""
        while not self._stopping.is_set():
            endpoints = []
            for registered in self.zk.get_all_brokers().values():
                endpoint = registered.endpoint()
                if endpoint is not None:
                    endpoints.append(f"{endpoint.host or '127.0.0.1'}:{endpoint.port}")
            if endpoints:
                return ",".join(sorted(endpoints))
            self._stopping.wait(0.5)
        raise RuntimeError("stopped before any broker registered")

    def _start_transactions(self) -> None:
        producer_ids = ProducerIdManager(lambda: self.zk.allocate_producer_id_block(self.coordinator_id))
        self.txn_log = OffsetsLog(self.client, self.coordinator_id, topic=TRANSACTION_STATE_TOPIC,
                                  commit_timeout_ms=self.config.offsets_commit_timeout_ms,
                                  load_buffer_bytes=self.txn_config.transaction_state_log_load_buffer_size,
                                  on_in_doubt=lambda p: self._loaders[TRANSACTION_STATE_TOPIC].request_reload(p))
        self.txn_markers = TxnMarkerWriter(self.client, self.directory.snapshot,
                                           retry_backoff_ms=self.client.config.retry_backoff_ms,
                                           request_timeout_ms=self.config.request_timeout_ms)
        self.txn_scheduler.startup()
        self.transactions = TransactionCoordinator(self.txn_config, SYSTEM_CLOCK, self.txn_scheduler, self.txn_log,
                                                   self.txn_markers, producer_ids.generate_producer_id)
        self.transactions.start()

    def _unknown_partitions(self, partitions: list[TopicPartition]) -> set[TopicPartition]:
        return unknown_partitions(self.client, partitions, self.config.request_timeout_ms)

    def _cached_unknown_partitions(self, partitions: list[TopicPartition]) -> set[TopicPartition] | None:
        return cached_unknown_partitions(self.client, partitions)

    # ------------------------------------------------------------------ ownership → loading

    def _start_loaders(self) -> None:
        groups, transactions, deleted_topics = self.groups, self.transactions, self.deleted_topics

        def complete_group_loading(partition: int) -> None:
            groups.complete_loading(partition)
            deleted_topics.on_partition_loaded(partition)

        group_target = LoadTarget(
            begin_loading=lambda p, owner: groups.begin_loading(p),
            replay=lambda p: lambda key, value, offset, ts: groups.replay(p, key, value, offset, ts),
            complete_loading=complete_group_loading, unload=groups.unload,
            replay_txn=lambda p: lambda key, value, offset, ts, producer_id: groups.replay(
                p, key, value, offset, ts, producer_id),
            replay_marker=lambda p: lambda producer_id, commit, offset: groups.replay_marker(p, producer_id, commit))
        txn_target = LoadTarget(
            begin_loading=lambda p, owner: transactions.begin_loading(p, owner.epoch),
            replay=lambda p: lambda key, value, offset, ts: transactions.replay(p, key, value, offset, ts),
            complete_loading=transactions.complete_loading, unload=transactions.unload)
        self._loaders = {
            GROUP_METADATA_TOPIC: PartitionLoader(self.coordinator_id, self.offsets_log, group_target,
                                                  lambda: self._ensure_topic(GROUP_METADATA_TOPIC)),
            TRANSACTION_STATE_TOPIC: PartitionLoader(self.coordinator_id, self.txn_log, txn_target,
                                                     lambda: self._ensure_topic(TRANSACTION_STATE_TOPIC)),
        }
        for loader in self._loaders.values():
            loader.start()

    def _on_owned(self, owned: OwnedPartitions) -> None:
        """On the ownership thread: hand each topic's loader the partitions it should have."""
        for topic, loader in self._loaders.items():
            loader.set_owned({tp.partition: owner for tp, owner in owned.items() if tp.topic == topic})

    def _ensure_topic(self, topic: str) -> None:
        """Creates an internal topic through the controller when it does not exist yet."""
        if self.client.partitions_for(topic):
            return
        if topic == GROUP_METADATA_TOPIC:
            partitions = self.group_config.offsets_topic_num_partitions
            replication = self.config.offsets_topic_replication_factor
            configs = {"segment.bytes": str(self.config.offsets_topic_segment_bytes)}
        else:
            partitions = self.txn_config.transaction_state_log_num_partitions
            replication = self.txn_config.transaction_state_log_replication_factor
            configs = {"segment.bytes": str(self.txn_config.transaction_state_log_segment_bytes),
                       "min.insync.replicas": str(min(self.txn_config.transaction_state_log_min_isr,
                                                      replication))}
        live_brokers = len(self.zk.get_live_broker_ids())
        if live_brokers < replication:  # as Kafka: creation waits until the cluster is that large
            raise LoadError(f"{topic} needs {replication} live brokers (its replication factor) to be "
                            f"created; {live_brokers} are live")
        new_topic = NewTopic(topic, partitions, replication,
                             configs={"cleanup.policy": "compact", "compression.type": "producer", **configs})
        with Admin({"bootstrap.servers": self.bootstrap, **self._client_security()}) as admin:
            try:
                admin.create_topics([new_topic])
                logger.info("Coordinator %d created %s (%d partitions, replication factor %d)",
                            self.coordinator_id, topic, partitions, replication)
            except KafkaError as exc:
                if exc.code != Errors.TOPIC_ALREADY_EXISTS:
                    raise
            admin.wait_for_topic(topic, timeout_s=30.0)

    # ------------------------------------------------------------------ shutdown

    def _shutdown(self) -> None:
        self._stopping.set()
        for loader in self._loaders.values():
            loader.close()
        if self.ownership is not None:
            self.ownership.close()
        if self.deleted_topics is not None:
            self.deleted_topics.close()
        if self.groups is not None:
            self.groups.shutdown()
        if self.transactions is not None:
            self.transactions.shutdown()
        for closeable in (self.txn_markers, self.offsets_log, self.txn_log):
            if closeable is not None:
                closeable.close()
        self.scheduler.shutdown(timeout_s=5.0)
        self.txn_scheduler.shutdown(timeout_s=5.0)
        self.directory.close()
        if self.metrics is not None:
            self.metrics.close()
        if self.client is not None:
            self.client.close()

    def _close_zookeeper(self) -> None:
        close_session(self.zk_raw)
