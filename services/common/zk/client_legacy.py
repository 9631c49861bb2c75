"""Operations of the legacy (0.8) ZooKeeper consumer: member registration, partition ownership
claims and committed offsets under `/consumers/<group>`."""

from __future__ import annotations

from kazoo.exceptions import NodeExistsError, NoNodeError

from services.common.topic_partition import TopicPartition
from services.common.zk import consumers
from services.common.zk.access import Watch, ZkAccess
from services.common.zk.consumers import ConsumerRegistration


class LegacyConsumerOps(ZkAccess):
    def register_legacy_consumer(self, group: str, consumer_id: str, subscription: dict[str, int],
                                 pattern: str = consumers.STATIC_PATTERN) -> int:
        """Creates the member's ephemeral `/consumers/<group>/ids/<consumer id>` with its
        subscription ({topic: stream count} when static, {filter regex: stream count} for the
        `white_list`/`black_list` patterns); returns its czxid."""
        registration = ConsumerRegistration(dict(subscription), pattern, self.clock.time_ms())
        path = consumers.consumer_path(group, consumer_id)
        return self._register_ephemeral(
            path, consumers.encode_consumer(registration), f"consumer {consumer_id}"
        ).czxid

    def delete_legacy_consumer(self, group: str, consumer_id: str) -> None:
        try:
            self.zk.delete(consumers.consumer_path(group, consumer_id))
        except NoNodeError:
            pass

    def get_legacy_consumers(self, group: str, watch: Watch | None = None) -> dict[str, ConsumerRegistration]:
        """Every registered member's subscription, read pipelined (`watch` is set on the member
        list); members that vanish meanwhile or do not decode are left out."""
        ids = self.get_legacy_consumer_ids(group, watch)
        found = self._get_many((i, consumers.consumer_path(group, i)) for i in ids)
        decoded = self._decode_each(found, lambda i, data: consumers.decode_consumer(data, i))
        return {i: v.value for i, v in decoded.items()}

    def get_legacy_consumer_ids(self, group: str, watch: Watch | None = None) -> list[str]:
        return self._children(consumers.consumer_ids_path(group), watch)

    def get_legacy_consumer(self, group: str, consumer_id: str) -> ConsumerRegistration | None:
        path = consumers.consumer_path(group, consumer_id)
        found = self._get(path)
        return None if found is None else consumers.decode_consumer(found[0], path)

    def claim_partition(self, group: str, tp: TopicPartition, thread_id: str) -> bool:
        """Creates the ephemeral owner znode; False while another consumer thread still owns it."""
        try:
            self.zk.create(
                consumers.owner_path(group, tp),
                consumers.encode_owner(thread_id),
                ephemeral=True,
                makepath=True,
            )
            return True
        except NodeExistsError:
            return False

    def get_partition_owner(self, group: str, tp: TopicPartition) -> str | None:
        found = self._get(consumers.owner_path(group, tp))
        return None if found is None else consumers.decode_owner(found[0])

    def release_partition(self, group: str, tp: TopicPartition) -> None:
        try:
            self.zk.delete(consumers.owner_path(group, tp))
        except NoNodeError:
            pass

    def commit_legacy_offset(self, group: str, tp: TopicPartition, offset: int) -> None:
        path = consumers.offset_path(group, tp)
        try:
            self.zk.set(path, consumers.encode_offset(offset))
        except NoNodeError:
            try:
                self.zk.create(path, consumers.encode_offset(offset), makepath=True)
            except NodeExistsError:
                self.zk.set(path, consumers.encode_offset(offset))

    def commit_legacy_offsets(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        """`commit_legacy_offset` for many partitions, the writes pipelined."""
        pending = [(tp, self.zk.set_async(consumers.offset_path(group, tp), consumers.encode_offset(o)))
                   for tp, o in offsets.items()]
        for tp, result in pending:
            try:
                result.get()
            except NoNodeError:
                self.commit_legacy_offset(group, tp, offsets[tp])

    def get_legacy_offsets(self, group: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Committed offsets of these partitions, read pipelined; ones never committed are left out."""
        found = self._get_many((tp, consumers.offset_path(group, tp)) for tp in partitions)
        return {tp: consumers.decode_offset(data, consumers.offset_path(group, tp))
                for tp, (data, _) in found.items()}

    def get_legacy_offset(self, group: str, tp: TopicPartition) -> int | None:
        path = consumers.offset_path(group, tp)
        found = self._get(path)
        return None if found is None else consumers.decode_offset(found[0], path)
