"""`CoordinatorServer`: assembles one coordinator process and runs its lifecycle.

Start: the gRPC runtime (CoordinatorService + health), the ZooKeeper session (waiting first for
the session of a previous process with this id to go, see `previous_session`), the coordinator
directory (for FindCoordinator), the brokers' client, the group coordinator with its store
(`OffsetsLog`), then registration and ownership (`OwnershipManager`). The partitions this instance
comes to own are loaded by the loader thread: `__consumer_offsets` is created through the
controller if it does not exist yet (RF = min(offsets.topic.replication.factor, live brokers),
compacted), then each partition is replayed and fenced (see `offsets_log`) before its groups are
served; meanwhile they answer COORDINATOR_LOAD_IN_PROGRESS. A partition that moves away is
unloaded at once: its groups answer NOT_COORDINATOR.

Shutdown (SIGTERM): the groups answer NOT_COORDINATOR, the writer stops, and closing the ZooKeeper
session removes the registration, so the other coordinators take the partitions over at once.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from kazoo.client import KazooClient

from services.clients.admin import Admin
from services.clients.admin_types import NewTopic
from services.clients.lowlevel import LowLevelClient
from services.common.clock import SYSTEM_CLOCK
from services.common.coordinator_lookup import GROUP_METADATA_TOPIC
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2_grpc
from services.common.scheduler import Scheduler
from services.common.service import ServiceRuntime
from services.common.topic_partition import TopicPartition
from services.common.zk import OdradekZkClient
from services.common.zk.client import close_session
from services.common.zk.coordinator_directory import CoordinatorDirectory
from services.common.zk.coordinators import PartitionOwner
from services.coordinator.config import CoordinatorServiceConfig
from services.coordinator.group import GroupCoordinator
from services.coordinator.metrics import CoordinatorMetrics
from services.coordinator.offsets_log import LoadError, OffsetsLog
from services.coordinator.ownership import OwnedPartitions, OwnershipManager
from services.coordinator.servicer import CoordinatorServicer

logger = logging.getLogger(__name__)

LOAD_THREADS = 4
LOAD_RETRY_BACKOFF_S = 1.0


class CoordinatorServer:
    def __init__(self, config: CoordinatorServiceConfig) -> None:
        self.config = config
        self.coordinator_id = config.coordinator_id
        self.group_config = config.group_config()
        self.runtime = ServiceRuntime("coordinator", config.listener.address,
                                      max_workers=config.num_io_threads, metrics_port=config.metrics_port)
        self.zk_raw = KazooClient(hosts=config.zookeeper_connect,
                                  timeout=config.zookeeper_session_timeout_ms / 1000)
        self.zk = OdradekZkClient(self.zk_raw)
        self.directory = CoordinatorDirectory(self.zk)
        self.scheduler = Scheduler(name="group-coordinator-scheduler")
        self.scheduler.startup()
        self.client: LowLevelClient | None = None
        self.offsets_log: OffsetsLog | None = None
        self.groups: GroupCoordinator | None = None
        self.ownership: OwnershipManager | None = None
        self.metrics: CoordinatorMetrics | None = None
        self.endpoint = ""
        self.bootstrap = ""
        self._desired: dict[int, PartitionOwner] = {}
        self._loaded: dict[int, PartitionOwner] = {}
        self._reload: set[int] = set()
        self._state_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._loader: threading.Thread | None = None
        self._topic_ready = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> int:
        self.zk_raw.start(timeout=self.config.connection_timeout_s)
        self.zk.ensure_paths()
        self.zk.await_previous_coordinator_session(self.coordinator_id, self.config.zookeeper_session_timeout_ms)
        self.directory.start()
        bootstrap = self.bootstrap = self.config.bootstrap_servers or self._registered_brokers()
        client_config = {"bootstrap.servers": bootstrap, "request.timeout.ms": self.config.request_timeout_ms,
                         "client.id": f"coordinator-{self.coordinator_id}"}
        self.client = LowLevelClient(client_config)
        self.offsets_log = OffsetsLog(self.client, self.coordinator_id, topic=GROUP_METADATA_TOPIC,
                                      commit_timeout_ms=self.config.offsets_commit_timeout_ms,
                                      load_buffer_bytes=self.config.offsets_load_buffer_size,
                                      compression=self.config.offsets_topic_compression_codec,
                                      on_in_doubt=self._request_reload)
        self.groups = GroupCoordinator(self.group_config, SYSTEM_CLOCK, self.scheduler, self.offsets_log)
        self.groups.start()
        self.metrics = CoordinatorMetrics(self.coordinator_id, self.groups)
        self.runtime.add_servicer(coordinator_pb2_grpc.add_CoordinatorServiceServicer_to_server,
                                  CoordinatorServicer(self.groups, self.directory.snapshot,
                                                      parked_max_requests=self.config.parked_max_requests))
        port = self.runtime.start()
        advertised = self.config.advertised_listener(port)
        self.endpoint = f"{advertised.host}:{advertised.port}"
        partitions = [TopicPartition(GROUP_METADATA_TOPIC, p)
                      for p in range(self.group_config.offsets_topic_num_partitions)]
        self.ownership = OwnershipManager(self.zk_raw, self.zk, self.coordinator_id, self.endpoint, partitions,
                                          self._on_owned)
        self._loader = threading.Thread(target=self._load_loop, name="offsets-loader", daemon=True)
        self._loader.start()
        self.ownership.start()
        self.directory.refresh()
        self.runtime.on_shutdown("coordinator", self._shutdown)
        self.runtime.on_shutdown("close ZooKeeper", self._close_zookeeper)
        self.runtime.set_serving(True)
        logger.info("Coordinator %d serving at %s (brokers %s, ZooKeeper %s)", self.coordinator_id,
                    self.endpoint, bootstrap, self.config.zookeeper_connect)
        return port

    def run(self) -> None:
        self.start()
        self.runtime.run_until_stopped()

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

    # ------------------------------------------------------------------ ownership → loading

    def _on_owned(self, owned: OwnedPartitions) -> None:
        """On the ownership thread: note the wanted set; the loader acts on it."""
        with self._state_lock:
            self._desired = {tp.partition: owner for tp, owner in owned.items()}
        self._wake.set()

    def _request_reload(self, partition: int) -> None:
        with self._state_lock:
            self._reload.add(partition)
        self._wake.set()

    def _load_loop(self) -> None:
        with ThreadPoolExecutor(LOAD_THREADS, thread_name_prefix="offsets-load") as pool:
            while not self._stopping.is_set():
                self._wake.wait(1.0)
                self._wake.clear()
                if self._stopping.is_set():
                    return
                try:
                    self._converge(pool)
                except (KafkaError, LoadError, TimeoutError) as exc:
                    logger.warning("Coordinator %d: loading partitions failed (%s); retrying",
                                   self.coordinator_id, exc)
                    self._stopping.wait(LOAD_RETRY_BACKOFF_S)
                    self._wake.set()
                except Exception:
                    logger.exception("Coordinator %d: loading partitions failed; retrying", self.coordinator_id)
                    self._stopping.wait(LOAD_RETRY_BACKOFF_S)
                    self._wake.set()

    def _converge(self, pool: ThreadPoolExecutor) -> None:
        with self._state_lock:
            desired = dict(self._desired)
            reload, self._reload = self._reload, set()
        for partition, owner in list(self._loaded.items()):
            if desired.get(partition) != owner or partition in reload:
                self._unload(partition)
        wanted = {p: o for p, o in desired.items() if p not in self._loaded}
        if not wanted:
            return
        for partition in wanted:
            self.groups.begin_loading(partition)
        if not self._topic_ready:
            try:
                self._ensure_offsets_topic()
            except BaseException:
                for partition in wanted:
                    self.groups.unload(partition)
                raise
        futures = {p: pool.submit(self._load, p, o) for p, o in sorted(wanted.items())}
        failed = []
        for partition, future in futures.items():
            try:
                future.result()
                self._loaded[partition] = wanted[partition]
            except Exception as exc:
                failed.append(partition)
                logger.warning("Coordinator %d: loading %s-%d failed (%s); retrying", self.coordinator_id,
                               GROUP_METADATA_TOPIC, partition, exc)
        if failed:
            for partition in failed:
                self.groups.unload(partition)
            self._stopping.wait(LOAD_RETRY_BACKOFF_S)
            self._wake.set()

    def _load(self, partition: int, owner: PartitionOwner) -> None:
        started = SYSTEM_CLOCK.monotonic_ms()
        end = self.offsets_log.load(
            partition, owner,
            lambda key, value, offset, timestamp: self.groups.replay(partition, key, value, offset, timestamp),
            lambda key, value, offset, timestamp, producer_id: self.groups.replay(
                partition, key, value, offset, timestamp, producer_id),
            lambda producer_id, commit, offset: self.groups.replay_marker(partition, producer_id, commit))
        self.groups.complete_loading(partition)
        logger.info("Coordinator %d loaded %s-%d (epoch %d) up to offset %d in %d ms", self.coordinator_id,
                    GROUP_METADATA_TOPIC, partition, owner.epoch, end, SYSTEM_CLOCK.monotonic_ms() - started)

    def _unload(self, partition: int) -> None:
        self.offsets_log.release(partition)
        self.groups.unload(partition)
        self._loaded.pop(partition, None)
        logger.info("Coordinator %d unloaded %s-%d", self.coordinator_id, GROUP_METADATA_TOPIC, partition)

    def _ensure_offsets_topic(self) -> None:
        """Creates __consumer_offsets through the controller when it does not exist yet."""
        if self.client.partitions_for(GROUP_METADATA_TOPIC):
            self._topic_ready = True
            return
        live_brokers = len(self.zk.get_live_broker_ids())
        if live_brokers == 0:
            raise LoadError("no live broker to create the offsets topic on")
        replication = min(self.config.offsets_topic_replication_factor, live_brokers)
        topic = NewTopic(GROUP_METADATA_TOPIC, self.group_config.offsets_topic_num_partitions, replication,
                         configs={"cleanup.policy": "compact",
                                  "segment.bytes": str(self.config.offsets_topic_segment_bytes),
                                  "compression.type": "producer"})
        with Admin({"bootstrap.servers": self.bootstrap}) as admin:
            try:
                admin.create_topics([topic])
                logger.info("Coordinator %d created %s (%d partitions, replication factor %d)",
                            self.coordinator_id, GROUP_METADATA_TOPIC, topic.num_partitions, replication)
            except KafkaError as exc:
                if exc.code != Errors.TOPIC_ALREADY_EXISTS:
                    raise
            admin.wait_for_topic(GROUP_METADATA_TOPIC, timeout_s=30.0)
        self._topic_ready = True

    # ------------------------------------------------------------------ shutdown

    def _shutdown(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self.ownership is not None:
            self.ownership.close()
        if self.groups is not None:
            self.groups.shutdown()
        if self.offsets_log is not None:
            self.offsets_log.close()
        self.scheduler.shutdown(timeout_s=5.0)
        self.directory.close()
        if self.metrics is not None:
            self.metrics.close()
        if self.client is not None:
            self.client.close()

    def _close_zookeeper(self) -> None:
        close_session(self.zk_raw)
