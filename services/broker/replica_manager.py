"""ReplicaManager: the partitions this broker hosts, and produce, fetch and list-offsets on them.

It applies the controller's LeaderAndIsr and StopReplica (fenced by controller epoch), appends
produced batches to leader logs (acks 0, 1 and all, `min.insync.replicas`), serves fetches up to
the high watermark to consumers and up to the log end to followers (whose fetches move the high
watermark and may grow the ISR; long polls park in the fetch purgatory and are tried after the
last of overlapping appends to a partition, so a burst of produces travels in one response),
drives the follower side of replication for the fetcher threads (truncation to the divergence
point, appends with the leader's offsets), checkpoints high watermarks, and answers ListOffsets
and OffsetForLeaderEpoch. Replication throttles (`leader_quota`, `follower_quota`) hold back the
records of throttled replicas outside the ISR while their byte rate is over its bound.
DeleteRecords moves a led partition's log start offset; followers take it from their fetches.

Transactions: produces from a live coordinator append with the COORDINATOR origin (no sequence
numbers needed); `write_txn_markers` appends a COMMIT or ABORT control batch per marker and
partition, fenced by producer and coordinator epochs, answered once replicated (acks=all through
the produce purgatory) or with REQUEST_TIMED_OUT. A read_committed consumer reads below the last
stable offset, not the high watermark, and gets the aborted transactions of the returned range;
every fetch answer carries the last stable offset. `describe_producers` lists a led partition's
active producers. `describe_log_dirs` lists each log dir's logs with their size and offset lag.
Results are plain tuples with Kafka error codes; the gRPC servicer turns them into responses. The
work is in four parts, each a module and a base class of ReplicaManager: `replica_leadership`,
`replica_append` and `replica_fetch`, and `replica_log_dirs` (log dirs going offline).
"""


from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from services.broker.fetch_session_cache import FetchSessionCache
from services.broker.log.checkpoints import OffsetCheckpointFile
from services.broker.metadata_cache import MetadataCache
from services.broker.partition import Partition
from services.broker.purgatory import DelayedOperationPurgatory
from services.broker.replica_append import ReplicaAppends
from services.broker.replica_fetch import ReplicaFetches
from services.broker.replica_leadership import LEADER_AND_ISR_CONCURRENCY, ReplicaLeadership
from services.broker.replica_log_dirs import ReplicaLogDirs
from services.broker.replication.quota import ReplicationQuota, throttled_partitions
from services.broker.topic_stats import BrokerTopicStats
from services.common.clock import SYSTEM_CLOCK
from services.common.errors import Errors
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

HIGH_WATERMARK_CHECKPOINT_FILE = "replication-offset-checkpoint"


class LogDirPartition(NamedTuple):
    """One partition log in a DescribeLogDirs answer."""
    size_bytes: int
    offset_lag: int
    is_future: bool = False


class LogDirDescription(NamedTuple):
    """One log dir in a DescribeLogDirs answer."""
    log_dir: str
    error_code: int
    partitions: dict[TopicPartition, LogDirPartition]


class ReplicaManager(ReplicaLeadership, ReplicaAppends, ReplicaFetches, ReplicaLogDirs):
    def __init__(self, broker_id: int, log_manager, metadata_cache: MetadataCache,
                 topic_config: Callable[[str], dict[str, str]] | None = None,
                 fetch_purgatory: DelayedOperationPurgatory | None = None,
                 produce_purgatory: DelayedOperationPurgatory | None = None, clock=SYSTEM_CLOCK,
                 fetch_sessions: FetchSessionCache | None = None) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.clock = clock
        self.fetcher_manager = None  # set by the server: follower replication
        self.isr_manager = None  # set by the server: leader-side ISR changes
        self._hw_checkpoints = {d: OffsetCheckpointFile(f"{d}/{HIGH_WATERMARK_CHECKPOINT_FILE}")
                                for d in getattr(log_manager, "log_dirs", [])}
        self._checkpointed_hw: dict[TopicPartition, int] = {}
        self._hw_written: dict[str, dict] = {}  # log dir -> the high watermarks last written there
        self._partition_set_changes = 0  # partitions added or removed, ever
        self._hw_seen = None  # (high watermark changes token, partition set changes) at the last write
        for checkpoint in self._hw_checkpoints.values():
            try:
                self._checkpointed_hw.update({tuple(tp): offset for tp, offset in checkpoint.read().items()})
            except OSError:
                logger.exception("cannot read %s; high watermarks start at the log start", checkpoint)
        self.topic_config = topic_config or (lambda topic: {})
        self.fetch_purgatory = fetch_purgatory or DelayedOperationPurgatory("Fetch", broker_id=broker_id)
        self.produce_purgatory = (produce_purgatory
                                  or DelayedOperationPurgatory("Produce", broker_id=broker_id))
        self.controller_epoch = -1
        self._lock = threading.RLock()
        self._fetcher_update_lock = threading.Lock()
        self._partitions: dict[TopicPartition, Partition] = {}
        self._offline_partitions: set[TopicPartition] = set()  # in offline log dirs, until restart
        self._appends_lock = threading.Lock()
        self._appends_in_progress: dict[TopicPartition, int] = {}
        # bumped before parked fetches are tried for any change (records, high watermark,
        # leadership): a parked fetch that already looked at this generation need not look again
        self._fetch_generations = itertools.count(1)
        self.fetch_generation = 0
        self.fetch_sessions = fetch_sessions or FetchSessionCache()
        self._leader_and_isr_pool = ThreadPoolExecutor(LEADER_AND_ISR_CONCURRENCY,
                                                       thread_name_prefix=f"leader-and-isr-{broker_id}")
        self.delayed_fetch_expired = 0
        self.delayed_produce_expired = 0
        self.topic_stats = BrokerTopicStats()
        # replication throttles (set up by the server from its config): bytes this leader sends to
        # followers, and this follower fetches, for throttled replicas outside the ISR
        self.leader_quota = ReplicationQuota(clock=clock)
        self.follower_quota = ReplicationQuota(clock=clock)


    # ------------------------------------------------------------------ housekeeping

    def update_replication_throttles(self, topic: str, config: dict[str, str]) -> None:
        """The topic's throttled replicas here, from its `leader.replication.throttled.replicas`
        and `follower.replication.throttled.replicas` configs."""
        for quota, key in ((self.leader_quota, "leader.replication.throttled.replicas"),
                           (self.follower_quota, "follower.replication.throttled.replicas")):
            value = config.get(key)
            if value is None:
                quota.remove_throttle(topic)
            else:
                quota.mark_throttled(topic, throttled_partitions(str(value).split(","), self.broker_id))

    def _complete_delayed(self, key: TopicPartition) -> None:
        self._wake_fetches(key)
        self.produce_purgatory.check_and_complete(key)

    def metrics_delayed_fetch_expired(self) -> None:
        self.delayed_fetch_expired += 1

    def metrics_delayed_produce_expired(self) -> None:
        self.delayed_produce_expired += 1

    def leader_partition_count(self) -> int:
        return sum(1 for p in self._partitions.values() if p.is_leader)

    def describe_log_dirs(self, partitions: Collection[TopicPartition] | None = None) -> list[LogDirDescription]:
        """Every log dir with its logs (only those of `partitions` unless None): each one's size in
        bytes and offset lag, max(high watermark - log end offset, 0), as Kafka's brokers report it; an
        offline dir is listed with KAFKA_STORAGE_ERROR and no logs."""
        wanted = None if partitions is None else set(partitions)
        by_dir = self.log_manager.logs_by_dir()
        offline = getattr(self.log_manager, "offline_log_dirs", dict)()
        described = []
        for log_dir in self.log_manager.log_dirs:
            if os.path.abspath(log_dir) in offline:
                described.append(LogDirDescription(os.path.abspath(log_dir), Errors.KAFKA_STORAGE_ERROR, {}))
                continue
            logs = by_dir.get(os.path.abspath(log_dir), by_dir.get(log_dir, {}))
            described.append(LogDirDescription(os.path.abspath(log_dir), Errors.NONE, {
                tp: LogDirPartition(log.size_in_bytes, max(log.high_watermark - log.log_end_offset, 0))
                for tp, log in sorted(logs.items()) if wanted is None or tp in wanted}))
        return described

    def stop_fetching(self) -> None:
        """Stops every follower fetcher for good: the broker is leaving."""
        if self.fetcher_manager is not None:
            self.fetcher_manager.shutdown()

    def shutdown(self) -> None:
        self.stop_log_dir_failure_handler()
        if self.fetcher_manager is not None:
            self.fetcher_manager.shutdown()
        if self.isr_manager is not None:
            self.isr_manager.shutdown()
        self._leader_and_isr_pool.shutdown(wait=True)
        self.checkpoint_high_watermarks()
        self.fetch_purgatory.shutdown()
        self.produce_purgatory.shutdown()
