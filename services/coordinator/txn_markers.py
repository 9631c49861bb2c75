"""`TxnMarkerWriter`: writes the COMMIT / ABORT markers that end transactions (Kafka's
TransactionMarkerChannelManager), for the transaction coordinator.

One thread sends, in rounds, the markers of every transaction still waiting: each partition's
marker goes to the partition's leader broker, or, for a `__consumer_offsets` partition, to the
coordinator instance owning it (from the coordinator directory); one WriteTxnMarkers request per
destination carries the markers of every transaction bound there. A partition is done when its
answer is NONE (or UNSUPPORTED_FOR_MESSAGE_FORMAT / UNSUPPORTED_VERSION, as Kafka, also for a
destination that does not implement the call), or when its topic no longer exists. Other errors,
unroutable partitions and failed calls are retried after `retry.backoff.ms` with fresh metadata.
INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED stop the transaction's markers: a newer
producer epoch or coordinator has taken over. When every partition of a transaction is done, its
`done()` is called on the sending thread.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from services.clients.cluster import Cluster
from services.clients.lowlevel import LowLevelClient
from services.clients.transport import BROKER, COORDINATOR
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.topic_names import GROUP_METADATA_TOPIC
from services.common.topic_partition import TopicPartition
from services.common.zk.coordinator_directory import DirectorySnapshot, coordinator_address
from services.coordinator.txn.effects import TxnMarkers

logger = logging.getLogger(__name__)

_DONE_ERRORS = {Errors.NONE, Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, Errors.UNSUPPORTED_VERSION}
_FENCED_ERRORS = {Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED}
_DELETED = object()
Target = tuple[str, str]  # (address, service)
Marker = common_pb2.WriteTxnMarkersRequest.WritableTxnMarker


@dataclass
class _Pending:
    markers: TxnMarkers
    remaining: set[TopicPartition]
    done: Callable[[], None]


class TxnMarkerWriter:
    def __init__(self, client: LowLevelClient, directory: Callable[[], DirectorySnapshot], *,
                 retry_backoff_ms: int = 100, request_timeout_ms: int = 30000, start: bool = True) -> None:
        self._client = client
        self._directory = directory
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._request_timeout_ms = request_timeout_ms
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count()
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="txn-marker-writer", daemon=True)
        if start:
            self._thread.start()

    def send(self, markers: TxnMarkers, done: Callable[[], None]) -> None:
        with self._lock:
            self._pending[next(self._ids)] = _Pending(markers, set(markers.partitions), done)
        self._wake.set()

    def forget(self, txn_partition: int) -> None:
        with self._lock:
            for key in [k for k, p in self._pending.items() if p.markers.txn_partition == txn_partition]:
                del self._pending[key]

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(10)

    # ------------------------------------------------------------------ the sending thread

    def _run(self) -> None:
        waiting = False
        while not self._closed:
            self._wake.wait(self._retry_backoff_s if waiting else 1.0)
            self._wake.clear()
            if not self._closed:
                waiting = self.run_round()

    def run_round(self) -> bool:
        """One round: sends what waits, completes what is done; True while something still waits."""
        with self._lock:
            pending = dict(self._pending)
        if not pending:
            return False
        try:
            self._round(pending)
        except Exception:
            logger.exception("Writing transaction markers failed; retrying")
        with self._lock:
            finished = [k for k, p in pending.items() if not p.remaining and self._pending.pop(k, None)]
            waiting = bool(self._pending)
        for key in finished:
            try:
                pending[key].done()
            except Exception:
                logger.exception("Completing transaction %s failed", pending[key].markers.transactional_id)
        return waiting

    def _round(self, pending: dict[int, _Pending]) -> None:
        cluster = self._cluster(pending)
        snapshot = self._directory()
        routes: dict[Target, dict[int, list[TopicPartition]]] = {}
        for key, item in pending.items():
            for tp in sorted(item.remaining):
                target = self._target(tp, cluster, snapshot)
                if target is _DELETED:
                    item.remaining.discard(tp)
                elif target is not None:
                    routes.setdefault(target, {}).setdefault(key, []).append(tp)
        targets = list(routes)
        calls = [(address, service, "WriteTxnMarkers", _request(pending, routes[(address, service)]),
                  self._request_timeout_ms) for address, service in targets]
        for target, response in zip(targets, self._client.pool.call_many(calls), strict=True):
            self._settle(pending, routes[target], target, response)

    def _cluster(self, pending: dict[int, _Pending]) -> Cluster | None:
        topics = {tp.topic for item in pending.values() for tp in item.remaining if tp.topic != GROUP_METADATA_TOPIC}
        if not topics:
            return None
        metadata = self._client.metadata
        if metadata.add_topics(*topics):
            metadata.request_update()
        try:
            return metadata.maybe_refresh(self._client.pool, self._request_timeout_ms)
        except KafkaError as e:
            logger.warning("No metadata for transaction markers (%s); retrying", e)
            return None

    def _target(self, tp: TopicPartition, cluster: Cluster | None, snapshot: DirectorySnapshot):
        """Where `tp`'s marker goes; _DELETED when its topic is gone; None when not known yet."""
        if tp.topic == GROUP_METADATA_TOPIC:
            owner = snapshot.owner_of(tp.topic, tp.partition)
            if owner is None:
                return None
            host, port = coordinator_address(owner)
            return f"{host}:{port}", COORDINATOR
        if cluster is None:
            return None
        if cluster.topic_errors.get(tp.topic) == Errors.UNKNOWN_TOPIC_OR_PARTITION:
            return _DELETED
        if tp.topic in cluster.topics and cluster.partition(tp.topic, tp.partition) is None:
            return _DELETED
        leader = cluster.leader_for(tp.topic, tp.partition)
        return None if leader is None else (leader.address, BROKER)

    def _settle(self, pending: dict[int, _Pending], sent: dict[int, list[TopicPartition]], target: Target,
                response) -> None:
        if isinstance(response, KafkaError):
            if response.code == Errors.UNSUPPORTED_VERSION:
                logger.warning("%s does not take transaction markers; counting them written", target[0])
                for key, tps in sent.items():
                    pending[key].remaining.difference_update(tps)
            else:
                self._client.metadata.request_update()
            return
        errors = {(m.producer_id, t.name, p.partition_index): p.error_code
                  for m in response.markers for t in m.topics for p in t.partitions}
        for key, tps in sent.items():
            item = pending[key]
            for tp in tps:
                code = errors.get((item.markers.producer_id, tp.topic, tp.partition), Errors.UNKNOWN_SERVER_ERROR)
                if code in _DONE_ERRORS:
                    item.remaining.discard(tp)
                elif code in _FENCED_ERRORS:
                    logger.warning("Markers of transaction %s were refused by %s with error %d; giving up",
                                   item.markers.transactional_id, tp, code)
                    with self._lock:
                        self._pending.pop(key, None)
                    break
                else:
                    self._client.metadata.request_update()


def _request(pending: dict[int, _Pending], sent: dict[int, list[TopicPartition]]) -> common_pb2.WriteTxnMarkersRequest:
    request = common_pb2.WriteTxnMarkersRequest()
    for key, tps in sent.items():
        markers = pending[key].markers
        marker = request.markers.add(producer_id=markers.producer_id, producer_epoch=markers.producer_epoch,
                                     transaction_result=markers.commit,
                                     coordinator_epoch=markers.coordinator_epoch)
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        for topic, partitions in by_topic.items():
            marker.topics.add(name=topic, partition_indexes=partitions)
    return request


def cached_unknown_partitions(client: LowLevelClient, partitions: list[TopicPartition]) -> set[TopicPartition] | None:
    """The partitions the cluster's metadata does not have, when the metadata cache knows every one
    of them (then none); None when the cache must be refreshed first (`unknown_partitions`)."""
    metadata = client.metadata
    cluster = metadata.cluster
    if not (metadata.all_topics or {tp.topic for tp in partitions} <= metadata.topics) or any(
            cluster.partition(tp.topic, tp.partition) is None for tp in partitions):
        return None
    return set()


def unknown_partitions(client: LowLevelClient, partitions: list[TopicPartition],
                       timeout_ms: int) -> set[TopicPartition]:
    """The partitions the cluster's metadata does not have (refreshed first when its cache does not
    know them): AddPartitionsToTxn answers UNKNOWN_TOPIC_OR_PARTITION for them, as Kafka does."""
    metadata = client.metadata
    cluster = metadata.cluster
    if metadata.add_topics(*{tp.topic for tp in partitions}) or any(
            cluster.partition(tp.topic, tp.partition) is None for tp in partitions):
        metadata.request_update()
        cluster = metadata.refresh(client.pool, timeout_ms)
    return {tp for tp in partitions if cluster.partition(tp.topic, tp.partition) is None}
