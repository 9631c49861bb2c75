"""`ZookeeperConsumerConnector`: Kafka 0.8's high-level consumer, coordinated through ZooKeeper.

    connector = ZookeeperConsumerConnector({"zookeeper.connect": "127.0.0.1:2181", "group.id": "g"})
    streams = connector.create_message_streams({"clicks": 2})["clicks"]
    for message in streams[0]:          # one thread per stream, as in 0.8
        handle(message.message)
    connector.shutdown()

Streams are created once per connector (`create_message_streams` with {topic: streams}, or
`create_message_streams_by_filter` with a Whitelist/Blacklist and a stream count); each thread id
gets one bounded queue. The member registers `/consumers/<group>/ids/<consumer id>` and then
rebalances. A rebalance (one at a time, `rebalance.max.retries` attempts `rebalance.backoff.ms`
apart, else ConsumerRebalanceFailedError) stops the fetchers, drops queued chunks, commits the
consumed offsets when auto-commit is on, releases the partitions it owned, plans (with
`partition.assignment.strategy`) and claims the new assignment (`rebalance`), reads its committed
offsets once claimed (a previous owner commits before it releases, so that commit is seen) and
restarts the fetchers (`fetcher`). Offsets live where `offsets.storage` says: ZooKeeper's
`/consumers/<group>/offsets/<topic>/<partition>`, or the group coordinator, with
`dual.commit.enabled` in both (`offset_storage`); the coordinator is reached with an admin client
made from the brokers in `/brokers/ids` when first needed. A listener set with
`set_consumer_rebalance_listener` before the streams are created is called before the release
and before the fetchers restart (`listener`).

Rebalances after the first run on the `<consumer id>-rebalance` thread, driven by ZooKeeper
watches that only enqueue an event: the member list changed, a subscribed topic's partitions
changed, a topic appeared (wildcard subscriptions), brokers appeared (when there were none), or
the session expired (the member re-registers first; its ephemeral ownership went with the old
session). Brokers are found in `/brokers/ids`; leaders come from their metadata.

`commit_offsets()` commits each owned partition's consumed offset (the next offset not yet handed
out); with `auto.commit.enable` it also runs every `auto.commit.interval.ms`. Streams may decode
keys and values (`key_decoder`, `value_decoder`; see `stream`). `shutdown()` stops fetching,
commits (with auto-commit; a commit Kafka refused is logged as lost to this shutdown), releases
ownership, deletes the registration, ends every stream's iteration and closes the ZooKeeper session.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from kazoo.client import KazooState

from services.clients.admin import Admin
from services.clients.lowlevel import LowLevelClient
from services.clients.zk_consumer.config import ZkConsumerConfig
from services.clients.zk_consumer.errors import ConsumerRebalanceFailedError, MessageStreamsExistError
from services.clients.zk_consumer.fetcher import ConsumerFetcherManager
from services.clients.zk_consumer.listener import ConsumerRebalanceListener, assignment_by_topic, ownership_by_topic
from services.clients.zk_consumer.offset_storage import KAFKA, KafkaOffsets, OffsetStorage, ZooKeeperOffsets
from services.clients.zk_consumer.rebalance import RebalanceWatches, claim_ownership, plan_assignment
from services.clients.zk_consumer.stream import INVALID_OFFSET, SHUTDOWN, Decoder, KafkaStream, PartitionTopicInfo
from services.clients.zk_consumer.topic_count import (
    ConsumerThreadId,
    StaticTopicCount,
    TopicCount,
    TopicFilter,
    WildcardTopicCount,
    consumer_id_string,
)
from services.common.scheduler import Scheduler
from services.common.topic_partition import TopicPartition
from services.common.zk import OdradekZkClient, ZkEvent, enqueue_watch
from services.common.zk.client import close_session
from services.common.zk.connect import zk_client

logger = logging.getLogger(__name__)
SESSION_EXPIRED = "session_expired"
_STOP = ZkEvent("stop", "NONE", "")
THREAD_JOIN_TIMEOUT_S = 15.0


class ZookeeperConsumerConnector:
    def __init__(self, config: Mapping[str, Any] | ZkConsumerConfig | None = None, **overrides: Any):
        if isinstance(config, ZkConsumerConfig):
            self.config = config
        else:
            self.config = ZkConsumerConfig.load(dict(config or {}), env={}, **overrides)
        self.group = self.config.group_id
        self.consumer_id = consumer_id_string(self.group, self.config.consumer_id)
        self._zk_raw = zk_client(self.config.zookeeper_connect, self.config.zk_tls(),
                                 timeout_s=self.config.zookeeper_session_timeout_ms / 1000)
        self._zk_raw.add_listener(self._on_zk_state)
        try:
            self._zk_raw.start(timeout=self.config.zookeeper_connection_timeout_ms / 1000)
        except Exception:
            close_session(self._zk_raw)  # kazoo would keep trying in the background
            raise
        self.zk = OdradekZkClient(self._zk_raw)
        self.fetcher = ConsumerFetcherManager(self.consumer_id, self.config)
        self._client: LowLevelClient | None = None
        self._offsets_client: Admin | None = None
        self._offsets_client_lock = threading.Lock()
        self._events: queue.Queue[ZkEvent] = queue.Queue()
        self._watches = RebalanceWatches(enqueue_watch(self._events, "members"),
                                         enqueue_watch(self._events, "topic_data"), None)
        self._brokers_watch = enqueue_watch(self._events, "brokers")
        self._rebalance_lock = threading.RLock()
        self._commit_lock = threading.Lock()
        self._shutting_down = threading.Event()
        self._topic_count: TopicCount | None = None
        self._listener: ConsumerRebalanceListener | None = None
        self._queues: dict[tuple[str | None, int], queue.Queue] = {}
        self._streams: list[KafkaStream] = []
        self._topic_registry: dict[TopicPartition, PartitionTopicInfo] = {}
        self._offsets = self._offset_storage()
        self._rebalance_thread: threading.Thread | None = None
        self.rebalance_error: Exception | None = None
        self.rebalance_count = 0
        self._scheduler: Scheduler | None = None
        if self.config.auto_commit_enable:
            self._scheduler = Scheduler(name=f"kafka-consumer-scheduler-{self.consumer_id}")
            self._scheduler.startup()
            interval = self.config.auto_commit_interval_ms
            self._scheduler.schedule(interval, self._auto_commit, period_ms=interval,
                                     name="kafka-consumer-autocommit")

    # ------------------------------------------------------------------------------ streams

    def create_message_streams(self, streams_per_topic: Mapping[str, int], key_decoder: Decoder | None = None,
                               value_decoder: Decoder | None = None) -> dict[str, list[KafkaStream]]:
        """{topic: [KafkaStream] * n} for {topic: n}; allowed once per connector. The decoders
        (bytes -> object) turn keys and values as they are handed out; bytes by default."""
        if streams_per_topic is None:
            raise ValueError("create_message_streams needs a {topic: number of streams} map")
        count = StaticTopicCount(self.consumer_id, dict(streams_per_topic))
        decoders = (key_decoder, value_decoder)
        by_topic = {topic: [self._new_stream((topic, thread.thread_number), thread, *decoders) for thread in threads]
                    for topic, threads in self._claim_topic_count(count).items()}
        self._start()
        return by_topic

    def create_message_streams_by_filter(self, topic_filter: TopicFilter, num_streams: int = 1,
                                         key_decoder: Decoder | None = None,
                                         value_decoder: Decoder | None = None) -> list[KafkaStream]:
        """`num_streams` streams shared by every topic the filter allows, now or later (decoders as
        `create_message_streams`)."""
        count = WildcardTopicCount(self.consumer_id, topic_filter, num_streams, self.config.exclude_internal_topics)
        self._claim_topic_count(count)
        self._watches = RebalanceWatches(self._watches.members, self._watches.topic_data,
                                         enqueue_watch(self._events, "topic_list"))
        streams = [self._new_stream((None, n), ConsumerThreadId(self.consumer_id, n), key_decoder, value_decoder)
                   for n in range(num_streams)]
        self._start()
        return streams

    def set_consumer_rebalance_listener(self, listener: ConsumerRebalanceListener | None) -> None:
        """Called in every rebalance from now on; allowed only before the streams are created."""
        with self._rebalance_lock:
            if self._topic_count is not None:
                raise MessageStreamsExistError(
                    f"{self.consumer_id} can set a rebalance listener only before creating its message streams")
            self._listener = listener

    def _claim_topic_count(self, count: TopicCount) -> dict[str, list[ConsumerThreadId]]:
        with self._rebalance_lock:
            if self._topic_count is not None:
                raise MessageStreamsExistError(f"{self.consumer_id} already created its message streams")
            threads = count.thread_ids_per_topic()
            self._topic_count = count
            return threads

    def _new_stream(self, key: tuple[str | None, int], thread: ConsumerThreadId, key_decoder: Decoder | None,
                    value_decoder: Decoder | None) -> KafkaStream:
        chunk_queue: queue.Queue = queue.Queue(self.config.queued_max_message_chunks)
        self._queues[key] = chunk_queue
        stream = KafkaStream(chunk_queue, self.config.consumer_timeout_ms, str(thread), key_decoder, value_decoder)
        self._streams.append(stream)
        return stream

    def _queue_for(self, tp: TopicPartition, thread: ConsumerThreadId) -> queue.Queue:
        return self._queues.get((tp.topic, thread.thread_number)) or self._queues[(None, thread.thread_number)]

    def _start(self) -> None:
        self._register()
        self._synced_rebalance()
        self._rebalance_thread = threading.Thread(target=self._rebalance_loop, daemon=True,
                                                  name=f"{self.consumer_id}-rebalance")
        self._rebalance_thread.start()

    def _register(self) -> None:
        count = self._topic_count
        self.zk.register_legacy_consumer(self.group, self.consumer_id, count.subscription(), count.pattern)

    # ------------------------------------------------------------------------------ rebalancing

    def _on_zk_state(self, state: str) -> None:
        # kazoo's thread: only note the event
        if state == KazooState.LOST and not self._shutting_down.is_set():
            self._events.put_nowait(ZkEvent(SESSION_EXPIRED, "NONE", ""))

    def _rebalance_loop(self) -> None:
        while not self._shutting_down.is_set():
            events = [self._events.get()]
            while not self._events.empty():
                events.append(self._events.get_nowait())
            if _STOP in events or self._shutting_down.is_set():
                return
            try:
                if any(e.kind == SESSION_EXPIRED for e in events):
                    self._handle_new_session()
                self._synced_rebalance()
                self.rebalance_error = None
            except Exception as exc:  # noqa: BLE001 - the next watch event tries again
                logger.exception("%s: rebalance failed", self.consumer_id)
                self.rebalance_error = exc

    def _handle_new_session(self) -> None:
        """The old session's ephemeral znodes are gone: forget ownership, register again."""
        logger.info("%s: ZooKeeper session expired; registering again", self.consumer_id)
        with self._rebalance_lock:
            self._close_fetchers()
            self._topic_registry = {}
            while not self._shutting_down.is_set():
                try:
                    self._register()
                    return
                except Exception as exc:  # noqa: BLE001 - retried until the new session is up
                    logger.info("%s: registration failed (%s); retrying", self.consumer_id, exc)
                    self._shutting_down.wait(self.config.rebalance_backoff_ms / 1000 or 0.1)

    def _synced_rebalance(self) -> None:
        with self._rebalance_lock:
            last_error: Exception | None = None
            for attempt in range(self.config.rebalance_max_retries):
                if self._shutting_down.is_set():
                    return
                try:
                    if self._rebalance():
                        self.rebalance_count += 1
                        return
                    last_error = None
                except Exception as exc:  # noqa: BLE001 - ZooKeeper, broker or listener trouble: retried
                    logger.exception("%s: rebalance attempt %d failed", self.consumer_id, attempt + 1)
                    last_error = exc
                self._close_fetchers()
                self._release_ownership()
                self._shutting_down.wait(self.config.rebalance_backoff_ms / 1000)
            cause = f": {last_error}" if last_error is not None else " (partitions still owned by other threads)"
            raise ConsumerRebalanceFailedError(
                f"{self.consumer_id} can't rebalance after {self.config.rebalance_max_retries} retries{cause}",
            ) from last_error

    def _rebalance(self) -> bool:
        brokers = self.zk.get_all_brokers()
        if not brokers:
            logger.warning("%s: no broker is registered; waiting for one", self.consumer_id)
            self.zk.get_live_broker_ids(self._brokers_watch)
            return True
        client = self._broker_client(brokers)
        self._close_fetchers()
        if self._listener is not None:
            self._listener.before_releasing_partitions(ownership_by_topic(self._topic_registry))
        self._release_ownership()
        plan = plan_assignment(self.zk, self.group, self._topic_count, self._watches,
                               self.config.exclude_internal_topics, self.config.partition_assignment_strategy)
        if self._shutting_down.is_set() or not claim_ownership(self.zk, self.group, plan.mine):
            return False
        try:  # read once owned: a previous owner commits before it releases, so this is its last commit
            offsets = self._offsets.fetch(list(plan.mine))
        except Exception:
            self._release(plan.mine)
            raise
        if offsets is None:  # shutting down while the coordinator did not answer
            self._release(plan.mine)
            return False
        infos = {tp: self._partition_info(tp, thread, offsets.get(tp, INVALID_OFFSET))
                 for tp, thread in plan.mine.items()}
        logger.info("%s: owns %d partitions: %s", self.consumer_id, len(infos),
                    {str(tp): str(t) for tp, t in sorted(plan.mine.items())})
        with self._commit_lock:
            self._topic_registry = infos  # owned from here: a failure below releases these
        if self._listener is not None:
            self._listener.before_starting_fetchers(self.consumer_id, assignment_by_topic(plan.group))
        self.fetcher.start_connections(infos.values(), client)
        return True

    def _partition_info(self, tp: TopicPartition, thread: ConsumerThreadId, offset: int) -> PartitionTopicInfo:
        return PartitionTopicInfo(tp, self._queue_for(tp, thread), offset, offset,
                                  self.config.fetch_message_max_bytes)

    def _broker_client(self, brokers: Mapping) -> LowLevelClient:
        if self._client is None:
            self._client = LowLevelClient(
                bootstrap_servers=_addresses(brokers), client_id=self.config.client_id or self.group,
                request_timeout_ms=self.config.socket_timeout_ms,
                retry_backoff_ms=self.config.refresh_leader_backoff_ms,
                default_api_timeout_ms=self.config.socket_timeout_ms)
        return self._client

    def _offset_storage(self) -> OffsetStorage:
        config = self.config
        kafka = None
        if config.offsets_storage == KAFKA:
            kafka = KafkaOffsets(self._group_offsets_client, self.group, config.offsets_channel_socket_timeout_ms)
        return OffsetStorage(ZooKeeperOffsets(self.zk, self.group), kafka, dual_commit=config.dual_commit_enabled,
                             commit_max_retries=config.offsets_commit_max_retries,
                             backoff_ms=config.offsets_channel_backoff_ms, stopped=self._shutting_down.is_set)

    def _group_offsets_client(self) -> Admin:
        """The admin client that reaches the group coordinator, made from the live brokers."""
        with self._offsets_client_lock:
            if self._offsets_client is None:
                timeout_ms = self.config.offsets_channel_socket_timeout_ms
                self._offsets_client = Admin(
                    bootstrap_servers=_addresses(self.zk.get_all_brokers()),
                    client_id=self.config.client_id or self.group, request_timeout_ms=timeout_ms,
                    default_api_timeout_ms=timeout_ms, retry_backoff_ms=self.config.offsets_channel_backoff_ms)
            return self._offsets_client

    def _close_fetchers(self) -> bool:
        """Stops fetching and drops what is queued, so released partitions are not consumed twice;
        then commits (with auto-commit) the offsets consumed so far. False if that commit failed."""
        self.fetcher.stop_connections()
        for info in self._topic_registry.values():
            info.revoke()
        for chunk_queue in self._queues.values():
            _drain(chunk_queue)
        for stream in self._streams:
            stream.clear()
        if not self.config.auto_commit_enable:
            return True
        try:
            return self.commit_offsets()
        except Exception:  # noqa: BLE001 - the offsets stay uncommitted: consumed again, never lost
            logger.exception("%s: committing offsets failed", self.consumer_id)
            return False

    def _release_ownership(self) -> None:
        self._release(self._topic_registry)
        with self._commit_lock:
            self._topic_registry = {}

    def _release(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.zk.release_partition(self.group, tp)

    # ------------------------------------------------------------------------------ offsets

    def commit_offsets(self, retry_on_failure: bool = True) -> bool:
        """Commits each owned partition's consumed offset per `offsets.storage`; False when Kafka
        refused it on every attempt (`offsets.commit.max.retries` retries unless `retry_on_failure`
        is False). ZooKeeper errors raise."""
        with self._commit_lock:
            consumed = {tp: info.consumed_offset for tp, info in self._topic_registry.items()
                        if info.consumed_offset >= 0}
            return self._offsets.commit(consumed, retry_on_failure)

    def _auto_commit(self) -> None:
        if not self._shutting_down.is_set():
            self.commit_offsets(retry_on_failure=False)

    def owned_partitions(self) -> dict[TopicPartition, int]:
        """{partition: consumed offset} of what this member owns now."""
        with self._commit_lock:
            return {tp: info.consumed_offset for tp, info in self._topic_registry.items()}

    # ------------------------------------------------------------------------------ shutdown

    def shutdown(self) -> None:
        if self._shutting_down.is_set():
            return
        self._shutting_down.set()
        if self._scheduler is not None:
            self._scheduler.shutdown()
        self._events.put_nowait(_STOP)
        if self._rebalance_thread is not None:
            self._rebalance_thread.join(THREAD_JOIN_TIMEOUT_S)
        with self._rebalance_lock:
            try:
                if not self._close_fetchers():
                    logger.error("%s: shutting down without committing the offsets consumed since the last "
                                 "commit; they will be consumed again", self.consumer_id)
                self._release_ownership()
                if self._topic_count is not None:
                    self.zk.delete_legacy_consumer(self.group, self.consumer_id)
            except Exception:  # noqa: BLE001 - the session's end removes the ephemeral znodes anyway
                logger.exception("%s: cleaning up in ZooKeeper failed", self.consumer_id)
            for chunk_queue in self._queues.values():
                _drain(chunk_queue)
                chunk_queue.put_nowait(SHUTDOWN)
        close_session(self._zk_raw)
        for client in (self._client, self._offsets_client):
            if client is not None:
                client.close()

    def __enter__(self) -> ZookeeperConsumerConnector:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()


def _addresses(brokers: Mapping) -> list[str]:
    return [f"{e.host or '127.0.0.1'}:{e.port}" for b in brokers.values() for e in b.endpoints[:1]]


def _drain(chunk_queue: queue.Queue) -> None:
    while True:
        try:
            chunk_queue.get_nowait()
        except queue.Empty:
            return
