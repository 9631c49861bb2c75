"""`GroupCoordinator`: the coordinator runtime (`services.coordinator.runtime`) over the pure
`GroupCoordinatorCore`, with the group requests and the scheduler that fires the core's timers.

The service calls it from request threads, from ZooKeeper ownership changes and from the loader;
timers fire on the injected `Scheduler`, set and cancelled under the runtime's lock so they follow
the order the core decided them. The core answers parked requests NOT_COORDINATOR when it loses a
partition, and an answer arriving later is then ignored.

WriteTxnMarkers for partitions of `__consumer_offsets` (`handle_write_txn_marker`): partitions
not served are answered at once (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS); the store writes
the marker to the others, and each partition written completes the producer's offsets there.
"""

from __future__ import annotations

import logging
from typing import Any

from services.common.clock import Clock
from services.common.errors import Errors
from services.common.scheduler import Cancellable, Scheduler
from services.common.topic_names import GROUP_METADATA_TOPIC
from services.coordinator.append_queue import Once
from services.coordinator.group.api import (
    CommitCallback,
    CommittedOffset,
    DeleteGroupsCallback,
    DescribedGroup,
    FetchedOffset,
    GroupStore,
    JoinCallback,
    LeaveGroupResult,
    ListedGroup,
    MarkerCallback,
    OffsetDeleteCallback,
    SyncCallback,
    TopicPartition,
    TxnOffsetCallback,
)
from services.coordinator.group.config import GroupConfig
from services.coordinator.group.coordinator import GroupCoordinatorCore
from services.coordinator.group.effects import CancelTimer, Outcome, TimerEvent, TxnProducer
from services.coordinator.group.group import GroupMetadata
from services.coordinator.group.join_sync import JoinRequest
from services.coordinator.runtime import CoordinatorRuntime

logger = logging.getLogger(__name__)


class GroupCoordinator(CoordinatorRuntime[GroupCoordinatorCore]):
    def __init__(self, config: GroupConfig, clock: Clock, scheduler: Scheduler, store: GroupStore) -> None:
        super().__init__(GroupCoordinatorCore(config, clock), store, GROUP_METADATA_TOPIC)
        self._scheduler = scheduler
        self._timers: dict[TimerEvent, Cancellable] = {}

    def _apply_locked(self, outcome: Outcome) -> None:
        for timer in outcome.timers:
            self._apply_timer(timer)

    def _apply_timer(self, timer: Any) -> None:
        previous = self._timers.pop(timer.event, None)
        if previous is not None:
            previous.cancel()
        if not isinstance(timer, CancelTimer):
            event = timer.event
            self._timers[event] = self._scheduler.schedule(timer.delay_ms, lambda: self._fire(event))

    def _fire(self, event: TimerEvent) -> None:
        with self._lock:
            self._timers.pop(event, None)
        self._run(self.core.on_timer, event)

    @property
    def is_active(self) -> bool:
        with self._lock:
            return self.core.active

    def partition_for(self, group_id: str) -> int:
        return self.core.manager.partition_for(group_id)

    def replay(
        self, partition: int, key: bytes, value: bytes | None, offset: int, timestamp_ms: int,
        transactional_producer: int | None = None,
    ) -> None:  # fmt: skip
        """One record of a loading partition, in log order (see GroupMetadataManager.replay);
        `transactional_producer` is the producer id of a record of a transactional batch."""
        self.replay_record(partition, key, value, offset, transactional_producer)

    def replay_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker of a loading partition, in log order."""
        with self._lock:
            self.core.replay_marker(partition, producer_id, commit)

    def owned_partitions(self) -> set[int]:
        with self._lock:
            return self.core.manager.owned_partitions()

    def groups(self) -> list[GroupMetadata]:
        """The groups served (for metrics; read them, do not change them)."""
        with self._lock:
            return self.core.manager.groups()

    # ---------------------------------------------------------------------------------------------
    # requests

    def handle_join_group(
        self, group_id: str, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
        rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], callback: JoinCallback,
    ) -> None:  # fmt: skip
        request = JoinRequest(
            member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
            protocol_type, protocols, Once(callback),
        )  # fmt: skip
        self._run(self.core.handle_join_group, group_id, request)

    def handle_sync_group(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes], callback: SyncCallback,
    ) -> None:  # fmt: skip
        self._run(
            self.core.handle_sync_group, group_id, generation_id, member_id, group_instance_id, protocol_type,
            protocol_name, assignments, Once(callback),
        )  # fmt: skip

    def handle_heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
        return self._run(self.core.handle_heartbeat, group_id, member_id, group_instance_id, generation_id)

    def handle_leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> LeaveGroupResult:
        return self._run(self.core.handle_leave_group, group_id, members)

    def handle_commit_offsets(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
        offsets: dict[TopicPartition, CommittedOffset], callback: CommitCallback,
    ) -> None:  # fmt: skip
        self._run(
            self.core.handle_commit_offsets, group_id, member_id, group_instance_id, generation_id, offsets,
            Once(callback),
        )  # fmt: skip

    def handle_txn_commit_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, member_id: str, group_instance_id: str | None,
        generation_id: int, offsets: dict[TopicPartition, CommittedOffset], callback: TxnOffsetCallback,
    ) -> None:  # fmt: skip
        self._run(
            self.core.handle_txn_commit_offsets, group_id, TxnProducer(producer_id, producer_epoch), member_id,
            group_instance_id, generation_id, offsets, Once(callback),
        )  # fmt: skip

    def handle_write_txn_marker(
        self, partitions: list[int], producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
        callback: MarkerCallback,
    ) -> None:  # fmt: skip
        """Write the marker to the partitions this coordinator owns, then complete the producer's
        offsets there; callback({partition: error_code}) once, later."""
        reply = Once(callback)
        results = {p: self._run(self.core.check_txn_marker, p) for p in dict.fromkeys(partitions)}
        owned = [p for p, code in results.items() if code == Errors.NONE]
        if not owned:
            reply(results)
            return

        def written(codes: dict[int, int]) -> None:
            for partition in owned:
                code = codes.get(partition, Errors.UNKNOWN_SERVER_ERROR)
                if code == Errors.NONE:
                    code = self._run(self.core.handle_txn_completion, partition, producer_id, commit)
                results[partition] = code
            reply(results)

        try:
            self._store.write_txn_marker(owned, producer_id, producer_epoch, commit, coordinator_epoch, Once(written))
        except Exception:
            logger.exception("writing a transaction marker to __consumer_offsets failed")
            Once(written)({})

    def handle_fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False
    ) -> tuple[int, dict[TopicPartition, FetchedOffset]]:
        return self._run(self.core.handle_fetch_offsets, group_id, partitions, require_stable)

    def cleanup_expired_offsets(self) -> int:
        return self._run(self.core.cleanup_expired_offsets)

    def handle_list_groups(self, states: set[str] | None) -> tuple[int, list[ListedGroup]]:
        return self._run(self.core.handle_list_groups, states)

    def handle_describe_group(self, group_id: str) -> DescribedGroup:
        return self._run(self.core.handle_describe_group, group_id)

    def handle_delete_groups(self, group_ids: list[str], callback: DeleteGroupsCallback) -> None:
        self._run(self.core.handle_delete_groups, group_ids, Once(callback))

    def handle_delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                              callback: OffsetDeleteCallback) -> None:
        self._run(self.core.handle_delete_offsets, group_id, partitions, Once(callback))
