"""The 0.8 ZooKeeper consumer's fetching, as Kafka 0.8's ConsumerFetcherManager: a leader finder
thread and fetcher threads that fill the streams' queues.

`start_connections(infos, client)` puts every owned partition in the no-leader set. The leader
finder thread (`<consumer id>-leader-finder-thread`) waits for that set to be non-empty, refreshes
cluster metadata for those topics, hands each partition with a leader to the fetcher thread of
(leader, fetcher id), where fetcher id = abs(31 * hashCode(topic) + partition) % num.consumer.fetchers,
stops fetcher threads left with no partition, and sleeps `refresh.leader.backoff.ms`.

A `ConsumerFetcherThread` (`ConsumerFetcherThread-<consumer id>-<fetcher id>-<broker id>`) sends
one Fetch for all its partitions to its broker (`fetch.wait.max.ms`, `fetch.min.bytes`, at most
`fetch.message.max.bytes` per partition and 50 MiB in all, partitions that last returned data
asked for last) and processes a partition only if its fetch offset is still the one requested:
records go to the stream queue (`stream.enqueue`), OFFSET_OUT_OF_RANGE
(and a partition without a valid committed offset) resets the offset to the log start or end per
`auto.offset.reset`, and any other error, or a failed call, hands the partition back to the
leader finder. `stop_connections()` stops every thread and forgets the partitions.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left
from collections.abc import Iterable

from services.clients.cluster import Node
from services.clients.lowlevel import LowLevelClient
from services.clients.partition_requests import fetch_request, parse_fetch
from services.clients.transport import BROKER
from services.clients.zk_consumer.config import SMALLEST, ZkConsumerConfig
from services.clients.zk_consumer.stream import PartitionTopicInfo, enqueue
from services.common.errors import Errors, KafkaError
from services.common.hashing import java_string_hashcode, kafka_abs
from services.common.records.batch import next_offset_after
from services.common.records.reader import decode_columns
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)
THREAD_JOIN_TIMEOUT_S = 10.0
FETCH_RESPONSE_MAX_BYTES = 50 * 1024 * 1024  # Kafka's fetch.max.bytes default: one answer stays well under gRPC's bound
_INT32 = 2**32


def fetcher_id(tp: TopicPartition, num_fetchers: int) -> int:
    h = (31 * java_string_hashcode(tp.topic) + tp.partition) % _INT32
    signed = h - _INT32 if h >= 2**31 else h
    return kafka_abs(signed) % num_fetchers


def decode_chunk(data: bytes, fetch_offset: int) -> tuple[list[tuple], int]:
    """(records at or after `fetch_offset` as `(offset, key, value, timestamp)` tuples, control
    records left out; the next offset to fetch). Decoded column by column by the record reader."""
    columns = decode_columns(data)
    start = bisect_left(columns.offsets, fetch_offset)
    records = list(zip(columns.offsets[start:], columns.keys[start:], columns.values[start:],
                       columns.timestamps[start:], strict=True))
    return records, max(fetch_offset, next_offset_after(data) or fetch_offset)


class ConsumerFetcherThread(threading.Thread):
    def __init__(self, manager: ConsumerFetcherManager, node: Node, fetcher_number: int):
        super().__init__(name=f"ConsumerFetcherThread-{manager.consumer_id}-{fetcher_number}-{node.node_id}",
                         daemon=True)
        self.manager = manager
        self.node = node
        self.config = manager.config
        self.stop_event = threading.Event()
        self._lock = threading.Lock()
        self._partitions: dict[TopicPartition, PartitionTopicInfo] = {}

    def add_partitions(self, infos: Iterable[PartitionTopicInfo]) -> None:
        with self._lock:
            self._partitions.update((info.tp, info) for info in infos)

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                self._partitions.pop(tp, None)

    @property
    def partitions(self) -> list[TopicPartition]:
        with self._lock:
            return list(self._partitions)

    @property
    def partition_count(self) -> int:
        with self._lock:
            return len(self._partitions)

    def shutdown(self) -> None:
        self.stop_event.set()

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.do_work()
            except Exception:  # noqa: BLE001 - a fetcher thread outlives any one bad answer
                logger.exception("%s: fetch round failed", self.name)
                self.stop_event.wait(self.config.refresh_leader_backoff_ms / 1000)

    def do_work(self) -> None:
        with self._lock:
            infos = {tp: info for tp, info in self._partitions.items() if not info.revoked}
        for tp, info in infos.items():
            if info.fetched_offset < 0:
                self._reset_offset(tp, info)
        positions = {tp: info.fetched_offset for tp, info in infos.items() if info.fetched_offset >= 0}
        if not positions:
            self.stop_event.wait(self.config.refresh_leader_backoff_ms / 1000)
            return
        try:
            parsed = parse_fetch(self._fetch(positions))
        except KafkaError as error:
            logger.info("%s: fetch from %s failed: %s", self.name, self.node, error)
            self._back_to_leader_finder(positions)
            return
        errored = []
        for tp, (code, result) in parsed.items():
            info = infos.get(tp)
            if info is None or tp not in positions or info.fetched_offset != positions[tp]:
                continue
            if code == Errors.NONE:
                records, next_offset = decode_chunk(result.records, positions[tp])
                enqueue(info, records, positions[tp], next_offset, len(result.records), self.stop_event)
                if records:
                    self._move_to_end(tp)
            elif code == Errors.OFFSET_OUT_OF_RANGE:
                self._reset_offset(tp, info)
            else:
                errored.append(tp)
        if errored:
            self._back_to_leader_finder(errored)

    def _move_to_end(self, tp: TopicPartition) -> None:
        """A partition that returned data is asked for last next time, so that a response bounded by
        FETCH_RESPONSE_MAX_BYTES does not always fill up with the same partitions."""
        with self._lock:
            info = self._partitions.pop(tp, None)
            if info is not None:
                self._partitions[tp] = info

    def _fetch(self, positions: dict[TopicPartition, int]):
        max_bytes = self.config.fetch_message_max_bytes
        request = fetch_request(positions, partition_max_bytes=max_bytes, max_wait_ms=self.config.fetch_wait_max_ms,
                                min_bytes=self.config.fetch_min_bytes,
                                max_bytes=min(max_bytes * len(positions), FETCH_RESPONSE_MAX_BYTES))
        timeout_ms = self.config.socket_timeout_ms + self.config.fetch_wait_max_ms
        return self.manager.client.pool.call(self.node.address, BROKER, "Fetch", request, timeout_ms)

    def _reset_offset(self, tp: TopicPartition, info: PartitionTopicInfo) -> None:
        """Kafka 0.8's handleOffsetOutOfRange: the log start (smallest) or end (largest)."""
        spec = "earliest" if self.config.auto_offset_reset == SMALLEST else "latest"
        result = self.manager.client.list_offset(tp.topic, tp.partition, spec,
                                                 retry_timeout_ms=self.config.socket_timeout_ms)
        if result.error_code != Errors.NONE:
            logger.info("%s: cannot look up the %s offset of %s: %s", self.name, spec, tp,
                        Errors(result.error_code).name)
            self._back_to_leader_finder([tp])
            return
        logger.info("%s: %s resets from offset %d to %s offset %d", self.name, tp, info.fetched_offset,
                    spec, result.offset)
        info.reset_offsets(result.offset)

    def _back_to_leader_finder(self, tps: Iterable[TopicPartition]) -> None:
        tps = list(tps)
        self.remove_partitions(tps)
        self.manager.add_partitions_with_error(tps)
        self.stop_event.wait(self.config.refresh_leader_backoff_ms / 1000)


class ConsumerFetcherManager:
    def __init__(self, consumer_id: str, config: ZkConsumerConfig):
        self.consumer_id = consumer_id
        self.config = config
        self.client: LowLevelClient | None = None
        self._cond = threading.Condition()
        self._partition_map: dict[TopicPartition, PartitionTopicInfo] = {}
        self._no_leader: set[TopicPartition] = set()
        self._fetchers: dict[tuple[int, int], ConsumerFetcherThread] = {}
        self._leader_finder: threading.Thread | None = None
        self._stop = threading.Event()

    def start_connections(self, infos: Iterable[PartitionTopicInfo], client: LowLevelClient) -> None:
        self.client = client
        self._stop = threading.Event()
        with self._cond:
            self._partition_map = {info.tp: info for info in infos}
            self._no_leader = set(self._partition_map)
            self._cond.notify_all()
        self._leader_finder = threading.Thread(target=self._find_leaders_loop, daemon=True,
                                               name=f"{self.consumer_id}-leader-finder-thread")
        self._leader_finder.start()

    def stop_connections(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._leader_finder is not None:
            self._leader_finder.join(THREAD_JOIN_TIMEOUT_S)
            self._leader_finder = None
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        for fetcher in fetchers:
            fetcher.shutdown()
        for fetcher in fetchers:
            fetcher.join(THREAD_JOIN_TIMEOUT_S)
        with self._cond:
            self._partition_map = {}
            self._no_leader = set()

    def add_partitions_with_error(self, tps: Iterable[TopicPartition]) -> None:
        with self._cond:
            self._no_leader.update(tp for tp in tps if tp in self._partition_map)
            self._cond.notify_all()

    @property
    def fetcher_count(self) -> int:
        return len(self._fetchers)

    def _find_leaders_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._find_leaders()
            except Exception:  # noqa: BLE001 - the thread retries after its back-off
                logger.exception("%s-leader-finder-thread: finding leaders failed", self.consumer_id)
            self._stop.wait(self.config.refresh_leader_backoff_ms / 1000)

    def _find_leaders(self) -> None:
        with self._cond:
            while not self._no_leader and not self._stop.is_set():
                self._cond.wait()
            wanted = set(self._no_leader)
        if self._stop.is_set():
            return
        metadata = self.client.metadata
        metadata.add_topics(*{tp.topic for tp in wanted})
        metadata.request_update()
        try:
            metadata.refresh(self.client.pool, self.config.socket_timeout_ms)
        except KafkaError as error:
            logger.info("%s-leader-finder-thread: metadata refresh failed: %s", self.consumer_id, error)
            return
        leaders = {tp: node for tp in wanted if (node := metadata.leader_for(tp.topic, tp.partition)) is not None}
        with self._cond:
            self._no_leader -= set(leaders)
            infos = {tp: self._partition_map[tp] for tp in leaders if tp in self._partition_map}
        self._add_fetcher_for_partitions(infos, leaders)
        self._shutdown_idle_fetchers()

    def _add_fetcher_for_partitions(self, infos: dict[TopicPartition, PartitionTopicInfo],
                                    leaders: dict[TopicPartition, Node]) -> None:
        for tp, info in infos.items():
            for fetcher in self._fetchers.values():  # a partition is fetched by one thread at a time
                fetcher.remove_partitions([tp])
            node = leaders[tp]
            key = (node.node_id, fetcher_id(tp, self.config.num_consumer_fetchers))
            fetcher = self._fetchers.get(key)
            if fetcher is not None and fetcher.node.address != node.address:  # the broker moved
                fetcher.shutdown()
                self.add_partitions_with_error(fetcher.partitions)
                fetcher = None
            if fetcher is None:
                fetcher = ConsumerFetcherThread(self, node, key[1])
                self._fetchers[key] = fetcher
                fetcher.start()
            fetcher.add_partitions([info])

    def _shutdown_idle_fetchers(self) -> None:
        for key, fetcher in list(self._fetchers.items()):
            if fetcher.partition_count == 0:
                fetcher.shutdown()
                del self._fetchers[key]
