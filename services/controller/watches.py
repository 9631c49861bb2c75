"""`WatchBridge`: carries ZooKeeper notifications to the controller's event queue.

kazoo calls watches and session listeners on its own threads. Here they only append a `ZkEvent`
to an unbounded queue, which holds at most one entry per registered one-shot watch plus the
session transitions. One bridge thread turns each entry into a controller event and puts it on
the bounded `ControllerEventManager` queue, waiting while that is full, so kazoo's threads never
block and nothing is lost (Kafka's ZNodeChangeHandlers do the same: they only enqueue).

    kind                        watched (znode, watch)                 event
    controller                  /controller, exists                    ControllerChange (Reelect if gone)
    broker_change               /brokers/ids, children                 BrokerChange
    broker_modification         /brokers/ids/<id>, exists              BrokerModifications(id)
    topic_change                /brokers/topics, children              TopicChange
    partition_modifications     /brokers/topics/<t>, exists            PartitionModifications(t)
    topic_deletion              /admin/delete_topics, children         TopicDeletion
    isr_change                  /isr_change_notification, children     IsrChangeNotification
    log_dir_event               /log_dir_event_notification, children  LogDirEventNotification
    preferred_replica_election  /admin/preferred_replica_election      ReplicaLeaderElection (ZK-triggered)
    reassign_partitions         /admin/reassign_partitions, exists     ZkPartitionReassignment
    config_change               /config/changes, children              ConfigChangeNotification

Session states: LOST queues Expire ahead of everything (`clear_and_put`); the next CONNECTED
(a new session) queues RegisterBrokerAndReelect. kazoo's NONE events (watches reset with the
session) are dropped.
"""

from __future__ import annotations

import logging
import queue
import threading

from kazoo.protocol.states import KazooState

from services.common.zk import ZkEvent, enqueue_watch
from services.common.zk.access import Watch
from services.controller.service_events import ConfigChangeNotification
from services.controller.state.event_manager import ControllerEventManager
from services.controller.state.events import (
    BrokerChange,
    BrokerModifications,
    ControllerChange,
    ControllerEvent,
    ElectionTrigger,
    ElectionType,
    Expire,
    IsrChangeNotification,
    LogDirEventNotification,
    PartitionModifications,
    Reelect,
    RegisterBrokerAndReelect,
    ReplicaLeaderElection,
    TopicChange,
    TopicDeletion,
    ZkPartitionReassignment,
)

logger = logging.getLogger(__name__)

CONTROLLER = "controller"
BROKER_CHANGE = "broker_change"
BROKER_MODIFICATION = "broker_modification"
TOPIC_CHANGE = "topic_change"
PARTITION_MODIFICATIONS = "partition_modifications"
TOPIC_DELETION = "topic_deletion"
ISR_CHANGE = "isr_change"
LOG_DIR_EVENT = "log_dir_event"
PREFERRED_REPLICA_ELECTION = "preferred_replica_election"
CONFIG_CHANGE = "config_change"
REASSIGN_PARTITIONS = "reassign_partitions"
SESSION = "session"
KINDS = (
    CONTROLLER,
    BROKER_CHANGE,
    BROKER_MODIFICATION,
    TOPIC_CHANGE,
    PARTITION_MODIFICATIONS,
    TOPIC_DELETION,
    ISR_CHANGE,
    LOG_DIR_EVENT,
    PREFERRED_REPLICA_ELECTION,
    CONFIG_CHANGE,
    REASSIGN_PARTITIONS,
)


def _last_segment(path: str | None) -> str:
    return (path or "").rstrip("/").rsplit("/", 1)[-1]


def controller_event_for(zk_event: ZkEvent) -> ControllerEvent | None:
    """The controller event a watch notification stands for (None for session resets)."""
    kind, event_type = zk_event.kind, zk_event.type
    if event_type == "NONE" or zk_event.path is None:
        return None
    match kind:
        case "controller":
            return Reelect() if event_type == "DELETED" else ControllerChange()
        case "broker_change":
            return BrokerChange()
        case "broker_modification":
            segment = _last_segment(zk_event.path)
            return BrokerModifications(int(segment)) if segment.isdigit() else None
        case "topic_change":
            return TopicChange()
        case "partition_modifications":
            return PartitionModifications(_last_segment(zk_event.path))
        case "topic_deletion":
            return TopicDeletion()
        case "isr_change":
            return IsrChangeNotification()
        case "log_dir_event":
            return LogDirEventNotification()
        case "preferred_replica_election":
            return ReplicaLeaderElection(None, ElectionType.PREFERRED, ElectionTrigger.ZK_TRIGGERED)
        case "config_change":
            return ConfigChangeNotification()
        case "reassign_partitions":
            return ZkPartitionReassignment()
    logger.warning("Ignoring a notification of unknown kind %r", kind)
    return None


class WatchBridge:
    def __init__(self, events: ControllerEventManager) -> None:
        self._events = events
        self._queue: queue.Queue[ZkEvent | None] = queue.Queue()
        self._watches = {kind: enqueue_watch(self._queue, kind) for kind in KINDS}
        self._session_lost = False
        self._thread = threading.Thread(target=self._run, name="controller-zk-bridge", daemon=True)

    def watch(self, kind: str) -> Watch:
        """The watch callback of `kind` (the same object each time, so kazoo keeps one per path)."""
        return self._watches[kind]

    def on_session_state(self, state: str) -> None:
        """A kazoo connection listener: only records the transition."""
        self._queue.put_nowait(ZkEvent(SESSION, str(state), ""))

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout_s: float = 5.0) -> None:
        self._queue.put_nowait(None)
        if self._thread.ident is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self._forward(item)
            except Exception:
                logger.exception("Could not forward ZooKeeper notification %r", item)

    def _forward(self, item: ZkEvent) -> None:
        if item.kind == SESSION:
            if item.type == KazooState.LOST:
                logger.warning("ZooKeeper session lost")
                self._session_lost = True
                self._events.clear_and_put(Expire())
            elif item.type == KazooState.CONNECTED and self._session_lost:
                logger.info("New ZooKeeper session established")
                self._session_lost = False
                self._events.put(RegisterBrokerAndReelect())
            return
        event = controller_event_for(item)
        if event is not None:
            self._events.put(event)
