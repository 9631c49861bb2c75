"""The client's cluster metadata cache, as Kafka's `Metadata`: what it knows, when to refresh it.

`Metadata` holds the current `Cluster` snapshot (bootstrap nodes until the first answer) and the
topics it tracks (every topic with `all_topics=True`, otherwise those added with `add_topics`).
`forget_topics` stops tracking topics (after deleting them) and drops them from the snapshot. With
`keep_unknown_topics=False` (the admin client's cache, which tracks a topic only to route calls to
its leaders) a topic answered UNKNOWN_TOPIC_OR_PARTITION stops being tracked too, so a topic that
is gone is not asked about again and does not keep an update requested.
Refresh timing is Kafka's: an update is due when one was requested (`request_update()`) or the
data is older than `metadata.max.age.ms`, and two refreshes are at least `retry.backoff.ms`
apart, whether the previous one succeeded or failed.

Applying an answer (`update`): a response listing no brokers is ignored; topics answered with
an error (UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE while a topic is being created, ...)
are left out of the cluster, their codes kept for `topic_error()`; an error that says metadata is
stale, or a partition without a leader, requests another update. A partition whose leader epoch
went backwards keeps the newer information already held (the answering broker lags), until its
topic disappears from an answer or `forget_topics` is called.

`least_loaded_nodes(pool)` orders the nodes to ask (fewest calls in flight, nodes that just
failed to connect last, the known brokers before the bootstrap addresses); `refresh(pool)` sends
the Metadata RPC to them in that order until one answers (the transport's `call_any_node`).
`describe_topics(pool, topics, deadline, backoff_ms)` asks any node about some topics (or all)
without touching the cache, as a consumer's `partitions_for` and `list_topics` do. Every method
is thread-safe; concurrent refreshes collapse into one.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Iterable

from services.clients.client_config import CommonClientConfig, parse_bootstrap_servers
from services.clients.cluster import Cluster, Node, PartitionInfo
from services.clients.transport import ChannelPool, Deadline, call_any_node, call_with_retries
from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.errors import AUTHENTICATION_ERRORS, Errors, KafkaError, error_for_code
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

FORGET_EPOCH_ERRORS = frozenset({Errors.UNKNOWN_TOPIC_OR_PARTITION})
# errors after which describing topics is tried again (an unknown topic is answered as having no partitions)
DESCRIBE_RETRIABLE_ERRORS = frozenset({Errors.LEADER_NOT_AVAILABLE, Errors.NETWORK_EXCEPTION,
                                       Errors.REQUEST_TIMED_OUT})


def metadata_request(topics: Iterable[str] | None, allow_auto_topic_creation: bool = False
                     ) -> broker_pb2.MetadataRequest:
    """A Metadata request for `topics` (sorted), or for every topic when None."""
    if topics is None:
        return broker_pb2.MetadataRequest(all_topics=True, allow_auto_topic_creation=False)
    return broker_pb2.MetadataRequest(topics=sorted(topics), allow_auto_topic_creation=allow_auto_topic_creation)


class Metadata:
    """A thread-safe cluster metadata cache with Kafka's refresh rules."""

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        *,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300000,
        all_topics: bool = False,
        topics: Iterable[str] = (),
        keep_unknown_topics: bool = True,
        clock: Clock = SYSTEM_CLOCK,
    ):
        self.refresh_backoff_ms = retry_backoff_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        self.all_topics = all_topics
        self.keep_unknown_topics = keep_unknown_topics
        self._clock = clock
        self._bootstrap = Cluster.bootstrap(parse_bootstrap_servers(bootstrap_servers))
        self._cluster = self._bootstrap
        self._changed = threading.Condition(threading.RLock())
        self._refresh_lock = threading.Lock()
        self._topics: set[str] = set(topics)
        self._leader_epochs: dict[TopicPartition, int] = {}
        self._version = 0
        self._need_update = True
        self._last_refresh_ms: int | None = None
        self._last_success_ms: int | None = None
        self._last_error: KafkaError | None = None

    @classmethod
    def from_config(cls, config: CommonClientConfig, **kwargs) -> Metadata:
        return cls(config.bootstrap_servers, retry_backoff_ms=config.retry_backoff_ms,
                   metadata_max_age_ms=config.metadata_max_age_ms, **kwargs)

    # ------------------------------------------------------------------ what is known

    @property
    def cluster(self) -> Cluster:
        with self._changed:
            return self._cluster

    @property
    def version(self) -> int:
        """Incremented by every applied update."""
        with self._changed:
            return self._version

    @property
    def controller(self) -> Node | None:
        return self.cluster.controller

    @property
    def cluster_id(self) -> str | None:
        return self.cluster.cluster_id

    @property
    def nodes(self) -> list[Node]:
        return list(self.cluster.nodes.values())

    @property
    def last_error(self) -> KafkaError | None:
        """Why the last refresh failed, or None after a success."""
        with self._changed:
            return self._last_error

    @property
    def authentication_error(self) -> KafkaError | None:
        """The last refresh's failure when the servers refused the client's credentials (fatal, as
        Kafka's AuthenticationException: the producer raises it instead of waiting for metadata)."""
        with self._changed:
            return self._authentication_failure()

    def _authentication_failure(self) -> KafkaError | None:
        error = self._last_error
        return error if error is not None and error.error in AUTHENTICATION_ERRORS else None

    def leader_for(self, topic: str, partition: int) -> Node | None:
        return self.cluster.leader_for(topic, partition)

    def partitions_for(self, topic: str) -> tuple[PartitionInfo, ...]:
        return self.cluster.partitions_for(topic)

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        return self.cluster.partition(topic, partition)

    def topic_error(self, topic: str) -> int:
        """The error code the last answer gave for `topic` (NONE when it was described)."""
        return self.cluster.topic_errors.get(topic, Errors.NONE)

    # ------------------------------------------------------------------ topics tracked

    @property
    def topics(self) -> frozenset[str]:
        with self._changed:
            return frozenset(self._topics)

    def add_topics(self, *topics: str) -> bool:
        """Tracks more topics; requests an update (and returns True) when any is new."""
        with self._changed:
            new = set(topics) - self._topics
            self._topics |= new
            if new and not self.all_topics:
                self._need_update = True
            return bool(new)

    def forget_topics(self, topics: Iterable[str]) -> None:
        """Stops tracking `topics` and drops what is known about them (partitions, leader epochs),
        e.g. after deleting them; no update is requested, as none of them is asked about any more."""
        with self._changed:
            names = set(topics)
            self._topics -= names
            self._leader_epochs = {tp: e for tp, e in self._leader_epochs.items() if tp.topic not in names}
            self._cluster = self._cluster.without_topics(names)

    def build_request(self, allow_auto_topic_creation: bool = False) -> broker_pb2.MetadataRequest:
        """The request that refreshes this cache (auto-creation never applies to all topics)."""
        with self._changed:
            return metadata_request(None if self.all_topics else self._topics, allow_auto_topic_creation)

    # ------------------------------------------------------------------ when to refresh

    def request_update(self) -> int:
        """Asks for a refresh as soon as the back-off allows; returns the current version."""
        with self._changed:
            self._need_update = True
            return self._version

    @property
    def update_requested(self) -> bool:
        with self._changed:
            return self._need_update

    def time_to_next_update(self, now_ms: int | None = None) -> int:
        """Milliseconds until a refresh is due and allowed (0 = now)."""
        now = self._clock.monotonic_ms() if now_ms is None else now_ms
        with self._changed:
            if self._need_update or self._last_success_ms is None:
                time_to_expire = 0
            else:
                time_to_expire = max(self._last_success_ms + self.metadata_max_age_ms - now, 0)
            return max(time_to_expire, self._time_to_allow_update(now))

    def _time_to_allow_update(self, now: int) -> int:
        if self._last_refresh_ms is None:
            return 0
        return max(self._last_refresh_ms + self.refresh_backoff_ms - now, 0)

    # ------------------------------------------------------------------ applying answers

    def update(self, response: broker_pb2.MetadataResponse, now_ms: int | None = None) -> Cluster:
        """Applies a Metadata answer (see the module docstring) and returns the new snapshot."""
        now = self._clock.monotonic_ms() if now_ms is None else now_ms
        if not response.brokers:
            logger.debug("ignoring a metadata response that lists no brokers")
            self.failed_update(KafkaError("metadata response lists no brokers",
                                          error=Errors.LEADER_NOT_AVAILABLE), now)
            return self.cluster
        fresh = Cluster.from_response(response)
        with self._changed:
            cluster, need_update = self._merge_epochs(fresh)
            self._cluster = cluster
            self._need_update = need_update
            self._last_refresh_ms = self._last_success_ms = now
            self._last_error = None
            self._version += 1
            self._changed.notify_all()
            return cluster

    def _merge_epochs(self, fresh: Cluster) -> tuple[Cluster, bool]:
        need_update = False
        for topic, code in fresh.topic_errors.items():
            if code in FORGET_EPOCH_ERRORS:
                self._forget_epochs_of(topic)
                if not self.keep_unknown_topics:
                    self._topics.discard(topic)
                    continue
            need_update |= error_for_code(code).invalid_metadata
        for topic in {tp.topic for tp in self._leader_epochs} - set(fresh.topics) - set(fresh.topic_errors):
            self._forget_epochs_of(topic)
        cluster = fresh
        for topic, partitions in fresh.topics.items():
            kept = []
            for info in partitions:
                known = self._leader_epochs.get(info.topic_partition, -1)
                if info.leader_epoch < known:
                    previous = self._cluster.partition(topic, info.partition)
                    if previous is not None and previous.leader_epoch >= known:
                        logger.debug("keeping %s at leader epoch %d over stale epoch %d",
                                     info.topic_partition, known, info.leader_epoch)
                        info = previous
                    need_update = True
                else:
                    self._leader_epochs[info.topic_partition] = info.leader_epoch
                if not info.has_leader or error_for_code(info.error_code).invalid_metadata:
                    need_update = True
                kept.append(info)
            if any(a is not b for a, b in zip(kept, partitions, strict=True)):
                cluster = cluster.with_partitions(topic, kept)
        return cluster, need_update

    def _forget_epochs_of(self, topic: str) -> None:
        for tp in [tp for tp in self._leader_epochs if tp.topic == topic]:
            del self._leader_epochs[tp]

    def failed_update(self, error: KafkaError | None = None, now_ms: int | None = None) -> None:
        """Records a failed refresh: the next one waits `retry.backoff.ms`."""
        now = self._clock.monotonic_ms() if now_ms is None else now_ms
        with self._changed:
            self._last_refresh_ms = now
            self._last_error = error
            self._changed.notify_all()

    def await_update(self, last_version: int, timeout_ms: float) -> bool:
        """Blocks until an update newer than `last_version` is applied (or a refresh fails on
        authentication); False on timeout."""
        with self._changed:
            return self._changed.wait_for(
                lambda: self._version > last_version or self._authentication_failure() is not None,
                timeout_ms / 1000)

    # ------------------------------------------------------------------ refreshing over the network

    def least_loaded_nodes(self, pool: ChannelPool) -> list[Node]:
        """Known brokers then unknown bootstrap addresses, least loaded first, failed ones last."""
        cluster = self.cluster
        known = [] if cluster.is_bootstrap else list(cluster.nodes.values())
        addresses = {n.address for n in known}
        fallback = [n for n in self._bootstrap.nodes.values() if n.address not in addresses]
        candidates = [(n, False) for n in known] + [(n, True) for n in fallback]
        random.shuffle(candidates)  # ties go to a random node, as Kafka's leastLoadedNode does
        candidates.sort(key=lambda c: (pool.is_backing_off(c[0].address), c[1], pool.in_flight(c[0].address)))
        return [node for node, _ in candidates]

    def least_loaded_node(self, pool: ChannelPool) -> Node | None:
        """The first of `least_loaded_nodes`, None when no node is known at all."""
        return next(iter(self.least_loaded_nodes(pool)), None)

    def update_due(self, now_ms: int | None = None) -> bool:
        """True when an update was requested, none succeeded yet, or the data is too old."""
        now = self._clock.monotonic_ms() if now_ms is None else now_ms
        with self._changed:
            return (self._need_update or self._last_success_ms is None
                    or now - self._last_success_ms >= self.metadata_max_age_ms)

    def maybe_refresh(self, pool: ChannelPool, timeout_ms: float = 30000) -> Cluster:
        """Refreshes (after any back-off) when an update is due; otherwise returns the cache."""
        if self.update_due():
            return self.refresh(pool, timeout_ms)
        return self.cluster

    def refresh(self, pool: ChannelPool, timeout_ms: float = 30000) -> Cluster:
        """Fetches metadata now, once the back-off since the last refresh has passed.

        If another thread applies an update while this one waits, that update is returned.
        Raises the last node's KafkaError when no node answers before `timeout_ms`.
        """
        deadline = Deadline(timeout_ms, self._clock)
        start_version = self.version
        if not self._refresh_lock.acquire(timeout=max(deadline.remaining_ms(), 1) / 1000):
            raise KafkaError("timed out waiting for another metadata refresh", error=Errors.REQUEST_TIMED_OUT)
        try:
            with self._changed:
                if self._version > start_version and not self._need_update:
                    return self._cluster
                wait_ms = self._time_to_allow_update(self._clock.monotonic_ms())
            if wait_ms > deadline.remaining_ms():
                raise KafkaError("metadata refresh is backing off past the deadline",
                                 error=Errors.REQUEST_TIMED_OUT)
            self._clock.sleep_ms(wait_ms)
            return self._fetch(pool, deadline)
        finally:
            self._refresh_lock.release()

    def _fetch(self, pool: ChannelPool, deadline: Deadline) -> Cluster:
        try:
            response = call_any_node(self, pool, "Metadata", self.build_request(), deadline)
        except KafkaError as error:
            self.failed_update(error)
            raise
        return self.update(response)

    def describe_topics(self, pool: ChannelPool, topics: list[str] | None, deadline: Deadline,
                        backoff_ms: float) -> Cluster:
        """The Metadata answer about `topics` (all topics when None) of any node, leaving the cache as
        it is; retried on DESCRIBE_RETRIABLE_ERRORS until `deadline`, any other topic error raised."""
        request = metadata_request(topics)

        def attempt(deadline: Deadline) -> Cluster:
            cluster = Cluster.from_response(call_any_node(self, pool, "Metadata", request, deadline))
            for topic, code in cluster.topic_errors.items():
                if code != Errors.UNKNOWN_TOPIC_OR_PARTITION:  # an unknown topic has no partitions
                    raise KafkaError.from_code(code, f"metadata for topic {topic}")
            return cluster

        return call_with_retries(f"Metadata of {topics or 'all topics'}", attempt, deadline, backoff_ms,
                                 is_retriable=lambda e: e.code in DESCRIBE_RETRIABLE_ERRORS)
