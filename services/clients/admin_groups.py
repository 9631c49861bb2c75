"""The admin client's consumer-group operations, as Kafka's Admin: list, describe and delete
groups, read and alter their committed offsets.

A group's requests go to its coordinator, found with FindCoordinator through any broker; listing
asks every live coordinator (the brokers' metadata names them). NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and unreachable coordinators are retried
with a fresh lookup until `default.api.timeout.ms` (or the call's `timeout_ms`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from services.clients.channels import COORDINATOR
from services.clients.cluster import Node, TopicPartition
from services.clients.retry import Deadline, call_with_retries
from services.common.errors import NONE, KafkaError, code_of
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb

CONSUMER_PROTOCOL_TYPE = "consumer"
_COORDINATOR_MOVED = {code_of("NOT_COORDINATOR"), code_of("COORDINATOR_NOT_AVAILABLE"),
                      code_of("COORDINATOR_LOAD_IN_PROGRESS")}


@dataclass(frozen=True)
class ConsumerGroupListing:
    group_id: str
    is_simple_consumer_group: bool
    state: str = ""


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class ConsumerGroupDescription:
    group_id: str
    is_simple_consumer_group: bool
    members: tuple[MemberDescription, ...]
    partition_assignor: str
    state: str
    coordinator: Node | None = None
    protocol_type: str = ""


@dataclass
class _Lookup:
    cache: dict[str, Node] = field(default_factory=dict)


def _assignment_partitions(protocol_type: str, data: bytes) -> tuple[TopicPartition, ...]:
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not data:
        return ()
    from services.clients.consumer.protocol import decode_assignment

    try:
        return tuple(sorted(decode_assignment(data).partitions))
    except Exception:
        return ()


class GroupAdminOps:
    """Mixed into `Admin`; needs its `pool`, `metadata`, `config` and `_deadline`."""

    # ------------------------------------------------------------------ coordinators

    def find_group_coordinator(self, group_id: str, *, timeout_ms: int | None = None) -> Node:
        """The coordinator currently owning `group_id`."""
        return call_with_retries("FindCoordinator", lambda d: self._find_coordinator(group_id, d),
                                 self._deadline(timeout_ms), self.config.retry_backoff_ms)

    def _find_coordinator(self, group_id: str, deadline: Deadline) -> Node:
        self.metadata.maybe_refresh(self.pool, max(1, deadline.remaining_ms()))
        request = common_pb2.FindCoordinatorRequest(key=group_id, key_type=common_pb2.GROUP)
        response = self.metadata.call_any_node(self.pool, "FindCoordinator", request, deadline)
        if response.error_code != NONE:
            raise KafkaError.from_code(response.error_code, response.error_message)
        node = response.coordinator
        return Node(node.node_id, node.host, node.port)

    def _group_call(self, group_id: str, method: str, request: Any, timeout_ms: int | None,
                    error_of=lambda response: response.error_code) -> Any:
        """Calls `group_id`'s coordinator, finding it again whenever it moved."""
        def attempt(deadline: Deadline) -> Any:
            node = self._find_coordinator(group_id, deadline)
            timeout = max(1, deadline.bound(self.config.request_timeout_ms))
            response = self.pool.call(node.address, COORDINATOR, method, request, timeout)
            code = error_of(response)
            if code in _COORDINATOR_MOVED:
                raise KafkaError.from_code(code, f"{method} for group {group_id!r}")
            return response

        return call_with_retries(method, attempt, self._deadline(timeout_ms), self.config.retry_backoff_ms)

    def _coordinator_nodes(self, timeout_ms: int | None) -> list[Node]:
        cluster_response = call_with_retries(
            "Metadata",
            lambda d: self.metadata.call_any_node(self.pool, "Metadata", broker_pb2.MetadataRequest(), d),
            self._deadline(timeout_ms), self.config.retry_backoff_ms)
        return [Node(n.node_id, n.host, n.port) for n in cluster_response.coordinators]

    # ------------------------------------------------------------------ groups

    def list_consumer_groups(self, *, states: Iterable[str] = (),
                             timeout_ms: int | None = None) -> list[ConsumerGroupListing]:
        """Every group every live coordinator knows, optionally only those in `states`."""
        listings: dict[str, ConsumerGroupListing] = {}
        request = pb.ListGroupsRequest(states_filter=list(states))
        for node in self._coordinator_nodes(timeout_ms):
            def attempt(deadline: Deadline, address: str = node.address) -> Any:
                response = self.pool.call(address, COORDINATOR, "ListGroups", request,
                                          max(1, deadline.bound(self.config.request_timeout_ms)))
                if response.error_code != NONE:
                    raise KafkaError.from_code(response.error_code, f"ListGroups on {address}")
                return response

            response = call_with_retries("ListGroups", attempt, self._deadline(timeout_ms),
                                         self.config.retry_backoff_ms)
            for group in response.groups:
                listings[group.group_id] = ConsumerGroupListing(group.group_id, group.protocol_type == "",
                                                                group.group_state)
        return [listings[g] for g in sorted(listings)]

    def describe_consumer_groups(self, group_ids: Iterable[str], *,
                                 timeout_ms: int | None = None) -> dict[str, ConsumerGroupDescription]:
        results = {}
        for group_id in group_ids:
            response = self._group_call(group_id, "DescribeGroups", pb.DescribeGroupsRequest(groups=[group_id]),
                                        timeout_ms, error_of=lambda r: r.groups[0].error_code if r.groups else NONE)
            described = response.groups[0]
            if described.error_code != NONE:
                raise KafkaError.from_code(described.error_code, f"describing group {group_id!r}")
            members = tuple(
                MemberDescription(m.member_id, m.group_instance_id if m.HasField("group_instance_id") else None,
                                  m.client_id, m.client_host,
                                  _assignment_partitions(described.protocol_type, m.member_assignment))
                for m in described.members)
            results[group_id] = ConsumerGroupDescription(
                group_id, described.protocol_type == "", members, described.protocol_data, described.group_state,
                self._find_coordinator(group_id, self._deadline(timeout_ms)), described.protocol_type)
        return results

    def delete_consumer_groups(self, group_ids: Iterable[str], *, timeout_ms: int | None = None,
                               raise_errors: bool = True) -> dict[str, KafkaError | None]:
        results: dict[str, KafkaError | None] = {}
        for group_id in group_ids:
            response = self._group_call(group_id, "DeleteGroups", pb.DeleteGroupsRequest(groups_names=[group_id]),
                                        timeout_ms, error_of=lambda r: r.results[0].error_code if r.results else NONE)
            code = response.results[0].error_code if response.results else NONE
            results[group_id] = None if code == NONE else KafkaError.from_code(code, f"deleting group {group_id!r}")
            if raise_errors and results[group_id] is not None:
                raise results[group_id]
        return results

    # ------------------------------------------------------------------ offsets

    def list_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None, *,
                                    timeout_ms: int | None = None) -> dict[TopicPartition, Any]:
        """{partition: OffsetAndMetadata} of the group's committed offsets (all, or `partitions`);
        partitions without one are left out."""
        from services.clients.consumer import OffsetAndMetadata

        request = pb.OffsetFetchRequest(group_id=group_id)
        if partitions is None:
            request.all_topics = True
        else:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            for topic, indexes in by_topic.items():
                request.topics.add(name=topic, partition_indexes=sorted(indexes))
        response = self._group_call(group_id, "OffsetFetch", request, timeout_ms)
        if response.error_code != NONE:
            raise KafkaError.from_code(response.error_code, f"fetching offsets of group {group_id!r}")
        offsets = {}
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code != NONE:
                    raise KafkaError.from_code(part.error_code, f"offset of {topic.name}-{part.partition_index}")
                if part.committed_offset >= 0:
                    epoch = part.committed_leader_epoch if part.committed_leader_epoch >= 0 else None
                    offsets[TopicPartition(topic.name, part.partition_index)] = OffsetAndMetadata(
                        part.committed_offset, part.metadata if part.HasField("metadata") else "", epoch)
        return offsets

    def alter_consumer_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, Any], *,
                                     timeout_ms: int | None = None) -> None:
        """Commits `offsets` ({partition: offset or OffsetAndMetadata}) for a group with no active
        members, as Kafka's alterConsumerGroupOffsets; an active group answers UNKNOWN_MEMBER_ID."""
        request = pb.OffsetCommitRequest(group_id=group_id, generation_id=-1, member_id="", retention_time_ms=-1)
        by_topic: dict[str, Any] = {}
        for tp, value in offsets.items():
            offset = value if isinstance(value, int) else value.offset
            metadata = "" if isinstance(value, int) else (getattr(value, "metadata", "") or "")
            epoch = -1 if isinstance(value, int) else (getattr(value, "leader_epoch", None) or -1)
            topic = by_topic.get(tp.topic)
            if topic is None:
                topic = by_topic[tp.topic] = request.topics.add(name=tp.topic)
            topic.partitions.add(partition_index=tp.partition, committed_offset=offset,
                                 committed_leader_epoch=epoch, committed_metadata=metadata)

        def first_error(response: Any) -> int:
            codes = [p.error_code for t in response.topics for p in t.partitions if p.error_code != NONE]
            return codes[0] if codes else NONE

        response = self._group_call(group_id, "OffsetCommit", request, timeout_ms, error_of=first_error)
        code = first_error(response)
        if code != NONE:
            raise KafkaError.from_code(code, f"altering the offsets of group {group_id!r}")
