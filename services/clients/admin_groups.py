"""The admin client's consumer-group operations, as Kafka's Admin: list, describe and delete
groups, read, alter and delete their committed offsets.

A group's requests go to its coordinator, found with FindCoordinator through any broker; listing
asks every live coordinator (the brokers' metadata names them). NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and unreachable coordinators are retried
with a fresh lookup until `default.api.timeout.ms` (or the call's `timeout_ms`). The requests are
built and read by `group_requests`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from services.clients.admin_types import ConsumerGroupDescription, ConsumerGroupListing
from services.clients.cluster import Node
from services.clients.group_requests import (
    GROUP_KEY,
    commit_error,
    committed_offsets,
    coordinators_of,
    delete_group_error,
    delete_groups_request,
    describe_groups_request,
    find_coordinator_request,
    list_groups_request,
    offset_commit_request,
    offset_delete_errors,
    offset_delete_request,
    offset_fetch_request,
    parse_describe_group,
    parse_find_coordinator,
    parse_list_groups,
)
from services.clients.metadata import metadata_request
from services.clients.transport import COORDINATOR, Deadline, call_any_node, call_with_retries
from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition

if TYPE_CHECKING:  # the consumer package is loaded only when an offset is altered
    from services.clients.consumer.records import OffsetAndMetadata

_COORDINATOR_MOVED = {Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE, Errors.COORDINATOR_LOAD_IN_PROGRESS}


class GroupAdminOps:
    """Mixed into `Admin`; needs its `pool`, `metadata`, `config` and `_deadline`."""

    # ------------------------------------------------------------------ coordinators

    def find_group_coordinator(self, group_id: str, *, timeout_ms: int | None = None) -> Node:
        """The coordinator currently owning `group_id`."""
        return call_with_retries("FindCoordinator", lambda d: self._find_coordinator(group_id, d),
                                 self._deadline(timeout_ms), self.config.retry_backoff_ms)

    def _find_coordinator(self, key: str, deadline: Deadline, key_type: int = GROUP_KEY) -> Node:
        self.metadata.maybe_refresh(self.pool, max(1, deadline.remaining_ms()))
        response = call_any_node(self.metadata, self.pool, "FindCoordinator", find_coordinator_request(key, key_type),
                                 deadline)
        return parse_find_coordinator(response, key, "group" if key_type == GROUP_KEY else "transactional id")

    def _ask_group(self, group_id: str, method: str, request: Any, read: Callable[[Any, Node], Any],
                   timeout_ms: int | None, key_type: int = GROUP_KEY) -> Any:
        """Calls the coordinator of `group_id` (or of a transactional id, with key_type TRANSACTION)
        and returns `read(answer, coordinator)`, finding the coordinator again whenever it moved;
        any other error `read` raises is returned, not retried."""
        def attempt(deadline: Deadline) -> Any:
            node = self._find_coordinator(group_id, deadline, key_type)
            timeout = max(1, deadline.bound(self.config.request_timeout_ms))
            response = self.pool.call(node.address, COORDINATOR, method, request, timeout)
            try:
                return read(response, node)
            except KafkaError as error:
                if error.code in _COORDINATOR_MOVED:
                    raise
                return error

        return call_with_retries(method, attempt, self._deadline(timeout_ms), self.config.retry_backoff_ms)

    def _group_call(self, group_id: str, method: str, request: Any, read: Callable[[Any, Node], Any],
                    timeout_ms: int | None, key_type: int = GROUP_KEY) -> Any:
        """`_ask_group`, raising the error the answer carried."""
        answer = self._ask_group(group_id, method, request, read, timeout_ms, key_type)
        if isinstance(answer, KafkaError):
            raise answer
        return answer

    def _coordinator_nodes(self, timeout_ms: int | None) -> list[Node]:
        response = call_with_retries(
            "Metadata",
            lambda d: call_any_node(self.metadata, self.pool, "Metadata", metadata_request(()), d),
            self._deadline(timeout_ms), self.config.retry_backoff_ms)
        return coordinators_of(response)

    # ------------------------------------------------------------------ groups

    def list_consumer_groups(self, *, states: Iterable[str] = (),
                             timeout_ms: int | None = None) -> list[ConsumerGroupListing]:
        """Every group every live coordinator knows, optionally only those in `states`."""
        listings: dict[str, ConsumerGroupListing] = {}
        request = list_groups_request(states)
        for node in self._coordinator_nodes(timeout_ms):
            def attempt(deadline: Deadline, address: str = node.address) -> list[ConsumerGroupListing]:
                response = self.pool.call(address, COORDINATOR, "ListGroups", request,
                                          max(1, deadline.bound(self.config.request_timeout_ms)))
                return parse_list_groups(response, address)

            for listing in call_with_retries("ListGroups", attempt, self._deadline(timeout_ms),
                                             self.config.retry_backoff_ms):
                listings[listing.group_id] = listing
        return [listings[g] for g in sorted(listings)]

    def describe_consumer_groups(self, group_ids: Iterable[str], *,
                                 timeout_ms: int | None = None) -> dict[str, ConsumerGroupDescription]:
        return {group_id: self._group_call(
                    group_id, "DescribeGroups", describe_groups_request(group_id),
                    lambda response, node, group_id=group_id: parse_describe_group(response, group_id, node),
                    timeout_ms)
                for group_id in group_ids}

    def delete_consumer_groups(self, group_ids: Iterable[str], *, timeout_ms: int | None = None,
                               raise_errors: bool = True) -> dict[str, KafkaError | None]:
        results: dict[str, KafkaError | None] = {}
        for group_id in group_ids:
            results[group_id] = self._ask_group(group_id, "DeleteGroups", delete_groups_request(group_id),
                                                lambda response, _node, group_id=group_id: _raise(
                                                    delete_group_error(response, group_id)),
                                                timeout_ms)
            if raise_errors and results[group_id] is not None:
                raise results[group_id]
        return results

    # ------------------------------------------------------------------ offsets

    def list_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None, *,
                                    timeout_ms: int | None = None) -> dict[TopicPartition, OffsetAndMetadata]:
        """{partition: OffsetAndMetadata} of the group's committed offsets (all, or `partitions`);
        partitions without one are left out."""
        offsets = self._group_call(group_id, "OffsetFetch", offset_fetch_request(group_id, partitions),
                                   lambda response, _node: committed_offsets(response), timeout_ms)
        return {tp: offset for tp, offset in offsets.items() if offset is not None}

    def alter_consumer_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
                                     *, timeout_ms: int | None = None) -> None:
        """Commits `offsets` ({partition: offset or OffsetAndMetadata}) for a group with no active
        members, as Kafka's alterConsumerGroupOffsets; an active group answers UNKNOWN_MEMBER_ID."""
        from services.clients.consumer.records import OffsetAndMetadata

        wanted = {TopicPartition(*tp): value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
                  for tp, value in offsets.items()}
        request = offset_commit_request(group_id, -1, "", None, wanted)
        self._group_call(group_id, "OffsetCommit", request, lambda response, _node: _raise(commit_error(response)),
                         timeout_ms)

    def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition], *,
                                      timeout_ms: int | None = None,
                                      raise_errors: bool = True) -> dict[TopicPartition, KafkaError | None]:
        """Deletes the group's committed offsets of `partitions`, as Kafka's deleteConsumerGroupOffsets:
        {partition: None, or the KafkaError that kept it (GROUP_SUBSCRIBED_TO_TOPIC for a topic the
        active group is subscribed to)}. The group's own error (GROUP_ID_NOT_FOUND,
        NON_EMPTY_GROUP, ...) is always raised; with `raise_errors` a partition's error too."""
        wanted = sorted({TopicPartition(*tp) for tp in partitions})
        answer = self._group_call(group_id, "OffsetDelete", offset_delete_request(group_id, wanted),
                                  lambda response, _node: offset_delete_errors(response, group_id), timeout_ms)
        results: dict[TopicPartition, KafkaError | None] = {tp: answer.get(tp) for tp in wanted}
        failed = next((error for error in results.values() if error is not None), None)
        if raise_errors and failed is not None:
            raise failed
        return results


def _raise(error: KafkaError | None) -> None:
    if error is not None:
        raise error
