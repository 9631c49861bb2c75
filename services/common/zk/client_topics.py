"""Operations on topics: replica assignments, partition states, topic configs and their change
notifications, and ISR change notifications. Controller writes here take `epoch_zk_version` and are
fenced (see `fencing`); a write an admin tool may also make takes `epoch_zk_version=None` for an
unfenced write."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition
from services.common.zk import bounded, configs, isr_change, log_dir_event, partition_state, topics
from services.common.zk.access import Watch, ZkAccess
from services.common.zk.codec import CONFLICT, ConditionalUpdate, Versioned
from services.common.zk.errors import ZnodeFormatError
from services.common.zk.partition_state import PartitionStateZnode
from services.common.zk.topics import TopicAssignment

logger = logging.getLogger(__name__)

SET_STATE_MULTI_ROUNDS = 3
# A partition state write: the partition, its state znode's path, the new data, the expected version.
_StateWrite = tuple[TopicPartition, str, bytes, int]


@dataclass
class PartitionStateUpdates:
    """Per-partition results of a controller's `set_partition_states`: new znode versions, the
    partitions whose expected version was stale (reread and retry them), and other failures."""

    updated: dict[TopicPartition, int] = field(default_factory=dict)
    retry: list[TopicPartition] = field(default_factory=list)
    failed: dict[TopicPartition, Exception] = field(default_factory=dict)


class TopicOps(ZkAccess):
    # -- assignments --------------------------------------------------------------------------
    def create_topic(self, assignment: TopicAssignment, config: Mapping[str, str] | None = None) -> None:
        """Creates the topic's config and assignment znodes in one transaction; TOPIC_ALREADY_EXISTS
        if the assignment exists, INVALID_REQUEST (nothing written) if either is too large for a
        znode (`check_topic_size`)."""
        topic = assignment.topic
        assignment_data, config_data = self.check_topic_size(assignment, config)
        self.zk.ensure_path(topics.TOPICS_PATH)
        self.zk.ensure_path(configs.entity_type_path(configs.TOPIC_ENTITY_TYPE))
        tx = self.transaction()
        config_path = configs.topic_config_path(topic)
        if self.zk.exists(config_path) is None:
            tx.create(config_path, config_data)
        else:
            tx.set_data(config_path, config_data)
        tx.create(topics.topic_path(topic), assignment_data)
        try:
            tx.commit()
        except NodeExistsError as exc:
            raise KafkaError(f"topic {topic!r} already exists", error=Errors.TOPIC_ALREADY_EXISTS) from exc

    @staticmethod
    def check_topic_size(
        assignment: TopicAssignment, config: Mapping[str, str] | None = None
    ) -> tuple[bytes, bytes]:
        """The encoded assignment and config znodes of a topic; INVALID_REQUEST
        (`ZkRequestTooLargeError`) if either exceeds `bounded.ZNODE_MAX_BYTES`, with how many
        partitions it has."""
        assignment_data = topics.encode_topic(assignment)
        config_data = configs.encode_config(config or {})
        try:
            bounded.check_znode_size(topics.topic_path(assignment.topic), assignment_data)
            bounded.check_znode_size(configs.topic_config_path(assignment.topic), config_data)
        except bounded.ZkRequestTooLargeError as exc:
            raise bounded.ZkRequestTooLargeError(
                f"Topic {assignment.topic} with {len(assignment.partitions)} partitions cannot be stored: {exc}"
            ) from None
        return assignment_data, config_data

    def get_all_topics(self, watch: Watch | None = None) -> list[str]:
        return self._children(topics.TOPICS_PATH, watch)

    def get_topic_assignment(
        self, topic: str, watch: Watch | None = None
    ) -> Versioned[TopicAssignment] | None:
        found = self._get(topics.topic_path(topic), watch)
        return None if found is None else Versioned(topics.decode_topic(topic, found[0]), found[1].version)

    def get_topic_assignments(self, names: Iterable[str]) -> dict[str, Versioned[TopicAssignment]]:
        """Assignments of these topics (absent ones and ones that do not decode are left out)."""
        return self._decode_each(self._get_many((t, topics.topic_path(t)) for t in names), topics.decode_topic)

    def set_topic_assignment(
        self, assignment: TopicAssignment, *, epoch_zk_version: int | None, expected_version: int = -1
    ) -> int:
        """Rewrites an existing assignment; returns the znode's new version. INVALID_REQUEST
        (nothing written) if it has grown too large for a znode."""
        data, _ = self.check_topic_size(assignment)
        tx = self._write(epoch_zk_version)
        tx.set_data(topics.topic_path(assignment.topic), data, expected_version)
        return tx.commit()[-1].version

    # -- partition states ---------------------------------------------------------------------
    def get_partitions(self, topic: str) -> list[int]:
        """Partition numbers that have a state znode parent under the topic."""
        return sorted(int(p) for p in self._children(partition_state.partitions_path(topic)))

    def get_partition_state(
        self, tp: TopicPartition, watch: Watch | None = None
    ) -> Versioned[PartitionStateZnode] | None:
        found = self._get(partition_state.partition_state_path(tp), watch)
        if found is None:
            return None
        return Versioned(partition_state.decode_partition_state(tp, found[0]), found[1].version)

    def get_partition_states(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, Versioned[PartitionStateZnode]]:
        """States of these partitions (absent ones and ones that do not decode are left out)."""
        found = self._get_many((tp, partition_state.partition_state_path(tp)) for tp in tps)
        return self._decode_each(found, partition_state.decode_partition_state)

    def create_partition_states(
        self, states: Mapping[TopicPartition, PartitionStateZnode], *, epoch_zk_version: int
    ) -> PartitionStateUpdates:
        """Creates the state znodes (version 0) of new partitions with their missing parents, topic
        by topic in partition order, in fenced multis bounded by `bounded.pack`: a partition's parent
        and state go in the same multi, and a topic's first multi creates its `/partitions`. Every
        multi stands on its own, so a controller that dies between two leaves a prefix of the
        partitions created, and its successor, calling this again for the partitions without state,
        completes the work. A state znode that exists already is kept and reported in `retry` (reread
        it); partitions whose topic is gone are in `failed`. ControllerMovedError if fenced."""
        result = PartitionStateUpdates()
        by_topic: dict[str, dict[TopicPartition, PartitionStateZnode]] = {}
        for tp, state in sorted(states.items()):
            by_topic.setdefault(tp.topic, {})[tp] = state
        for topic, topic_states in by_topic.items():
            self._create_topic_partition_states(topic, topic_states, epoch_zk_version, result)
        return result

    def _create_topic_partition_states(
        self,
        topic: str,
        states: dict[TopicPartition, PartitionStateZnode],
        epoch_zk_version: int,
        result: PartitionStateUpdates,
    ) -> None:
        partitions_path = partition_state.partitions_path(topic)
        have_parent = {TopicPartition(topic, int(p)) for p in self._children(partitions_path)}
        existing = self._get_many(
            (tp, partition_state.partition_state_path(tp)) for tp in states if tp in have_parent
        )
        result.retry.extend(sorted(existing))
        ops: list[tuple[str, bytes]] = []
        if not have_parent and self.zk.exists(partitions_path) is None:
            ops.append((partitions_path, b""))
        groups = []
        for tp, state in states.items():
            if tp in existing:
                continue
            paths = [] if tp in have_parent else [(partition_state.partition_path(tp), b"")]
            paths.append((partition_state.partition_state_path(tp), partition_state.encode_partition_state(state)))
            groups.append(bounded.Group((tp, paths), len(paths), sum(bounded.op_bytes(*op) for op in paths)))
        for chunk in bounded.pack(groups, reserved_ops=1 + len(ops)):
            tx = self.fenced(epoch_zk_version)
            for path, data in ops:
                tx.create(path, data)
            for _, paths in chunk:
                for path, data in paths:
                    tx.create(path, data)
            try:
                tx.commit()
            except (NodeExistsError, NoNodeError):
                for tp, _ in chunk:  # another writer raced this one: find out partition by partition
                    self._create_partition_state(tp, states[tp], epoch_zk_version, result)
            else:
                result.updated.update((tp, 0) for tp, _ in chunk)
            ops = []

    def _create_partition_state(
        self, tp: TopicPartition, state: PartitionStateZnode, epoch_zk_version: int, result: PartitionStateUpdates
    ) -> None:
        tx = self.fenced(epoch_zk_version)
        for parent in (partition_state.partitions_path(tp.topic), partition_state.partition_path(tp)):
            if self.zk.exists(parent) is None:
                tx.create(parent)
        tx.create(partition_state.partition_state_path(tp), partition_state.encode_partition_state(state))
        try:
            tx.commit()
        except NodeExistsError:
            result.retry.append(tp)
        except NoNodeError as exc:
            result.failed[tp] = exc
        else:
            result.updated[tp] = 0

    def set_partition_states(
        self, updates: Mapping[TopicPartition, Versioned[PartitionStateZnode]], *, epoch_zk_version: int
    ) -> PartitionStateUpdates:
        """The controller's leader/ISR writes: each partition's new state, conditional on the version
        it replaces. They go in fenced multis bounded by `bounded.pack`, all sent before any answer
        is awaited. ZooKeeper names the first op of a failed multi: that partition's version was
        stale (or its znode is gone), and the multi is sent again without it, a few rounds at most;
        what is left then is written partition by partition, each in its own fenced transaction
        (pipelined), so that only the stale ones fail. ControllerMovedError if fenced."""
        groups = []
        for tp, update in updates.items():
            path = partition_state.partition_state_path(tp)
            data = partition_state.encode_partition_state(update.value)
            groups.append(bounded.Group((tp, path, data, update.version), 1, bounded.op_bytes(path, data)))
        result = PartitionStateUpdates()
        chunks = bounded.pack(groups)
        for _ in range(SET_STATE_MULTI_ROUNDS):
            chunks = self._set_partition_state_multis(chunks, epoch_zk_version, result)
        self._set_each_partition_state([w for chunk in chunks for w in chunk], epoch_zk_version, result)
        return result

    def _set_partition_state_multis(
        self, chunks: list[list[_StateWrite]], epoch_zk_version: int, result: PartitionStateUpdates
    ) -> list[list[_StateWrite]]:
        """Sends each chunk as one multi (pipelined); returns the failed chunks without the write
        that failed them, which goes to `result`."""
        pending = []
        for chunk in chunks:
            tx = self.fenced(epoch_zk_version)
            for _, path, data, version in chunk:
                tx.set_data(path, data, version)
            pending.append((chunk, tx, tx.commit_async()))
        again = []
        for chunk, tx, raw in pending:
            results = raw.get()
            try:
                stats = tx.outcome(results)
            except (BadVersionError, NoNodeError) as exc:
                index = next(i for i, r in enumerate(results[1:]) if isinstance(r, BadVersionError | NoNodeError))
                tp = chunk[index][0]
                if isinstance(exc, BadVersionError):
                    result.retry.append(tp)
                else:
                    result.failed[tp] = exc
                if len(chunk) > 1:
                    again.append(chunk[:index] + chunk[index + 1 :])
                continue
            result.updated.update((tp, stat.version) for (tp, *_), stat in zip(chunk, stats, strict=True))
        return again

    def _set_each_partition_state(
        self, writes: list[_StateWrite], epoch_zk_version: int, result: PartitionStateUpdates
    ) -> None:
        pending = []
        for tp, path, data, version in writes:
            tx = self.fenced(epoch_zk_version).set_data(path, data, version)
            pending.append((tp, tx, tx.commit_async()))
        for tp, tx, raw in pending:
            try:
                result.updated[tp] = tx.outcome(raw.get())[0].version
            except BadVersionError:
                result.retry.append(tp)
            except NoNodeError as exc:
                result.failed[tp] = exc

    def update_leader_and_isr(
        self, tp: TopicPartition, state: PartitionStateZnode, expected_version: int
    ) -> ConditionalUpdate:
        """A partition leader's ISR change: writes `state` only if the znode is still at
        `expected_version`; returns the new version, or CONFLICT if the controller or another
        write got there first (the leader rereads the state and reconsiders)."""
        path = partition_state.partition_state_path(tp)
        try:
            stat = self.zk.set(path, partition_state.encode_partition_state(state), expected_version)
        except (BadVersionError, NoNodeError):
            return CONFLICT
        return ConditionalUpdate(True, stat.version)

    # -- topic configs ------------------------------------------------------------------------
    def get_topic_config(self, topic: str) -> dict[str, str]:
        path = configs.topic_config_path(topic)
        found = self._get(path)
        return {} if found is None else configs.decode_config(found[0], path)

    def set_topic_config(self, topic: str, config: Mapping[str, str], *, notify: bool = True) -> None:
        """Writes the topic's config overrides and, with `notify`, a change notification for
        brokers, in one transaction."""
        self._set_entity_config(configs.TOPIC_ENTITY_TYPE, configs.topic_config_path(topic),
                                configs.topic_entity_path(topic), config, notify)

    def get_broker_config(self, entity: str) -> dict[str, str]:
        """The dynamic configs of a broker id or of `<default>` (the cluster-wide defaults)."""
        path = configs.broker_config_path(entity)
        found = self._get(path)
        return {} if found is None else configs.decode_config(found[0], path)

    def set_broker_config(self, entity: str, config: Mapping[str, str]) -> None:
        """Writes the dynamic configs of a broker id or `<default>` and a change notification, in one
        transaction."""
        self._set_entity_config(configs.BROKER_ENTITY_TYPE, configs.broker_config_path(entity),
                                configs.broker_entity_path(entity), config, True)

    def get_user_config(self, user: str) -> dict[str, str]:
        """A user's configs: SCRAM credentials by mechanism name."""
        path = configs.user_config_path(user)
        found = self._get(path)
        return {} if found is None else configs.decode_config(found[0], path)

    def set_user_config(self, user: str, config: Mapping[str, str]) -> None:
        """Writes a user's configs and a change notification, in one transaction."""
        self._set_entity_config(configs.USER_ENTITY_TYPE, configs.user_config_path(user),
                                configs.user_entity_path(user), config, True)

    def _set_entity_config(self, entity_type: str, path: str, entity_path: str, config: Mapping[str, str],
                           notify: bool) -> None:
        data = configs.encode_config(config)
        bounded.check_znode_size(path, data)
        self.zk.ensure_path(configs.CONFIG_CHANGES_PATH)
        self.zk.ensure_path(configs.entity_type_path(entity_type))
        tx = self.transaction()
        if self.zk.exists(path) is None:
            tx.create(path, data)
        else:
            tx.set_data(path, data)
        if notify:
            tx.create(configs.config_change_path(), configs.encode_config_change(entity_path), sequence=True)
        tx.commit()

    def get_config_change_notifications(self, watch: Watch | None = None) -> list[str]:
        """The names (`config_change_<seq>`) of pending notifications, oldest first."""
        return self._children(configs.CONFIG_CHANGES_PATH, watch)

    def get_config_change(self, name: str) -> str | None:
        found = self._get(f"{configs.CONFIG_CHANGES_PATH}/{name}")
        return None if found is None else configs.decode_config_change(found[0])

    def delete_config_change_notifications(self, names: Iterable[str]) -> None:
        for name in names:
            try:
                self.zk.delete(f"{configs.CONFIG_CHANGES_PATH}/{name}")
            except NoNodeError:
                continue

    # -- ISR change notifications -------------------------------------------------------------
    def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str:
        """Announces ISR changes to the controller; returns the notification's sequence number.
        So many partitions that one notification would exceed `bounded.MULTI_MAX_BYTES` are
        announced in several (created in order; the last one's number is returned)."""
        sequence = ""
        for chunk in isr_change.split_partitions(partitions, bounded.MULTI_MAX_BYTES):
            data = isr_change.encode_isr_change(chunk)
            try:
                path = self.zk.create(isr_change.isr_change_path(), data, sequence=True)
            except NoNodeError:
                path = self.zk.create(isr_change.isr_change_path(), data, sequence=True, makepath=True)
            sequence = isr_change.sequence_number(path)
        return sequence

    def get_isr_change_notifications(self, watch: Watch | None = None) -> list[str]:
        """Sequence numbers of pending notifications, oldest first."""
        names = self._children(isr_change.ISR_CHANGE_NOTIFICATION_PATH, watch)
        return [isr_change.sequence_number(n) for n in names if n.startswith(isr_change.SEQUENCE_PREFIX)]

    def get_isr_change_partitions(self, sequence_numbers: Iterable[str]) -> set[TopicPartition]:
        """The partitions named by these notifications (ones already deleted are skipped)."""
        found = self._get_many((s, isr_change.isr_change_path(s)) for s in sequence_numbers)
        return {tp for data, _ in found.values() for tp in isr_change.decode_isr_change(data)}

    def delete_isr_change_notifications(
        self, sequence_numbers: Iterable[str], *, epoch_zk_version: int
    ) -> None:
        self._delete_each_fenced((isr_change.isr_change_path(s) for s in sequence_numbers), epoch_zk_version)

    # -- log dir event notifications ----------------------------------------------------------
    def create_log_dir_event_notification(self, broker_id: int) -> str:
        """Tells the controller a log dir of `broker_id` failed; returns the sequence number."""
        data = log_dir_event.encode_log_dir_event(broker_id)
        try:
            path = self.zk.create(log_dir_event.log_dir_event_path(), data, sequence=True)
        except NoNodeError:
            path = self.zk.create(log_dir_event.log_dir_event_path(), data, sequence=True, makepath=True)
        return log_dir_event.sequence_number(path)

    def get_log_dir_event_notifications(self, watch: Watch | None = None) -> list[str]:
        """Sequence numbers of pending notifications, oldest first."""
        names = self._children(log_dir_event.LOG_DIR_EVENT_NOTIFICATION_PATH, watch)
        return [log_dir_event.sequence_number(n) for n in names if n.startswith(log_dir_event.SEQUENCE_PREFIX)]

    def get_log_dir_event_brokers(self, sequence_numbers: Iterable[str]) -> set[int]:
        """The brokers named by these notifications (deleted or unreadable ones are skipped)."""
        found = self._get_many((s, log_dir_event.log_dir_event_path(s)) for s in sequence_numbers)
        brokers = set()
        for sequence, (data, _) in found.items():
            try:
                brokers.add(log_dir_event.decode_log_dir_event(data))
            except ZnodeFormatError as exc:
                logger.warning("ignoring log dir event notification %s: %s", sequence, exc)
        return brokers

    def delete_log_dir_event_notifications(
        self, sequence_numbers: Iterable[str], *, epoch_zk_version: int
    ) -> None:
        self._delete_each_fenced(
            (log_dir_event.log_dir_event_path(s) for s in sequence_numbers), epoch_zk_version)
