"""`ControllerEventProcessor`: what the single controller event thread does with each event
(Kafka's KafkaController.process): the election and failover, resignation, and the dispatch of
every other event to its handler (`cluster_events`, `admin_events`), which only an active
controller runs (a standby answers waiting callers NOT_CONTROLLER).

Election (Kafka's elect): read `/controller` (watching it). If another controller holds it, stay
standby. If it names this controller in this ZooKeeper session but this instance is not active
(it resigned after ZooKeeper trouble), take it up again with the current epoch. Otherwise run
`elect_controller`; the winner fails over: it reads the cluster (`ClusterReader.snapshot`, which
also sets the watches), hands it to the core, carries out the outcome, then processes pending
ISR change notifications, `/admin/reassign_partitions` and preferred replica elections and
schedules the leader imbalance check. A failover that fails deletes `/controller` so that any controller may take over.

Failures while processing: `ControllerMovedError` (a fenced write found a newer controller
epoch) resigns at once; a ZooKeeper error (connection loss, timeout) resigns too, since the
context may no longer match ZooKeeper, and a Reelect is scheduled to reload it. Either way a
waiting caller is answered NOT_CONTROLLER. Any other error is logged and the loop goes on.
After every event that changed the context (or controllership) a fresh `ControllerView` is
published.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from services.common.errors import KafkaError
from services.common.zk import ControllerEpoch, ControllerMovedError, OdradekZkClient
from services.controller.admin_events import AUTO_REBALANCE_KEY, FIRST_REBALANCE_DELAY_S, AdminEventHandlers
from services.controller.channel_manager import ControllerChannelManager
from services.controller.executor import DEFAULT_MAX_ATTEMPTS, ZOOKEEPER_ERRORS, EffectsExecutor
from services.controller.scheduler import EventScheduler
from services.controller.service_events import ConfigChangeNotification
from services.controller.state.config import ControllerConfig
from services.controller.state.core import ClusterSnapshot, ControllerCore
from services.controller.state.events import (
    AlterIsrReceived,
    ApiPartitionReassignment,
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    BrokerModifications,
    ControlledShutdown,
    ControllerChange,
    ControllerEvent,
    CreatePartitions,
    CreateTopics,
    DeleteTopics,
    ElectionTrigger,
    ElectionType,
    Expire,
    IsrChangeNotification,
    LeaderAndIsrResponseReceived,
    ListPartitionReassignments,
    LogDirEventNotification,
    PartitionModifications,
    Reelect,
    RegisterBrokerAndReelect,
    ReplicaLeaderElection,
    Startup,
    TopicChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
    TopicUncleanLeaderElectionEnable,
    UncleanLeaderElectionEnable,
    UpdateMetadataResponseReceived,
    ZkPartitionReassignment,
    controller_moved,
)
from services.controller.view import NO_CONTROLLER, ControllerView, view_of
from services.controller.zk_reader import ClusterReader

logger = logging.getLogger(__name__)

REELECT_KEY = "reelect"
DEFAULT_RETRY_BACKOFF_S = 1.0
ELECTION_EVENTS = (Startup, ControllerChange, Reelect, RegisterBrokerAndReelect, Expire)


class ControllerEventProcessor(AdminEventHandlers):
    def __init__(
        self,
        *,
        controller_id: int,
        endpoint: str,
        cluster_id: str,
        config: ControllerConfig,
        core: ControllerCore,
        zk: OdradekZkClient,
        reader: ClusterReader,
        channels: ControllerChannelManager,
        scheduler: EventScheduler,
        session_id: Callable[[], int],
        retry_backoff_s: float = DEFAULT_RETRY_BACKOFF_S,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        self.controller_id = controller_id
        self.endpoint = endpoint
        self.cluster_id = cluster_id
        self.config = config
        self.core = core
        self.zk = zk
        self.reader = reader
        self.channels = channels
        self.scheduler = scheduler
        self.executor = EffectsExecutor(zk, core.context, self._send, max_attempts)
        self.active = False
        self.active_controller_id = NO_CONTROLLER
        self.last_config_change = ""
        self.view = ControllerView(controller_id, cluster_id)
        self._published: tuple | None = None
        self._session_id = session_id
        self._retry_backoff_s = retry_backoff_s
        self._handlers: dict[type, Callable[[Any], None]] = {
            Startup: lambda _e: self._elect(),
            ControllerChange: lambda _e: self._maybe_resign(),
            Reelect: self._on_reelect,
            RegisterBrokerAndReelect: lambda _e: self._elect(),
            Expire: self._on_expire,
            BrokerChange: self._on_broker_change,
            BrokerModifications: self._on_broker_modifications,
            TopicChange: self._on_topic_change,
            PartitionModifications: self._on_partition_modifications,
            TopicDeletion: self._on_topic_deletion,
            TopicDeletionStopReplicaResponseReceived: self._on_stop_replica_response,
            IsrChangeNotification: self._on_isr_change_notification,
            LogDirEventNotification: self._on_log_dir_event_notification,
            ConfigChangeNotification: self._on_config_change_notification,
            UncleanLeaderElectionEnable: self._on_unclean_leader_election_enable,
            TopicUncleanLeaderElectionEnable: self._on_topic_unclean_leader_election_enable,
            LeaderAndIsrResponseReceived: self._on_leader_and_isr_response,
            UpdateMetadataResponseReceived: self._on_update_metadata_response,
            CreateTopics: self._on_create_topics,
            DeleteTopics: self._on_delete_topics,
            CreatePartitions: self._on_create_partitions,
            ControlledShutdown: self._on_controlled_shutdown,
            AlterIsrReceived: self._on_alter_isr,
            ReplicaLeaderElection: self._on_replica_leader_election,
            AutoPreferredReplicaLeaderElection: self._on_auto_rebalance,
            ApiPartitionReassignment: self._on_api_partition_reassignment,
            ZkPartitionReassignment: self._on_zk_partition_reassignment,
            ListPartitionReassignments: self._on_list_partition_reassignments,
        }

    # --- the event loop's processor ----------------------------------------------------------

    def process(self, event: ControllerEvent) -> None:
        handler = self._handlers.get(type(event))
        try:
            if handler is None:
                logger.warning("No handler for controller event %r", event)
                event.preempt()
            elif not self.active and not isinstance(event, ELECTION_EVENTS):
                event.preempt()
            else:
                handler(event)
        except ControllerMovedError as e:
            logger.warning("Controller moved while processing %s: %s", type(event).__name__, e)
            self._answer(event, controller_moved())
            self._resign_and_reelect()
        except ZOOKEEPER_ERRORS as e:
            logger.error("ZooKeeper failed while processing %s: %r", type(event).__name__, e)
            self._answer(event, controller_moved())
            self._resign_and_reelect()
        except KafkaError as e:
            logger.warning("Controller event %s failed: %s", type(event).__name__, e)
            self._answer(event, e)
        except Exception:
            logger.exception("Error processing controller event %r", event)
            self._answer(event, KafkaError("The controller failed to process the request"))
        finally:
            self._publish()

    def shutdown(self) -> None:
        """Resign on shutdown (call once the event thread has stopped)."""
        if self.active:
            self._resign()
        self.active_controller_id = NO_CONTROLLER
        self._publish()

    def _publish(self) -> None:
        """A new view, unless nothing it shows can have changed (the gauges walk every partition:
        brokers' answers, which change nothing, do not pay for that)."""
        published = (self.active, self.active_controller_id, self.context.revision, self.executor.failed_writes)
        if published == self._published:
            return
        self._published = published
        self.view = view_of(
            self.controller_id,
            self.cluster_id,
            self.active,
            self.active_controller_id,
            self.context,
            self.executor.failed_writes,
        )

    # --- controllership ----------------------------------------------------------------------

    def _on_reelect(self, _event: Reelect) -> None:
        self._maybe_resign()
        self._elect()

    def _on_expire(self, _event: Expire) -> None:
        self.active_controller_id = NO_CONTROLLER
        if self.active:
            self._resign()

    def _maybe_resign(self) -> None:
        was_active = self.active
        info = self.reader.controller()
        self.active_controller_id = NO_CONTROLLER if info is None else info.controller_id
        if was_active and self.active_controller_id != self.controller_id:
            self._resign()

    def _elect(self) -> None:
        stat = self.reader.controller_stat()
        info = self.reader.controller() if stat is not None else None
        if info is not None and stat is not None:
            self.active_controller_id = info.controller_id
            if info.controller_id != self.controller_id or self.active:
                return
            if stat.ephemeralOwner != self._session_id():
                # an earlier process of this controller, gone: no controller is active until its
                # session expires and the znode's deletion brings a Reelect
                self.active_controller_id = NO_CONTROLLER
                logger.info("/controller names this controller from an earlier ZooKeeper session")
                return
            epoch = self.reader.controller_epoch()
            if epoch is None:
                return
            logger.info("Taking up controllership again with epoch %d", epoch.epoch)
        else:
            try:
                epoch = self.zk.elect_controller(self.controller_id, self.endpoint)
            except ControllerMovedError:
                info = self.reader.controller()
                self.active_controller_id = NO_CONTROLLER if info is None else info.controller_id
                logger.info(
                    "Controller election lost; the active controller is %d", self.active_controller_id
                )
                return
        self.active_controller_id = self.controller_id
        try:
            self._failover(epoch)
        except (ControllerMovedError, *ZOOKEEPER_ERRORS):
            raise
        except Exception:
            logger.exception("Controller failover failed; giving up controllership")
            self._trigger_controller_move(epoch.zk_version)

    def _failover(self, epoch: ControllerEpoch) -> None:
        """Kafka's onControllerFailover."""
        logger.info("Controller %d elected with epoch %d", self.controller_id, epoch.epoch)
        snapshot = self._without_unknown_deletions(self.reader.snapshot(epoch), epoch.zk_version)
        self.last_config_change = (self.reader.config_changes() or [""])[-1]
        self.active = True
        self._execute(self.core.on_controller_failover(snapshot))
        self._on_isr_change_notification(IsrChangeNotification())
        self._on_log_dir_event_notification(LogDirEventNotification())
        self._on_zk_partition_reassignment(ZkPartitionReassignment())
        self._on_replica_leader_election(
            ReplicaLeaderElection(None, ElectionType.PREFERRED, ElectionTrigger.ZK_TRIGGERED)
        )
        interval_s = self.config.leader_imbalance_check_interval_seconds
        self._schedule_auto_rebalance(min(FIRST_REBALANCE_DELAY_S, interval_s))
        logger.info(
            "Controller %d is active: epoch %d, %d brokers, %d topics",
            self.controller_id,
            epoch.epoch,
            len(snapshot.brokers),
            len(snapshot.topics),
        )

    def _without_unknown_deletions(self, snapshot: ClusterSnapshot, epoch_zk_version: int) -> ClusterSnapshot:
        """Deletion markers of topics that do not exist are removed, as Kafka's failover does."""
        unknown = sorted(snapshot.topics_to_be_deleted - set(snapshot.topics))
        if not unknown:
            return snapshot
        self.zk.delete_topic_deletions(unknown, epoch_zk_version=epoch_zk_version)
        return dataclasses.replace(
            snapshot, topics_to_be_deleted=snapshot.topics_to_be_deleted - set(unknown)
        )

    def _resign(self) -> None:
        """Kafka's onControllerResignation: stop the periodic check, the senders, forget everything."""
        logger.info("Controller %d resigning (epoch %d)", self.controller_id, self.context.epoch)
        self.active = False
        self.scheduler.cancel(AUTO_REBALANCE_KEY)
        self.channels.shutdown()
        self.core.on_controller_resignation()

    def _resign_and_reelect(self) -> None:
        if self.active:
            self._resign()
        self.scheduler.schedule(REELECT_KEY, self._retry_backoff_s, Reelect())

    def _trigger_controller_move(self, epoch_zk_version: int) -> None:
        """Resign and delete `/controller` (fenced) so that any controller may be elected."""
        if self.active:
            self._resign()
        self.active_controller_id = NO_CONTROLLER
        try:
            self.zk.delete_controller(epoch_zk_version=epoch_zk_version)
        except Exception as e:
            logger.warning("Could not delete /controller: %r", e)
        self.scheduler.schedule(REELECT_KEY, self._retry_backoff_s, Reelect())
