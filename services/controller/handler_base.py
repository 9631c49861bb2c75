"""`HandlerBase`: what the controller's event handlers share: the core, ZooKeeper (reader and
client), the effects executor, the channel manager, the scheduler, whether this instance is
active, and the repairs ("run the same change again") that follow version conflicts.

`reconcile` is the generic repair, used after any decision that is not an election of a known
kind (broker changes, new partitions, topic deletion, config changes): it re-elects the
partitions from their reloaded state with the offline strategy (Online -> Online: the first live
ISR replica in assignment order leads, dead replicas leave the ISR, the leader epoch goes up and
every replica and broker is told). For topics being deleted it sends again the StopReplica
(delete) requests that the conflict dropped. Elections of a known strategy are repeated with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from services.common.topic_partition import TopicPartition
from services.common.zk import OdradekZkClient
from services.controller.channel_manager import ControllerChannelManager
from services.controller.executor import EffectsExecutor, Execution, Retry
from services.controller.scheduler import EventScheduler
from services.controller.state.config import ControllerConfig
from services.controller.state.context import ControllerContext
from services.controller.state.core import ControllerCore
from services.controller.state.effects import BrokerRequest, Outcome, PartitionStateChangeOutcome
from services.controller.state.election import ElectionStrategy, OfflinePartitionLeaderElectionStrategy
from services.controller.state.events import ControllerEvent
from services.controller.state.request_batch import RequestBatch
from services.controller.state.states import PartitionState, ReplicaState
from services.controller.zk_reader import ClusterReader

logger = logging.getLogger(__name__)

ELECTABLE_STATES = (PartitionState.ONLINE_PARTITION, PartitionState.OFFLINE_PARTITION)


class HandlerBase:
    controller_id: int
    config: ControllerConfig
    core: ControllerCore
    zk: OdradekZkClient
    reader: ClusterReader
    executor: EffectsExecutor
    channels: ControllerChannelManager
    scheduler: EventScheduler
    active: bool
    active_controller_id: int

    @property
    def context(self) -> ControllerContext:
        return self.core.context

    def _execute(self, outcome: Outcome, retry: Retry | None = None) -> Execution:
        return self.executor.execute(outcome, self._reconcile if retry is None else retry)

    def _send(self, requests: list[BrokerRequest]) -> None:
        """Hand requests to the brokers' senders, first following the context's live brokers."""
        self.channels.update_brokers(self.context.live_or_shutting_down_brokers())
        self.channels.send(requests)

    @staticmethod
    def _answer(event: ControllerEvent, result: Any) -> None:
        callback: Callable[[Any], None] | None = getattr(event, "callback", None)
        if callback is not None:
            callback(result)

    # --- repairs after version conflicts -----------------------------------------------------

    def _reconcile(self, partitions: list[TopicPartition]) -> Outcome:
        context = self.context
        known = set(context.all_partitions())
        deleting = [p for p in partitions if p in known and context.is_topic_queued_for_deletion(p.topic)]
        electable = [
            p
            for p in partitions
            if p in known
            and not context.is_topic_queued_for_deletion(p.topic)
            and context.partition_state(p) in ELECTABLE_STATES
        ]
        outcome: Outcome = self.core.partition_state_machine.handle_state_changes(
            electable, PartitionState.ONLINE_PARTITION, OfflinePartitionLeaderElectionStrategy(False)
        )
        if deleting:
            batch = RequestBatch(context)
            for partition in deleting:
                for replica in context.replicas_for_partitions([partition]):
                    if context.replica_state(replica) == ReplicaState.REPLICA_DELETION_STARTED:
                        batch.add_stop_replica([replica.replica], partition, delete_partition=True)
            outcome.effects.extend(batch.build())
        return outcome

    def _election_retry(self, strategy: ElectionStrategy) -> Retry:
        def retry(partitions: list[TopicPartition]) -> PartitionStateChangeOutcome:
            known = set(self.context.all_partitions())
            return self.core.partition_state_machine.handle_state_changes(
                [p for p in partitions if p in known], PartitionState.ONLINE_PARTITION, strategy
            )

        return retry
