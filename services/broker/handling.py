"""What the broker does for a client's Produce, Fetch, Metadata and InitProducerId, whichever
protocol carried it: the gRPC servicer and the Kafka protocol handlers both call these, and only
translate requests and responses.

A produce or fetch runs on the server's event loop: the ReplicaManager's synchronous part (a read,
the append of a produce of up to `INLINE_APPEND_MAX_BYTES`) runs inline, a larger append in the
loop's executor, and one that has to wait parks in its purgatory while the coroutine awaits the
`Completion` the purgatory resolves; no thread is held. Clients' produces and fetches (not
followers') count against `parked.max.requests`; one more is refused at once with
THROTTLING_QUOTA_EXCEEDED. Metadata, which may ask the controller to create a topic, and
InitProducerId, which may allocate a block of ids in ZooKeeper, block: callers run them in an
executor.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from services.broker.fetch_session_cache import FINAL_EPOCH
from services.broker.log.validation import AppendOrigin
from services.broker.metadata_cache import BrokerNode, MetadataCache, MetadataSnapshot
from services.broker.replica_fetch import FetchParams, FetchPartition, LogReadResult
from services.broker.replica_manager import ReplicaManager
from services.common.errors import Errors, KafkaError, error_for_code
from services.common.producer_id_manager import ProducerIdManager
from services.common.service import DEFAULT_PARKED_MAX_REQUESTS, Completion, RequestLimit
from services.common.shared_types import InitProducerIdResult, PartitionStateInfo
from services.common.topic_names import INTERNAL_TOPICS
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

WAIT_SLACK_S = 5.0
# a produce carrying more runs its append (validation, CRC, the write) in the executor, where
# several overlap and the loop goes on serving meanwhile; a smaller one costs less inline
INLINE_APPEND_MAX_BYTES = 64 * 1024
DEFAULT_PARTITION_MAX_BYTES = 1048576


@dataclass(frozen=True, slots=True)
class ProduceOutcome:
    """Each partition's ProduceResult; a partition without one gets `missing_code`."""

    results: dict
    missing_code: int
    missing_message: str = ""


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    """A fetch's answer: a request-level error (with no partitions), or the session id and each
    partition's LogReadResult."""

    error_code: int = Errors.NONE
    error_message: str = ""
    session_id: int = 0
    results: dict[TopicPartition, LogReadResult] | None = None


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One partition as Metadata describes it to clients."""

    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: tuple[int, ...]
    isr_nodes: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicView:
    name: str
    error_code: int
    is_internal: bool
    partitions: tuple[PartitionView, ...]


class RequestHandling:
    def __init__(self, replica_manager: ReplicaManager, metadata_cache: MetadataCache, *, fetch_max_bytes: int,
                 auto_create_topic: Callable[[str], None] | None = None,
                 producer_ids: ProducerIdManager | None = None,
                 parked_max_requests: int = DEFAULT_PARKED_MAX_REQUESTS) -> None:
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.fetch_max_bytes = fetch_max_bytes
        self.auto_create_topic = auto_create_topic
        self.producer_ids = producer_ids
        self.client_requests = RequestLimit(parked_max_requests)

    # ------------------------------------------------------------------ produce

    async def produce(self, acks: int, timeout_ms: int, entries: dict[TopicPartition, bytes], *,
                      internal_topics_allowed: bool = False) -> ProduceOutcome:
        if not self.client_requests.try_acquire():
            return ProduceOutcome({}, Errors.THROTTLING_QUOTA_EXCEEDED, self.client_requests.describe())
        try:
            reply = Completion()
            append = functools.partial(
                self.replica_manager.append_records, acks, timeout_ms, entries, reply,
                internal_topics_allowed=internal_topics_allowed,
                origin=AppendOrigin.COORDINATOR if internal_topics_allowed else AppendOrigin.CLIENT)
            if sum(len(records) for records in entries.values()) <= INLINE_APPEND_MAX_BYTES:
                append()
            else:
                await asyncio.get_running_loop().run_in_executor(None, append)
            results = await reply.result(max(timeout_ms, 0) / 1000 + WAIT_SLACK_S)
        finally:
            self.client_requests.release()
        return ProduceOutcome(results or {}, Errors.REQUEST_TIMED_OUT)

    # ------------------------------------------------------------------ fetch

    async def fetch(self, *, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                    partitions: list[FetchPartition], read_committed: bool, session_id: int = 0,
                    session_epoch: int = FINAL_EPOCH,
                    forgotten: Iterable[tuple[str, int]] = ()) -> FetchOutcome:
        """A fetch in the fetch session (KIP-227) its session id and epoch name; session id 0 and
        the final epoch is a full fetch outside any session, as before sessions existed."""
        max_bytes = min(max_bytes if max_bytes > 0 else self.fetch_max_bytes, self.fetch_max_bytes)
        session = self.replica_manager.fetch_sessions.new_context(
            replica_id, session_id, session_epoch, partitions, list(forgotten), read_committed,
            self.replica_manager.clock.monotonic_ms())
        if session.error:
            return FetchOutcome(session.error, error_for_code(session.error).description)
        params = FetchParams(replica_id, max_wait_ms, min_bytes, max_bytes, tuple(partitions), read_committed,
                             session.session, not session.full)
        limited = replica_id < 0
        if limited and not self.client_requests.try_acquire():
            return FetchOutcome(Errors.THROTTLING_QUOTA_EXCEEDED, self.client_requests.describe())
        try:
            reply = Completion()
            self.replica_manager.fetch_messages(params, reply)
            results = await reply.result(max(max_wait_ms, 0) / 1000 + WAIT_SLACK_S)
        finally:
            if limited:
                self.client_requests.release()
        if results is None:
            return FetchOutcome(Errors.REQUEST_TIMED_OUT, "fetch did not complete in time")
        return FetchOutcome(session_id=session.session_id, results=results)

    def current_leader(self, topic: str, index: int) -> tuple[int, int] | None:
        """(leader id, leader epoch) of a partition as this broker's metadata has it."""
        meta = self.metadata_cache.partition(topic, index)
        return None if meta is None else (meta.leader, meta.leader_epoch)

    # ------------------------------------------------------------------ metadata

    def topic_views(self, snapshot: MetadataSnapshot, topics: list[str] | None,
                    allow_auto_topic_creation: bool) -> list[TopicView]:
        """Every topic (`topics` None) or those named, as Metadata answers them; a named topic that
        does not exist is created when allowed (and answered LEADER_NOT_AVAILABLE meanwhile)."""
        names = sorted(snapshot.partitions) if topics is None else list(dict.fromkeys(topics))
        views = []
        for name in names:
            partitions = snapshot.partitions.get(name)
            if partitions is None:
                views.append(TopicView(name, self._unknown_topic_error(name, allow_auto_topic_creation),
                                       name in INTERNAL_TOPICS, ()))
                continue
            views.append(TopicView(name, Errors.NONE, name in INTERNAL_TOPICS,
                                   tuple(partition_view(partitions[i], snapshot.brokers) for i in sorted(partitions))))
        return views

    def _unknown_topic_error(self, name: str, allow_auto_create: bool) -> int:
        if not allow_auto_create or self.auto_create_topic is None or name.startswith("__"):
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        try:
            self.auto_create_topic(name)
        except KafkaError as exc:
            if exc.code == Errors.INVALID_TOPIC_EXCEPTION:
                return Errors.INVALID_TOPIC_EXCEPTION
            if exc.code != Errors.TOPIC_ALREADY_EXISTS:
                logger.warning("auto-creating topic %s failed: %s", name, exc)
                return Errors.UNKNOWN_TOPIC_OR_PARTITION
        return Errors.LEADER_NOT_AVAILABLE

    # ------------------------------------------------------------------ producer ids

    def init_producer_id(self, transactional_id: str | None, producer_id: int,
                         producer_epoch: int) -> InitProducerIdResult:
        if self.producer_ids is None:
            return InitProducerIdResult(Errors.COORDINATOR_NOT_AVAILABLE,
                                        error_message="this broker does not hand out producer ids")
        return self.producer_ids.init_producer_id(transactional_id, producer_id, producer_epoch)


def partition_view(meta: PartitionStateInfo, live: dict[int, BrokerNode]) -> PartitionView:
    has_leader = meta.leader in live
    return PartitionView(Errors.NONE if has_leader else Errors.LEADER_NOT_AVAILABLE, meta.partition.partition,
                         meta.leader if has_leader else -1, meta.leader_epoch, tuple(meta.replicas),
                         tuple(meta.isr), tuple(r for r in meta.replicas if r not in live))
