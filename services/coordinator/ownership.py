"""`OwnershipManager`: this coordinator's registration and its share of the internal topics.

Every coordinator registers `/coordinators/ids/<id>` (ephemeral) and watches the live ids and
`/coordinators/ownership`. The live coordinator with the lowest id keeps the ownership map
divided (`divide_partitions`): after every change of the live ids it rewrites the map,
conditionally on its version, bumping the epoch of each partition that changes owner (or whose
owner registered again, as a restarted process with the same id) and giving each partition a
producer id the first time (one block from `/latest_producer_id_block`).
Whenever the partitions this instance owns change, `on_owned(partitions → PartitionOwner)` is
called with the whole new set; the receiver works out what it gained and lost.

ZooKeeper watches and session callbacks only enqueue; one thread rereads and acts. When the
session is lost, this instance owns nothing (others will take its partitions over) until it has
registered again in a new session.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from services.common.topic_partition import TopicPartition
from services.common.zk import OdradekZkClient
from services.common.zk.coordinators import CoordinatorOwnership, PartitionOwner
from services.common.zk.watches import ZkEvent, enqueue_watch
from services.coordinator.partition_assignment import divide_partitions

logger = logging.getLogger(__name__)

REREAD_INTERVAL_S = 5.0
RETRY_BACKOFF_S = 0.5

OwnedPartitions = dict[TopicPartition, PartitionOwner]


class OwnershipManager:
    def __init__(self, zk_raw: KazooClient, zk: OdradekZkClient, coordinator_id: int, endpoint: str,
                 partitions: Iterable[TopicPartition], on_owned: Callable[[OwnedPartitions], None],
                 kafka_endpoint: str | None = None) -> None:
        self._zk_raw = zk_raw
        self._zk = zk
        self.coordinator_id = coordinator_id
        self.endpoint = endpoint
        self.kafka_endpoint = kafka_endpoint
        self._partitions = sorted(set(partitions))
        self._on_owned = on_owned
        self._events: queue.Queue[ZkEvent | None] = queue.Queue()
        self._ids_watch = enqueue_watch(self._events, "ids")
        self._ownership_watch = enqueue_watch(self._events, "ownership")
        self._owned: OwnedPartitions = {}
        self._registered = False
        self._closed = False
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._zk_raw.add_listener(self._on_session_state)
        self._register()
        self._thread = threading.Thread(target=self._run, name="coordinator-ownership", daemon=True)
        self._thread.start()
        self._events.put(ZkEvent("start", "NONE", ""))

    def close(self) -> None:
        self._closed = True
        self._events.put(None)
        if self._thread is not None:
            self._thread.join(10)

    def owned(self) -> OwnedPartitions:
        return dict(self._owned)

    # ------------------------------------------------------------------ kazoo threads: enqueue only

    def _on_session_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._events.put(ZkEvent("session", "LOST", ""))
        elif state == KazooState.CONNECTED:
            self._events.put(ZkEvent("session", "CONNECTED", ""))

    # ------------------------------------------------------------------ the ownership thread

    def _run(self) -> None:
        while not self._closed:
            try:
                event = self._events.get(timeout=REREAD_INTERVAL_S)
            except queue.Empty:
                event = ZkEvent("reread", "NONE", "")
            if event is None or self._closed:
                return
            lost = event.kind == "session" and event.type == "LOST"
            while True:  # one pass handles every notification queued meanwhile
                try:
                    more = self._events.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    return
                lost = lost or (more.kind == "session" and more.type == "LOST")
            try:
                self._handle(lost)
            except Exception:
                logger.warning("Coordinator %d: updating partition ownership failed; retrying",
                               self.coordinator_id, exc_info=True)
                threading.Event().wait(RETRY_BACKOFF_S)
                self._events.put(ZkEvent("retry", "NONE", ""))

    def _handle(self, session_lost: bool) -> None:
        if session_lost:
            logger.warning("Coordinator %d lost its ZooKeeper session; giving up its partitions",
                           self.coordinator_id)
            self._registered = False
            self._set_owned({})
        if not self._zk_raw.connected:
            return
        if not self._registered:
            self._register()
        live = self._zk.get_live_coordinator_ids(self._ids_watch)
        if self.coordinator_id not in live:
            self._registered = False
            self._register()
            live = self._zk.get_live_coordinator_ids(self._ids_watch)
        if live and live[0] == self.coordinator_id:
            self._divide(live)
        found = self._zk.get_coordinator_ownership(self._ownership_watch)
        ownership = found.value if found is not None else CoordinatorOwnership()
        mine = {tp: owner for tp, owner in ownership.partitions.items()
                if owner.owner_id == self.coordinator_id and tp in self._partitions}
        self._set_owned(mine)

    def _register(self) -> None:
        epoch = self._zk.register_coordinator(self.coordinator_id, self.endpoint, self.kafka_endpoint)
        self._registered = True
        logger.info("Coordinator %d registered at %s (epoch %d)", self.coordinator_id, self.endpoint, epoch)

    def _set_owned(self, owned: OwnedPartitions) -> None:
        if owned == self._owned:
            return
        self._owned = owned
        self._on_owned(dict(owned))

    def _divide(self, live: list[int]) -> None:
        """As the lowest live id: rewrite the ownership map until it is divided among `live`."""
        while not self._closed:
            found = self._zk.get_coordinator_ownership()
            current = found.value if found is not None else CoordinatorOwnership()
            registrations = self._zk.get_coordinator_registrations()
            owners = divide_partitions(self._partitions,
                                       {tp: o.owner_id for tp, o in current.partitions.items()},
                                       [c for c in live if c in registrations])
            updated = current.reassigned(owners, registrations)
            missing = [tp for tp in self._partitions if updated.partitions[tp].producer_id < 0]
            if missing:
                block = self._zk.allocate_producer_id_block(self.coordinator_id, size=len(missing))
                updated = updated.with_producer_ids(
                    {tp: block.block_start + i for i, tp in enumerate(missing)})
            if updated == current:
                return
            result = self._zk.set_coordinator_ownership(updated, found.version if found is not None else None)
            if result.succeeded:
                moved = sum(1 for tp in self._partitions
                            if tp not in current.partitions
                            or current.partitions[tp].owner_id != updated.partitions[tp].owner_id)
                logger.info("Coordinator %d divided %d partitions among coordinators %s (%d moved)",
                            self.coordinator_id, len(self._partitions), live, moved)
                return
