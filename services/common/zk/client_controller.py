"""Operations of controller election and of the controller's administrative duties: electing and
resigning, reading the active controller and epoch, topic deletion, and the `/admin` requests."""

from __future__ import annotations

from collections.abc import Iterable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from services.common.shared_types import INITIAL_CONTROLLER_EPOCH
from services.common.topic_partition import TopicPartition
from services.common.zk import admin, bounded, configs, controller, partition_state, topics
from services.common.zk.access import Watch, ZkAccess
from services.common.zk.controller import ControllerEpoch, ControllerInfo
from services.common.zk.errors import ControllerMovedError
from services.common.zk.previous_session import await_previous_session

REASSIGNMENT_REWRITE_ATTEMPTS = 5


class ControllerOps(ZkAccess):
    # -- election -----------------------------------------------------------------------------
    def elect_controller(self, controller_id: int, endpoint: str | None = None) -> ControllerEpoch:
        """Kafka's registerControllerAndIncrementControllerEpoch: in one transaction, creates the
        ephemeral `/controller` and sets `/controller_epoch` to epoch + 1 conditionally on the
        version read (creating it at 0 first if absent). Returns the new epoch and its zk version,
        which every fenced write of this controller checks. ControllerMovedError if another
        controller won; `get_controller()` then names it."""
        current = self.get_controller_epoch() or self._create_controller_epoch()
        new_epoch = current.epoch + 1
        info = ControllerInfo(controller_id, self.clock.time_ms(), endpoint)
        tx = self.transaction()
        tx.create(controller.CONTROLLER_PATH, controller.encode_controller(info), ephemeral=True)
        tx.set_data(
            controller.CONTROLLER_EPOCH_PATH,
            controller.encode_controller_epoch(new_epoch),
            current.zk_version,
        )
        try:
            return ControllerEpoch(new_epoch, tx.commit()[1].version)
        except (NodeExistsError, BadVersionError):
            return self._check_elected(controller_id, new_epoch)

    def await_previous_controller_session(self, controller_id: int, session_timeout_ms: int) -> int:
        """Waits until `/controller` no longer names `controller_id` from another session (an
        earlier process of this controller, killed while active); returns the milliseconds waited.
        Another controller holding it is no reason to wait."""
        return await_previous_session(
            self.zk, controller.CONTROLLER_PATH, f"controller {controller_id}", session_timeout_ms,
            names_us=lambda data: controller.decode_controller(data).controller_id == controller_id,
            clock=self.clock,
        )

    def _create_controller_epoch(self) -> ControllerEpoch:
        initial = INITIAL_CONTROLLER_EPOCH
        try:
            self.zk.create(controller.CONTROLLER_EPOCH_PATH, controller.encode_controller_epoch(initial))
            return ControllerEpoch(initial, 0)
        except NodeExistsError:
            found = self.get_controller_epoch()
            if found is None:
                raise RuntimeError(f"{controller.CONTROLLER_EPOCH_PATH} vanished while being read") from None
            return found

    def _check_elected(self, controller_id: int, new_epoch: int) -> ControllerEpoch:
        """After a failed election: this controller did win if `/controller` names it and the epoch
        is the one it wrote (its transaction went through before a lost connection was retried)."""
        active = self.get_controller()
        epoch = self.get_controller_epoch()
        if (
            active is not None
            and active.controller_id == controller_id
            and epoch
            and epoch.epoch == new_epoch
        ):
            return epoch
        winner = "none" if active is None else str(active.controller_id)
        raise ControllerMovedError(f"controller election lost: the active controller is {winner}")

    def get_controller(self, watch: Watch | None = None) -> ControllerInfo | None:
        """The active controller, or None. A watch fires when `/controller` is created, changed or
        deleted (Kafka's ControllerChangeHandler)."""
        found = self._get(controller.CONTROLLER_PATH, watch)
        return None if found is None else controller.decode_controller(found[0])

    def get_controller_epoch(self, watch: Watch | None = None) -> ControllerEpoch | None:
        found = self._get(controller.CONTROLLER_EPOCH_PATH, watch)
        return (
            None
            if found is None
            else ControllerEpoch(controller.decode_controller_epoch(found[0]), found[1].version)
        )

    def delete_controller(self, *, epoch_zk_version: int) -> None:
        """Resigns: deletes `/controller` (fenced, so a deposed controller cannot delete its
        successor's znode). Already absent is fine."""
        try:
            self.fenced(epoch_zk_version).delete(controller.CONTROLLER_PATH).commit()
        except NoNodeError:
            pass

    # -- topic deletion -----------------------------------------------------------------------
    def request_topic_deletion(self, topic: str) -> bool:
        """Creates `/admin/delete_topics/<topic>`; False if the deletion was already requested."""
        try:
            self.zk.create(admin.delete_topic_path(topic), makepath=True)
            return True
        except NodeExistsError:
            return False

    def get_topic_deletions(self, watch: Watch | None = None) -> list[str]:
        return self._children(admin.DELETE_TOPICS_PATH, watch)

    def delete_topic_deletions(self, names: Iterable[str], *, epoch_zk_version: int) -> None:
        self._delete_each_fenced((admin.delete_topic_path(t) for t in names), epoch_zk_version)

    def delete_topic(self, topic: str, *, epoch_zk_version: int) -> None:
        """Deletes the topic's znodes (those that exist) in fenced multis bounded by `bounded.pack`:
        first the partition state znodes, each with its parent in the same multi, in partition
        order; then, in one last multi, `/partitions`, the assignment, the config and the deletion
        request. A controller that dies in between leaves the assignment and the deletion request in
        place, so its successor resumes the deletion and calls this again for what is left."""
        partition_paths = [
            partition_state.partition_path(TopicPartition(topic, int(name)))
            for name in self._children(partition_state.partitions_path(topic))
        ]
        states = self._get_many((path, f"{path}/state") for path in partition_paths)
        groups = []
        for path in partition_paths:
            paths = [f"{path}/state", path] if path in states else [path]
            groups.append(bounded.Group(paths, len(paths), sum(bounded.op_bytes(p) for p in paths)))
        for chunk in bounded.pack(groups):
            self._delete_fenced([p for paths in chunk for p in paths], epoch_zk_version)
        topic_paths = (
            partition_state.partitions_path(topic),
            topics.topic_path(topic),
            configs.topic_config_path(topic),
            admin.delete_topic_path(topic),
        )
        found = self._get_many((p, p) for p in topic_paths)
        self._delete_fenced([p for p in topic_paths if p in found], epoch_zk_version)

    def _delete_fenced(self, paths: list[str], epoch_zk_version: int) -> None:
        """Deletes `paths` in order in one fenced transaction; if one vanished meanwhile, each of
        them on its own (absent ones skipped)."""
        if not paths:
            return
        tx = self.fenced(epoch_zk_version)
        for path in paths:
            tx.delete(path)
        try:
            tx.commit()
        except NoNodeError:
            self._delete_each_fenced(paths, epoch_zk_version)

    # -- reassignment and preferred replica election ------------------------------------------
    def get_partition_reassignment(
        self, watch: Watch | None = None
    ) -> dict[TopicPartition, list[int]] | None:
        found = self._get(admin.REASSIGN_PARTITIONS_PATH, watch)
        return None if found is None else admin.decode_reassignment(found[0])

    def delete_partition_reassignment(self, *, epoch_zk_version: int) -> None:
        self._delete_each_fenced([admin.REASSIGN_PARTITIONS_PATH], epoch_zk_version)

    def create_partition_reassignment(self, reassignment: dict[TopicPartition, list[int]]) -> bool:
        """Creates `/admin/reassign_partitions` as an old tool does; False while one is pending."""
        data = admin.encode_reassignment(reassignment)
        bounded.check_znode_size(admin.REASSIGN_PARTITIONS_PATH, data)
        try:
            self.zk.create(admin.REASSIGN_PARTITIONS_PATH, data, makepath=True)
            return True
        except NodeExistsError:
            return False

    def remove_from_partition_reassignment(
        self, partitions: Iterable[tuple[TopicPartition, list[int] | None]], *, epoch_zk_version: int
    ) -> None:
        """Takes partitions out of `/admin/reassign_partitions` (each only if its target there is the
        given replicas, or whatever it is for None), deleting the znode once empty. The write is
        fenced and conditional on the version read; a concurrent change is read again, a few times
        at most (then BadVersionError)."""
        wanted = list(partitions)
        for attempt in range(REASSIGNMENT_REWRITE_ATTEMPTS):
            found = self._get(admin.REASSIGN_PARTITIONS_PATH)
            if found is None:
                return
            current = admin.decode_reassignment(found[0])
            remaining = {
                tp: replicas
                for tp, replicas in current.items()
                if not any(tp == w and (r is None or list(r) == replicas) for w, r in wanted)
            }
            if remaining == current:
                return
            tx = self.fenced(epoch_zk_version)
            if remaining:
                tx.set_data(admin.REASSIGN_PARTITIONS_PATH, admin.encode_reassignment(remaining), found[1].version)
            else:
                tx.delete(admin.REASSIGN_PARTITIONS_PATH, found[1].version)
            try:
                tx.commit()
                return
            except (BadVersionError, NoNodeError):
                if attempt == REASSIGNMENT_REWRITE_ATTEMPTS - 1:
                    raise

    def request_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> bool:
        """Creates `/admin/preferred_replica_election`; False while an earlier one is pending.
        INVALID_REQUEST (`ZkRequestTooLargeError`) for more partitions than one znode holds."""
        data = admin.encode_preferred_replica_election(partitions)
        bounded.check_znode_size(admin.PREFERRED_REPLICA_ELECTION_PATH, data)
        try:
            self.zk.create(admin.PREFERRED_REPLICA_ELECTION_PATH, data, makepath=True)
            return True
        except NodeExistsError:
            return False

    def get_preferred_replica_election(self, watch: Watch | None = None) -> set[TopicPartition] | None:
        found = self._get(admin.PREFERRED_REPLICA_ELECTION_PATH, watch)
        return None if found is None else admin.decode_preferred_replica_election(found[0])

    def delete_preferred_replica_election(self, *, epoch_zk_version: int) -> None:
        self._delete_each_fenced([admin.PREFERRED_REPLICA_ELECTION_PATH], epoch_zk_version)
