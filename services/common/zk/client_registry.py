"""Operations on cluster membership and cluster-wide allocations: broker and coordinator
registrations (a restarted process first waits out its previous session, see `previous_session`),
the cluster id, broker sequence ids and producer id blocks."""

from __future__ import annotations

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from services.common.shared_types import BrokerInfo
from services.common.zk import brokers, cluster_id, coordinators, producer_ids
from services.common.zk.access import Watch, ZkAccess
from services.common.zk.codec import CONFLICT, ConditionalUpdate, Versioned
from services.common.zk.coordinators import CoordinatorInfo, CoordinatorOwnership
from services.common.zk.previous_session import await_previous_session
from services.common.zk.producer_ids import ProducerIdBlock

PRODUCER_ID_ALLOCATION_ATTEMPTS = 100


class RegistryOps(ZkAccess):
    # -- brokers ------------------------------------------------------------------------------
    def register_broker(self, info: BrokerInfo) -> int:
        """Creates `/brokers/ids/<id>` for this session; returns the broker epoch (its czxid)."""
        path = brokers.broker_path(info.broker_id)
        return self._register_ephemeral(path, brokers.encode_broker(info), f"broker {info.broker_id}").czxid

    def await_previous_broker_session(self, broker_id: int, session_timeout_ms: int) -> int:
        """Waits until no other session holds `/brokers/ids/<id>`; returns the milliseconds waited."""
        return await_previous_session(self.zk, brokers.broker_path(broker_id), f"broker {broker_id}",
                                      session_timeout_ms, clock=self.clock)

    def update_broker_info(self, info: BrokerInfo) -> None:
        self.zk.set(brokers.broker_path(info.broker_id), brokers.encode_broker(info))

    def get_broker(self, broker_id: int) -> BrokerInfo | None:
        """A registration, its broker epoch the znode's czxid."""
        found = self._get(brokers.broker_path(broker_id))
        if found is None:
            return None
        return brokers.decode_broker(broker_id, found[0], found[1].czxid)

    def get_live_broker_ids(self, watch: Watch | None = None) -> list[int]:
        return sorted(int(name) for name in self._children(brokers.BROKER_IDS_PATH, watch))

    def get_all_brokers(self) -> dict[int, BrokerInfo]:
        ids = self.get_live_broker_ids()
        found = self._get_many((i, brokers.broker_path(i)) for i in ids)
        return {i: brokers.decode_broker(i, data, stat.czxid) for i, (data, stat) in found.items()}

    def generate_broker_sequence_id(self) -> int:
        """A new broker sequence id: the data version of `/brokers/seqid` after an empty write."""
        try:
            return self.zk.set(brokers.BROKER_SEQID_PATH, b"").version
        except NoNodeError:
            self.zk.ensure_path(brokers.BROKER_SEQID_PATH)
            return self.zk.set(brokers.BROKER_SEQID_PATH, b"").version

    # -- coordinators -------------------------------------------------------------------------
    def register_coordinator(self, coordinator_id: int, endpoint: str, kafka_endpoint: str | None = None) -> int:
        """Creates `/coordinators/ids/<id>` for this session; returns its registration epoch (czxid)."""
        info = CoordinatorInfo(coordinator_id, endpoint, self.clock.time_ms(), kafka_endpoint)
        path = coordinators.coordinator_path(coordinator_id)
        return self._register_ephemeral(
            path, coordinators.encode_coordinator(info), f"coordinator {coordinator_id}"
        ).czxid

    def await_previous_coordinator_session(self, coordinator_id: int, session_timeout_ms: int) -> int:
        """Waits until no other session holds `/coordinators/ids/<id>`; returns the milliseconds waited."""
        return await_previous_session(self.zk, coordinators.coordinator_path(coordinator_id),
                                      f"coordinator {coordinator_id}", session_timeout_ms, clock=self.clock)

    def get_live_coordinator_ids(self, watch: Watch | None = None) -> list[int]:
        return sorted(int(name) for name in self._children(coordinators.COORDINATOR_IDS_PATH, watch))

    def get_coordinators(self) -> dict[int, CoordinatorInfo]:
        ids = self.get_live_coordinator_ids()
        found = self._get_many((i, coordinators.coordinator_path(i)) for i in ids)
        return {i: coordinators.decode_coordinator(i, data) for i, (data, _) in found.items()}

    def get_coordinator_registrations(self) -> dict[int, int]:
        """Each live coordinator's registration epoch (the czxid of its `/coordinators/ids/<id>`)."""
        ids = self.get_live_coordinator_ids()
        found = self._get_many((i, coordinators.coordinator_path(i)) for i in ids)
        return {i: stat.czxid for i, (_, stat) in found.items()}

    def get_coordinator_ownership(self, watch: Watch | None = None) -> Versioned[CoordinatorOwnership] | None:
        found = self._get(coordinators.OWNERSHIP_PATH, watch)
        if found is None:
            return None
        return Versioned(coordinators.decode_ownership(found[0]), found[1].version)

    def set_coordinator_ownership(
        self, ownership: CoordinatorOwnership, expected_version: int | None
    ) -> ConditionalUpdate:
        """Writes the ownership map if the znode is still at `expected_version`; with None, creates
        it if it does not exist yet."""
        data = coordinators.encode_ownership(ownership)
        try:
            if expected_version is None:
                self.zk.create(coordinators.OWNERSHIP_PATH, data, makepath=True)
                return ConditionalUpdate(True, 0)
            return ConditionalUpdate(
                True, self.zk.set(coordinators.OWNERSHIP_PATH, data, expected_version).version
            )
        except (BadVersionError, NodeExistsError, NoNodeError):
            return CONFLICT

    # -- cluster id and producer ids ----------------------------------------------------------
    def get_cluster_id(self) -> str | None:
        found = self._get(cluster_id.CLUSTER_ID_PATH)
        return None if found is None else cluster_id.decode_cluster_id(found[0])

    def get_or_create_cluster_id(self, proposed: str | None = None) -> str:
        """The cluster id, creating `/cluster/id` with `proposed` (or a random id) if it is absent."""
        proposed = proposed or cluster_id.new_cluster_id()
        try:
            self.zk.create(cluster_id.CLUSTER_ID_PATH, cluster_id.encode_cluster_id(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            return cluster_id.decode_cluster_id(self.zk.get(cluster_id.CLUSTER_ID_PATH)[0])

    def allocate_producer_id_block(
        self, broker_id: int, size: int = producer_ids.PRODUCER_ID_BLOCK_SIZE
    ) -> ProducerIdBlock:
        """Claims the next block of producer ids: read, compute, write conditionally on the version
        read, and start over when another allocator wrote first."""
        path = producer_ids.PRODUCER_ID_BLOCK_PATH
        for _ in range(PRODUCER_ID_ALLOCATION_ATTEMPTS):
            try:
                data, stat = self.zk.get(path)
            except NoNodeError:
                self.zk.ensure_path(path)
                continue
            block = producer_ids.next_block(producer_ids.decode_block(data), broker_id, size)
            try:
                self.zk.set(path, producer_ids.encode_block(block), stat.version)
                return block
            except (BadVersionError, NoNodeError):
                continue
        raise RuntimeError(
            f"no producer id block after {PRODUCER_ID_ALLOCATION_ATTEMPTS} conflicting attempts"
        )
