"""BrokerServer: assembles one broker process — LogManager, ReplicaManager, metadata cache, the gRPC
servicer, the Kafka protocol listener (`kafka.listeners`, when set), its ZooKeeper registration of
both endpoints — and runs its lifecycle: check the log dirs' `meta.properties` against the broker
id and ZooKeeper's cluster id before loading logs, register on start (once the session
of a previous process with this id is gone, see `previous_session`; and again after a session
expiry), controlled shutdown on SIGTERM, clean log shutdown last.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from kazoo.client import KazooState

from services.broker.config import BrokerConfig
from services.broker.dynamic_config import ConfigChangeListener, DynamicBrokerConfig
from services.broker.fetch_session_cache import FetchSessionCache
from services.broker.kafka_api import BrokerKafkaApis
from services.broker.kafka_api.acls import AclKafkaApis
from services.broker.kafka_api.admin import KafkaAdminApis
from services.broker.kafka_api.scram_users import ScramUserKafkaApis
from services.broker.log.config import LogConfig, LogManagerConfig
from services.broker.log.manager import LogManager
from services.broker.log.meta_properties import check_and_write_meta_properties
from services.broker.metadata_cache import MetadataCache
from services.broker.metrics import BrokerMetrics
from services.broker.replica_manager import ReplicaManager
from services.broker.replication.fetcher import FetcherConfig, ReplicaFetcherManager
from services.broker.replication.isr import IsrManager
from services.broker.replication.leader_endpoint import GrpcLeaderEndpoint
from services.broker.servicer import BrokerServicer
from services.common.clock import SYSTEM_CLOCK
from services.common.errors import Errors, KafkaError
from services.common.kafka_wire import ApiRegistry, KafkaWireServer
from services.common.kafka_wire.security import listener_security
from services.common.pb.odradek.broker.v1 import broker_pb2_grpc
from services.common.pb.odradek.controller.v1 import controller_pb2, controller_pb2_grpc
from services.common.producer_id_manager import ProducerIdManager
from services.common.security.authorizer import node_authorizer
from services.common.security.grpc_credentials import node_password_verifier
from services.common.service import ServiceRuntime, listener_tls, node_channel
from services.common.shared_types import KAFKA_LISTENER_NAME, BrokerInfo, EndPoint
from services.common.topic_partition import TopicPartition
from services.common.zk import OdradekZkClient, PartitionStateZnode
from services.common.zk.client import close_session
from services.common.zk.connect import zk_client
from services.common.zk.coordinator_directory import CoordinatorDirectory

logger = logging.getLogger(__name__)


def use_batch_scheduling() -> None:
    """Puts every thread of this process under SCHED_BATCH (threads started later inherit it): a
    woken thread no longer preempts the running one, which would mostly hand the interpreter lock
    back and forth. Linux only; elsewhere, or when refused, the policy stays as it was."""
    if not hasattr(os, "sched_setscheduler"):
        return
    try:
        threads = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        threads = [0]
    for thread in threads:
        try:
            os.sched_setscheduler(thread, os.SCHED_BATCH, os.sched_param(0))
        except OSError as exc:
            logger.info("cannot use SCHED_BATCH for thread %d: %s", thread, exc)
            return


def fetcher_config(config: BrokerConfig) -> FetcherConfig:
    """The replica fetchers' settings from the broker's (effective) config."""
    return FetcherConfig(replica_id=config.broker_id, max_wait_ms=config.replica_fetch_wait_max_ms,
                         min_bytes=config.replica_fetch_min_bytes,
                         max_bytes=config.replica_fetch_response_max_bytes,
                         partition_max_bytes=config.replica_fetch_max_bytes,
                         backoff_ms=config.replica_fetch_backoff_ms,
                         request_timeout_ms=config.request_timeout_ms)


def _halt() -> None:
    """Ends the process at once, as Kafka's broker does when every log dir is offline."""
    logging.shutdown()
    os._exit(1)


class BrokerServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.tls = listener_tls(config.listener, config)
        self.runtime = ServiceRuntime("broker", config.listener.address, max_workers=config.grpc_worker_threads,
                                      metrics_port=config.metrics_port, tls=self.tls)
        self.zk_raw = zk_client(config.zookeeper_connect, config.zk_tls(),
                                timeout_s=config.zookeeper_session_timeout_ms / 1000)
        self.zk = OdradekZkClient(self.zk_raw)
        self.metadata_cache = MetadataCache()
        self.log_defaults = LogConfig.from_props(config.log_defaults())
        self.log_manager = LogManager(LogManagerConfig.from_mapping(config.as_dict()), self.log_defaults,
                                      initial_task_delay_ms=config.log_initial_task_delay_ms)
        self.dynamic_config = DynamicBrokerConfig(self.broker_id, config,
                                                  self.log_manager.reconfigure_default_log_config,
                                                  self._on_dynamic_config)
        self.config_changes = ConfigChangeListener(self.zk_raw, self.zk, self.dynamic_config,
                                                   self._on_topic_config_change)
        self.replica_manager = ReplicaManager(
            self.broker_id, self.log_manager, self.metadata_cache, topic_config=self._topic_config,
            fetch_sessions=FetchSessionCache(config.max_incremental_fetch_session_cache_slots))
        self._leader_endpoints: dict[int, str] = {}
        for quota in (self.replica_manager.leader_quota, self.replica_manager.follower_quota):
            quota.window_count = config.replication_quota_window_num
            quota.window_size_ms = config.replication_quota_window_size_seconds * 1000
        self._apply_replication_rates(config)
        self.replica_manager.fetcher_manager = ReplicaFetcherManager(
            self.replica_manager,
            fetcher_config(config), self._leader_endpoint, SYSTEM_CLOCK,
            quota=self.replica_manager.follower_quota)
        self.replica_manager.isr_manager = IsrManager(self.replica_manager, self._write_isr,
                                                      self._announce_isr_changes, SYSTEM_CLOCK,
                                                      config.replica_lag_time_max_ms)
        self.coordinator_directory = CoordinatorDirectory(self.zk)
        self.producer_ids = ProducerIdManager(lambda: self.zk.allocate_producer_id_block(self.broker_id))
        self.metrics = BrokerMetrics(self)
        self.cluster_id: str | None = None
        self.broker_epoch = -1  # the czxid of this process's /brokers/ids/<id>; -1 until registered
        self._session_lost = threading.Event()
        self._stopping = threading.Event()
        self._reregister_thread: threading.Thread | None = None
        self.kafka_listener: KafkaWireServer | None = None
        self.kafka_admin: KafkaAdminApis | None = None
        self.kafka_endpoint: EndPoint | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> int:
        # as Kafka's broker: ZooKeeper and the cluster id first, then the log dirs' meta.properties
        # checked against them, and only then are logs loaded
        self.zk_raw.add_listener(self._on_zk_state)
        self.zk_raw.start(timeout=self.config.zookeeper_connection_timeout_ms / 1000)
        try:
            # as Kafka's broker, each waits out a lost connection or an expired session (a
            # broker stopped while it starts comes back to a new session) rather than failing
            self.zk.until_connected(self.zk.ensure_paths)
            self.cluster_id = self.zk.until_connected(self.zk.get_or_create_cluster_id)
            check_and_write_meta_properties(self.log_manager.live_log_dirs, self.broker_id, self.cluster_id)
            # as Kafka's broker: dynamic configs before logs load
            self.zk.until_connected(self.dynamic_config.reload, self.zk)
            self.config_changes.start()
            self.runtime.authorizer = node_authorizer(self.config, self.zk_raw)
            self.runtime.password_verifier = node_password_verifier(self.zk, self.config.listener_plain_jaas_config)
        except Exception:
            # nothing of the log dirs is touched: they may be another broker's or cluster's
            close_session(self.zk_raw)
            raise
        self.log_manager.startup()
        servicer = BrokerServicer(self.broker_id, self.replica_manager, self.metadata_cache,
                                  fetch_max_bytes=self.config.fetch_max_bytes,
                                  auto_create_topic=self._auto_create_topic
                                  if self.config.auto_create_topics_enable else None,
                                  on_live_leaders=self._remember_leaders,
                                  producer_ids=self.producer_ids,
                                  coordinators=self.coordinator_directory.snapshot,
                                  parked_max_requests=self.config.parked_max_requests,
                                  request_timeout_ms=self.config.request_timeout_ms,
                                  broker_epoch=lambda: self.broker_epoch)
        self.runtime.add_servicer(broker_pb2_grpc.add_BrokerServiceServicer_to_server, servicer)
        # read before the first request: a coordinator's write to an internal topic is checked against it
        self.coordinator_directory.start()
        port = self.runtime.start()
        self._start_kafka_listener(servicer)
        self.zk.await_previous_broker_session(self.broker_id, self.config.zookeeper_session_timeout_ms)
        self._register()
        self._reregister_thread = threading.Thread(target=self._reregister_loop, name="zk-reregister",
                                                   daemon=True)
        self._reregister_thread.start()
        for log_dir, reason in self.log_manager.offline_log_dirs().items():
            logger.error("log dir %s is offline: %s", log_dir, reason)
        self.replica_manager.start_log_dir_failure_handler(
            lambda: self.zk.create_log_dir_event_notification(self.broker_id), _halt)
        self.replica_manager.isr_manager.start()
        threading.Thread(target=self._checkpoint_high_watermarks_loop, name="hw-checkpoint", daemon=True).start()
        self.runtime.on_shutdown("controlled shutdown", self.controlled_shutdown)
        self.runtime.on_shutdown("Kafka listener", self._stop_kafka_listener)
        # as Kafka's broker stops taking requests here: a LeaderAndIsr that makes this broker a
        # follower after its controlled shutdown must not start a fetch that re-enters an ISR
        self.runtime.on_shutdown("replica fetchers", self.replica_manager.stop_fetching)
        self.runtime.on_shutdown("close ZooKeeper", self._close_zookeeper)
        self.runtime.on_shutdown("replica manager", self.replica_manager.shutdown)
        self.runtime.on_shutdown("log manager", self.log_manager.shutdown)
        self.runtime.on_shutdown("metrics", self.metrics.close)
        self.runtime.set_serving(True)
        return port

    def run(self) -> None:
        """The broker process's main: serve until SIGTERM."""
        if self.config.sched_batch_enable:
            use_batch_scheduling()
        self.start()
        self.runtime.run_until_stopped()

    def _start_kafka_listener(self, servicer: BrokerServicer) -> None:
        """Serves Kafka's protocol on the runtime's event loop, beside gRPC, from the same request
        handling as the servicer's."""
        listener = self.config.kafka_listener
        if listener is None:
            return
        registry = ApiRegistry()
        security = listener_security(self.config, self.zk, self.runtime.authorizer)
        AclKafkaApis(security.authorizer).register(registry)
        ScramUserKafkaApis(self.zk).register(registry)
        registry.accepts_envelopes = True  # the coordinators forward their clients' requests
        self.kafka_admin = KafkaAdminApis(self.broker_id, self.metadata_cache, self.replica_manager,
                                          self.config, self.dynamic_config)
        BrokerKafkaApis(self.broker_id, servicer.handling, self.kafka_admin,
                        coordinators=self.coordinator_directory.snapshot).register(registry)
        self.kafka_listener = KafkaWireServer(registry, listener.host, listener.port,
                                              request_max_bytes=self.config.socket_request_max_bytes,
                                              listen_backlog=self.config.socket_listen_backlog_size,
                                              security=security)
        bound = self.runtime.call_on_loop(self.kafka_listener.start())
        advertised = self.config.kafka_advertised_listener(bound)
        self.kafka_endpoint = EndPoint(advertised.host, advertised.port, KAFKA_LISTENER_NAME, security.protocol)

    def _stop_kafka_listener(self) -> None:
        if self.kafka_listener is not None:
            self.runtime.call_on_loop(self.kafka_listener.stop())
        if self.kafka_admin is not None:
            self.kafka_admin.close()

    def _register(self) -> None:
        listener = self.config.advertised_listener
        endpoints = (EndPoint(listener.host, listener.port),)
        if self.kafka_endpoint is not None:
            endpoints += (self.kafka_endpoint,)
        info = BrokerInfo(self.broker_id, endpoints,
                          rack=self.config.broker_rack, timestamp_ms=int(time.time() * 1000))
        self.broker_epoch = self.zk.register_broker(info)
        logger.info("registered broker %d at %s:%d (epoch %d)", self.broker_id, listener.host,
                    listener.port, self.broker_epoch)

    def _on_zk_state(self, state) -> None:
        # kazoo's callback thread: only note the event, the re-register loop acts on it
        if state == KazooState.LOST:
            self._session_lost.set()

    def _reregister_loop(self) -> None:
        while not self._stopping.is_set():
            if not self._session_lost.wait(0.5):
                continue
            if self._stopping.is_set():
                return
            try:
                if self.zk_raw.connected:
                    self._register()
                    self._session_lost.clear()
            except Exception:
                logger.exception("re-registering broker %d failed; retrying", self.broker_id)
                self._stopping.wait(1.0)

    def _close_zookeeper(self) -> None:
        self.config_changes.stop()
        self.coordinator_directory.close()
        self._stopping.set()
        self._session_lost.set()
        close_session(self.zk_raw)

    # ------------------------------------------------------------------ replication

    def _remember_leaders(self, nodes) -> None:
        for node in nodes:
            self._leader_endpoints[node.node_id] = f"{node.host}:{node.port}"

    def _leader_endpoint(self, leader_id: int) -> GrpcLeaderEndpoint:
        target = self._leader_endpoints.get(leader_id)
        if target is None:
            node = self.metadata_cache.snapshot().brokers.get(leader_id)
            if node is not None:
                target = f"{node.host}:{node.port}"
        if target is None:
            registered = self.zk.get_broker(leader_id)
            endpoint = registered.endpoint() if registered is not None else None
            if endpoint is None:
                raise KafkaError(f"leader {leader_id} has no known endpoint", error=Errors.LEADER_NOT_AVAILABLE)
            target = f"{endpoint.host or '127.0.0.1'}:{endpoint.port}"
        return GrpcLeaderEndpoint(target, self.config.request_timeout_ms, self.tls)

    def _write_isr(self, partition, new_isr: tuple[int, ...]) -> int | None:
        """The leader's ISR change, conditional on the partition state znode's version."""
        state = PartitionStateZnode(leader=self.broker_id, leader_epoch=partition.leader_epoch, isr=tuple(new_isr),
                               controller_epoch=partition.controller_epoch)
        result = self.zk.update_leader_and_isr(TopicPartition(partition.topic, partition.partition), state,
                                               partition.zk_version)
        return result.version if result.succeeded else None

    def _announce_isr_changes(self, partitions) -> None:
        self.zk.create_isr_change_notification([TopicPartition(t, p) for t, p in sorted(partitions)])

    def _checkpoint_high_watermarks_loop(self) -> None:
        interval_s = self.config.replica_high_watermark_checkpoint_interval_ms / 1000
        while not self._stopping.wait(interval_s):
            self.replica_manager.checkpoint_high_watermarks()

    # ------------------------------------------------------------------ controller calls

    def _controller_stub(self):
        info = self.zk.get_controller()
        if info is None or not info.endpoint:
            raise KafkaError("no active controller", error=Errors.NOT_CONTROLLER)
        return controller_pb2_grpc.ControllerServiceStub(node_channel(info.endpoint, self.tls))

    def controlled_shutdown(self) -> None:
        """Asks the controller to move leadership away, as Kafka's broker does before it exits."""
        if not self.config.controlled_shutdown_enable or not self.zk_raw.connected:
            return
        for attempt in range(1, self.config.controlled_shutdown_max_retries + 1):
            try:
                reply = self._controller_stub().ControlledShutdown(
                    controller_pb2.ControlledShutdownRequest(broker_id=self.broker_id,
                                                             broker_epoch=self.broker_epoch),
                    timeout=self.config.request_timeout_ms / 1000)
                if reply.error_code == Errors.NONE and not reply.remaining_partitions:
                    logger.info("controlled shutdown of broker %d succeeded", self.broker_id)
                    return
                logger.info("controlled shutdown attempt %d: error %d, %d partitions remain", attempt,
                            reply.error_code, len(reply.remaining_partitions))
            except Exception as exc:
                logger.warning("controlled shutdown attempt %d failed: %s", attempt, exc)
            threading.Event().wait(self.config.controlled_shutdown_retry_backoff_ms / 1000)
        logger.warning("controlled shutdown of broker %d did not complete; shutting down anyway",
                       self.broker_id)

    def _auto_create_topic(self, topic: str) -> None:
        request = controller_pb2.CreateTopicsRequest(timeout_ms=5000)
        request.topics.add(name=topic, num_partitions=self.config.num_partitions,
                           replication_factor=self.config.default_replication_factor)
        reply = self._controller_stub().CreateTopics(request, timeout=5)
        for result in reply.topics:
            if result.error_code:
                raise KafkaError.from_code(result.error_code, result.error_message)
        if reply.error_code:
            raise KafkaError.from_code(reply.error_code, reply.error_message)

    def _apply_replication_rates(self, config: BrokerConfig) -> None:
        self.replica_manager.leader_quota.update_rate(config.leader_replication_throttled_rate)
        self.replica_manager.follower_quota.update_rate(config.follower_replication_throttled_rate)

    def _on_dynamic_config(self, config: BrokerConfig) -> None:
        self._apply_replication_rates(config)
        fetchers = self.replica_manager.fetcher_manager
        if fetchers is not None and fetchers.config != fetcher_config(config):
            fetchers.reconfigure(fetcher_config(config))

    def _on_topic_config_change(self, topic: str) -> None:
        """A topic's overrides changed: logs of it hosted here follow them at once, and its
        replication throttles here change (even before a replica of it is hosted)."""
        config = self._topic_config(topic)
        if self.log_manager.logs_by_topic(topic):
            self.log_manager.update_topic_config(topic, config)
        self.replica_manager.update_replication_throttles(topic, config)

    def _topic_config(self, topic: str) -> dict[str, str]:
        """A topic's overrides, read again after each ZooKeeper connection loss: a log is never
        made, nor left, with the broker's defaults because a read failed (a compacted topic would
        be deleted by retention). A malformed config raises."""
        return dict(self.zk.until_connected(self.zk.get_topic_config, topic) or {})
