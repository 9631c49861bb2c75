"""The coordinator's gRPC adapter: decodes CoordinatorService group requests, calls the
`GroupCoordinator`, encodes its answers. JoinGroup and SyncGroup wait until the group
coordinator answers (the rebalance completes) or the caller's deadline passes, OffsetCommit,
TxnOffsetCommit, DeleteGroups and OffsetDelete until their write to `__consumer_offsets` is replicated, and
WriteTxnMarkers (markers for this instance's partitions of `__consumer_offsets`, sent by the
transaction coordinator) until the markers are written and the offsets completed: these run on the server's
event loop and await the `Completion` the coordinator's callback resolves, so a waiting request
holds no thread. They count against `parked.max.requests`; one more is answered at once with
THROTTLING_QUOTA_EXCEEDED. Every other call answers at once, in the runtime's executor.
FindCoordinator is answered from the coordinator directory, as brokers answer it.

Transactions: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn wait (as above) until
the transaction coordinator has written their record to `__transaction_state` (the first
AddPartitionsToTxn / AddOffsetsToTxn of a transaction also while the previous transaction
completes: see `txn.coordinator`); EndTxn answers once
PrepareCommit / PrepareAbort is written, before the markers, with the epoch the producer continues
with (bumped by an abort with `bump_epoch`). AddPartitionsToTxn naming a partition
the cluster does not have adds none: UNKNOWN_TOPIC_OR_PARTITION for it, OPERATION_NOT_ATTEMPTED for
the others. ListTransactions and
DescribeTransactions answer at once. Without a transaction coordinator they answer
COORDINATOR_NOT_AVAILABLE. Each call's logic is a method taking plain values (`init_producer_id`,
`add_partitions_to_txn`, `txn_commit_offsets`, `list_transactions`, ...) that the Kafka listener's
handlers (`kafka_api`) call too, so both protocols answer alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.coordinator_lookup import find_coordinator
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2_grpc
from services.common.service import DEFAULT_PARKED_MAX_REQUESTS, Completion, RequestLimit
from services.common.shared_types import EndTxnResult, InitProducerIdResult
from services.common.topic_names import GROUP_METADATA_TOPIC
from services.common.zk.coordinator_directory import DirectorySnapshot
from services.coordinator.group import CommittedOffset, GroupCoordinator, TopicPartition
from services.coordinator.group.api import JoinGroupResult, SyncGroupResult
from services.coordinator.txn.admin import DescribedTransaction
from services.coordinator.txn.runtime import TransactionCoordinator

_DEFAULT_WAIT_S = 330.0


def _wait_s(context, fallback_s: float = _DEFAULT_WAIT_S) -> float:
    remaining = context.time_remaining() if context is not None else None
    return fallback_s if remaining is None else max(remaining, 0.0)


def _optional(message, name: str) -> str | None:
    return getattr(message, name) if message.HasField(name) else None


def client_host(context) -> str:
    """Kafka shows the client's address as "/127.0.0.1"."""
    peer = context.peer() if context is not None else ""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return "/" + rest.rpartition(":")[0]
    if kind == "ipv6":
        return "/" + rest.rpartition(":")[0].strip("[]").replace("%5B", "").replace("%5D", "")
    return "/" + peer if peer else ""


def _requested_offsets(request, now_ms: int, expire_ms: int | None) -> dict[TopicPartition, CommittedOffset]:
    """The offsets of an OffsetCommit or TxnOffsetCommit request."""
    offsets = {}
    for topic in request.topics:
        for part in topic.partitions:
            offsets[TopicPartition(topic.name, part.partition_index)] = CommittedOffset(
                part.committed_offset, part.committed_leader_epoch,
                part.committed_metadata if part.HasField("committed_metadata") else "", now_ms, expire_ms)
    return offsets


def _topic(response, by_topic: dict[str, Any], name: str):
    """The response's entry for topic `name`, added on first use."""
    out = by_topic.get(name)
    if out is None:
        out = by_topic[name] = response.topics.add(name=name)
    return out


def _commit_response(response, offsets: dict[TopicPartition, Any], results: dict | None, refused: int):
    """An OffsetCommit or TxnOffsetCommit response: each partition's result, else `refused`."""
    by_topic: dict[str, Any] = {}
    for tp in offsets:
        code = refused if results is None else results.get(tp, refused)
        _topic(response, by_topic, tp.topic).partitions.add(partition_index=tp.partition, error_code=code)
    return response


class CoordinatorServicer(coordinator_pb2_grpc.CoordinatorServiceServicer):
    def __init__(self, groups: GroupCoordinator, directory: Callable[[], DirectorySnapshot],
                 clock: Clock = SYSTEM_CLOCK, parked_max_requests: int = DEFAULT_PARKED_MAX_REQUESTS,
                 transactions: TransactionCoordinator | None = None,
                 unknown_partitions: Callable[[list[TopicPartition]], set[TopicPartition]] | None = None,
                 cached_unknown_partitions: Callable[[list[TopicPartition]], set[TopicPartition] | None] | None = None,
                 ) -> None:
        self.groups = groups
        self.transactions = transactions
        self.unknown_partitions = unknown_partitions
        self.cached_unknown_partitions = cached_unknown_partitions
        self.directory = directory
        self.clock = clock
        self.waiting = RequestLimit(parked_max_requests)

    async def call_and_wait(self, start: Callable[[Completion], None], timeout_s: float) -> Any:
        """`start(reply)` hands the request to the coordinator; its answer, or None once
        `timeout_s` passed. The caller has taken a place in `self.waiting`; it is given back here."""
        try:
            reply = Completion()
            start(reply)
            return await reply.result(timeout_s)
        finally:
            self.waiting.release()

    def FindCoordinator(self, request, context):
        return find_coordinator(self.directory(), request.key, request.key_type)

    # ------------------------------------------------------------------ membership

    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None, client_id: str,
                         host: str, rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                         protocols: list[tuple[str, bytes]], timeout_s: float) -> Any:
        """The JoinGroupResult; None if the rebalance did not complete within `timeout_s`."""
        if not self.waiting.try_acquire():
            return JoinGroupResult(Errors.THROTTLING_QUOTA_EXCEEDED, member_id=member_id)
        return await self.call_and_wait(lambda reply: self.groups.handle_join_group(
            group_id, member_id, group_instance_id, client_id, host, rebalance_timeout_ms, session_timeout_ms,
            protocol_type, protocols, reply), timeout_s)

    async def JoinGroup(self, request, context):
        result = await self.join_group(
            request.group_id, request.member_id, _optional(request, "group_instance_id"), request.client_id,
            client_host(context), request.rebalance_timeout_ms, request.session_timeout_ms,
            request.protocol_type, [(p.name, p.metadata) for p in request.protocols], _wait_s(context))
        if result is not None and result.error_code == Errors.THROTTLING_QUOTA_EXCEEDED:
            return pb.JoinGroupResponse(error_code=Errors.THROTTLING_QUOTA_EXCEEDED, generation_id=-1,
                                        member_id=request.member_id, error_message=self.waiting.describe())
        if result is None:
            return pb.JoinGroupResponse(error_code=Errors.REBALANCE_IN_PROGRESS, generation_id=-1,
                                        member_id=request.member_id,
                                        error_message="the rebalance did not complete before the deadline")
        response = pb.JoinGroupResponse(error_code=result.error_code, generation_id=result.generation_id,
                                        leader=result.leader_id or "", member_id=result.member_id or "")
        if result.protocol_type is not None:
            response.protocol_type = result.protocol_type
        if result.protocol_name is not None:
            response.protocol_name = result.protocol_name
        for member in result.members:
            out = response.members.add(member_id=member.member_id, metadata=member.metadata)
            if member.group_instance_id is not None:
                out.group_instance_id = member.group_instance_id
        return response

    async def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
                         timeout_s: float) -> Any:
        """The SyncGroupResult; None if the rebalance did not complete within `timeout_s`."""
        if not self.waiting.try_acquire():
            return SyncGroupResult(Errors.THROTTLING_QUOTA_EXCEEDED)
        return await self.call_and_wait(lambda reply: self.groups.handle_sync_group(
            group_id, generation_id, member_id, group_instance_id, protocol_type, protocol_name, assignments, reply),
            timeout_s)

    async def SyncGroup(self, request, context):
        result = await self.sync_group(
            request.group_id, request.generation_id, request.member_id, _optional(request, "group_instance_id"),
            _optional(request, "protocol_type"), _optional(request, "protocol_name"),
            {a.member_id: a.assignment for a in request.assignments}, _wait_s(context))
        if result is not None and result.error_code == Errors.THROTTLING_QUOTA_EXCEEDED:
            return pb.SyncGroupResponse(error_code=Errors.THROTTLING_QUOTA_EXCEEDED,
                                        error_message=self.waiting.describe())
        if result is None:
            return pb.SyncGroupResponse(error_code=Errors.REBALANCE_IN_PROGRESS,
                                        error_message="the rebalance did not complete before the deadline")
        response = pb.SyncGroupResponse(error_code=result.error_code, assignment=result.assignment or b"")
        if result.protocol_type is not None:
            response.protocol_type = result.protocol_type
        if result.protocol_name is not None:
            response.protocol_name = result.protocol_name
        return response

    def Heartbeat(self, request, context):
        code = self.groups.handle_heartbeat(request.group_id, request.member_id,
                                            _optional(request, "group_instance_id"), request.generation_id)
        return pb.HeartbeatResponse(error_code=code)

    def LeaveGroup(self, request, context):
        result = self.groups.handle_leave_group(
            request.group_id, [(m.member_id, _optional(m, "group_instance_id")) for m in request.members])
        response = pb.LeaveGroupResponse(error_code=result.error_code)
        for member_id, instance_id, code in result.member_errors:
            out = response.members.add(member_id=member_id, error_code=code)
            if instance_id is not None:
                out.group_instance_id = instance_id
        return response

    # ------------------------------------------------------------------ offsets

    async def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                             offsets: dict[TopicPartition, CommittedOffset],
                             timeout_s: float) -> tuple[dict[TopicPartition, int] | None, int]:
        """({partition: error code}, or None if the write did not complete in `timeout_s`; the code of
        the partitions without an answer)."""
        known, unknown = await self.known_offsets(offsets)
        if not known:
            return unknown, Errors.UNKNOWN_TOPIC_OR_PARTITION
        if not self.waiting.try_acquire():
            return unknown, Errors.THROTTLING_QUOTA_EXCEEDED
        results = await self.call_and_wait(lambda reply: self.groups.handle_commit_offsets(
            group_id, member_id, group_instance_id, generation_id, known, reply), timeout_s)
        return (None if results is None else {**results, **unknown}), Errors.REQUEST_TIMED_OUT

    async def OffsetCommit(self, request, context):
        now_ms = self.clock.time_ms()
        expire_ms = now_ms + request.retention_time_ms if request.retention_time_ms > 0 else None
        offsets = _requested_offsets(request, now_ms, expire_ms)
        results, refused = await self.commit_offsets(request.group_id, request.member_id,
                                                     _optional(request, "group_instance_id"),
                                                     request.generation_id, offsets, _wait_s(context, 60.0))
        return _commit_response(pb.OffsetCommitResponse(), offsets, results, refused)

    async def TxnOffsetCommit(self, request, context):
        offsets = _requested_offsets(request, self.clock.time_ms(), None)
        results, refused = await self.txn_commit_offsets(
            request.group_id, request.producer_id, request.producer_epoch, request.member_id,
            _optional(request, "group_instance_id"), request.generation_id, offsets, _wait_s(context, 60.0))
        return _commit_response(pb.TxnOffsetCommitResponse(), offsets, results, refused)

    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                                 group_instance_id: str | None, generation_id: int,
                                 offsets: dict[TopicPartition, CommittedOffset], timeout_s: float
                                 ) -> tuple[dict[TopicPartition, int] | None, int]:
        """(each partition's result, or None; the error of a partition without one): TxnOffsetCommit's
        answer, UNKNOWN_TOPIC_OR_PARTITION for partitions the cluster does not have."""
        known, unknown = await self.known_offsets(offsets)
        if not known:
            return unknown, Errors.UNKNOWN_TOPIC_OR_PARTITION
        if not self.waiting.try_acquire():
            return unknown, Errors.THROTTLING_QUOTA_EXCEEDED
        results = await self.call_and_wait(lambda reply: self.groups.handle_txn_commit_offsets(
            group_id, producer_id, producer_epoch, member_id, group_instance_id, generation_id, known, reply),
            timeout_s)
        return (None if results is None else {**results, **unknown}), Errors.REQUEST_TIMED_OUT

    async def WriteTxnMarkers(self, request, context):
        response = common_pb2.WriteTxnMarkersResponse()
        for marker in request.markers:
            partitions = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
            ours = [p for name, p in partitions if name == GROUP_METADATA_TOPIC]
            codes = await self._write_marker(marker, ours, context) if ours else {}
            out = response.markers.add(producer_id=marker.producer_id)
            by_topic: dict[str, Any] = {}
            for name, partition in partitions:
                # only partitions of __consumer_offsets have their owner here; others are not ours
                code = codes[partition] if name == GROUP_METADATA_TOPIC else Errors.NOT_COORDINATOR
                _topic(out, by_topic, name).partitions.add(partition_index=partition, error_code=code)
        return response

    async def _write_marker(self, marker, partitions: list[int], context) -> dict[int, int]:
        """{partition: error code} once the marker is written to `partitions` and their offsets completed."""
        if not self.waiting.try_acquire():
            return dict.fromkeys(partitions, Errors.THROTTLING_QUOTA_EXCEEDED)
        codes = await self.call_and_wait(lambda reply: self.groups.handle_write_txn_marker(
            partitions, marker.producer_id, marker.producer_epoch, marker.transaction_result,
            marker.coordinator_epoch, reply), _wait_s(context, 60.0)) or {}
        return {p: codes.get(p, Errors.REQUEST_TIMED_OUT) for p in partitions}

    def OffsetFetch(self, request, context):
        partitions = None if request.all_topics else [
            TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]
        code, fetched = self.groups.handle_fetch_offsets(request.group_id, partitions, request.require_stable)
        response = pb.OffsetFetchResponse(error_code=code)
        by_topic: dict[str, Any] = {}
        for tp in sorted(fetched):
            offset = fetched[tp]
            out = by_topic.get(tp.topic)
            if out is None:
                out = by_topic[tp.topic] = response.topics.add(name=tp.topic)
            out.partitions.add(partition_index=tp.partition, committed_offset=offset.offset,
                               committed_leader_epoch=offset.leader_epoch, metadata=offset.metadata or "",
                               error_code=offset.error_code)
        return response

    # ------------------------------------------------------------------ groups

    def ListGroups(self, request, context):
        states = set(request.states_filter) or None
        code, groups = self.groups.handle_list_groups(states)
        response = pb.ListGroupsResponse(error_code=code)
        for group in groups:
            response.groups.add(group_id=group.group_id, protocol_type=group.protocol_type or "",
                                group_state=group.state)
        return response

    def DescribeGroups(self, request, context):
        response = pb.DescribeGroupsResponse()
        for group_id in request.groups:
            group = self.groups.handle_describe_group(group_id)
            out = response.groups.add(error_code=group.error_code, group_id=group_id, group_state=group.state,
                                      protocol_type=group.protocol_type or "",
                                      protocol_data=group.protocol_name or "")
            for member in group.members:
                described = out.members.add(member_id=member.member_id, client_id=member.client_id,
                                            client_host=member.client_host,
                                            member_metadata=member.metadata or b"",
                                            member_assignment=member.assignment or b"")
                if member.group_instance_id is not None:
                    described.group_instance_id = member.group_instance_id
        return response

    async def delete_groups(self, group_ids: list[str], timeout_s: float) -> tuple[dict[str, int], int]:
        """({group id: error code}; the code of groups without an answer)."""
        if not self.waiting.try_acquire():
            return {}, Errors.THROTTLING_QUOTA_EXCEEDED
        results = await self.call_and_wait(lambda reply: self.groups.handle_delete_groups(group_ids, reply),
                                           timeout_s)
        return results or {}, Errors.REQUEST_TIMED_OUT

    async def DeleteGroups(self, request, context):
        results, refused = await self.delete_groups(list(request.groups_names), _wait_s(context, 60.0))
        response = pb.DeleteGroupsResponse()
        for group_id in request.groups_names:
            response.results.add(group_id=group_id, error_code=results.get(group_id, refused))
        return response

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                             timeout_s: float) -> tuple[int, dict[TopicPartition, int]]:
        """(the group's error code, {partition: error code})."""
        if not self.waiting.try_acquire():
            return Errors.THROTTLING_QUOTA_EXCEEDED, {}
        answer = await self.call_and_wait(
            lambda reply: self.groups.handle_delete_offsets(group_id, partitions, reply), timeout_s)
        return answer if answer is not None else (Errors.REQUEST_TIMED_OUT, {})

    async def OffsetDelete(self, request, context):
        partitions = [TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]
        group_error, partition_errors = await self.delete_offsets(request.group_id, partitions,
                                                                  _wait_s(context, 60.0))
        response = pb.OffsetDeleteResponse(error_code=group_error)
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, error in sorted(partition_errors.items()):
            by_topic.setdefault(tp.topic, []).append((tp.partition, error))
        for topic, answers in by_topic.items():
            out = response.topics.add(name=topic)
            for partition, error in answers:
                out.partitions.add(partition_index=partition, error_code=error)
        return response

    # ------------------------------------------------------------------ transactions

    async def transaction_call(self, start: Callable[[Completion], None], timeout_s: float) -> tuple[Any, int]:
        """(answer, error): runs `start` against the transaction coordinator and waits for its
        answer; the error says why there is none (no coordinator, too many waiting, timed out)."""
        if self.transactions is None:
            return None, Errors.COORDINATOR_NOT_AVAILABLE
        if not self.waiting.try_acquire():
            return None, Errors.THROTTLING_QUOTA_EXCEEDED
        result = await self.call_and_wait(start, timeout_s)
        return result, Errors.REQUEST_TIMED_OUT if result is None else Errors.NONE

    async def InitProducerId(self, request, context):
        result = await self.init_producer_id(_optional(request, "transactional_id"), request.transaction_timeout_ms,
                                             request.producer_id, request.producer_epoch, _wait_s(context, 60.0))
        return common_pb2.InitProducerIdResponse(error_code=result.error_code, producer_id=result.producer_id,
                                                 producer_epoch=result.producer_epoch,
                                                 error_message=result.error_message)

    async def init_producer_id(self, transactional_id: str | None, timeout_ms: int, producer_id: int,
                               producer_epoch: int, timeout_s: float) -> InitProducerIdResult:
        result, error = await self.transaction_call(lambda reply: self.transactions.handle_init_producer_id(
            transactional_id, timeout_ms, producer_id, producer_epoch, reply), timeout_s)
        return InitProducerIdResult(error) if result is None else result

    async def AddPartitionsToTxn(self, request, context):
        partitions = [TopicPartition(t.name, p) for t in request.topics for p in t.partitions]
        code, codes = await self.add_partitions_to_txn(request.transactional_id, request.producer_id,
                                                       request.producer_epoch, partitions, _wait_s(context, 60.0))
        response = pb.AddPartitionsToTxnResponse(error_code=code)
        for topic in request.topics:
            out = response.results.add(name=topic.name)
            for partition in topic.partitions:
                out.results_by_partition.add(partition_index=partition,
                                             error_code=codes[TopicPartition(topic.name, partition)])
        return response

    async def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                    partitions: list[TopicPartition], timeout_s: float
                                    ) -> tuple[int, dict[TopicPartition, int]]:
        """(the request's error, each partition's): naming a partition the cluster does not have adds
        none, UNKNOWN_TOPIC_OR_PARTITION for it and OPERATION_NOT_ATTEMPTED for the others."""
        unknown = await self.unknown(partitions)
        if unknown:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, {
                tp: Errors.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else Errors.OPERATION_NOT_ATTEMPTED
                for tp in partitions}
        code, error = await self.transaction_call(lambda reply: self.transactions.handle_add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, reply), timeout_s)
        code = error if code is None else code
        return code, dict.fromkeys(partitions, code)

    async def known_offsets(self, offsets: dict[TopicPartition, CommittedOffset]) -> tuple[
            dict[TopicPartition, CommittedOffset], dict[TopicPartition, int]]:
        """The offsets of partitions the cluster has, and UNKNOWN_TOPIC_OR_PARTITION for the others:
        Kafka commits no offset of a topic or partition that does not exist."""
        unknown = await self.unknown(list(offsets))
        return ({tp: offset for tp, offset in offsets.items() if tp not in unknown},
                dict.fromkeys(unknown, Errors.UNKNOWN_TOPIC_OR_PARTITION))

    async def unknown(self, partitions: list[TopicPartition]) -> set[TopicPartition]:
        if self.unknown_partitions is None:
            return set()
        if self.cached_unknown_partitions is not None:  # answered from the metadata cache, on this thread
            cached = self.cached_unknown_partitions(partitions)
            if cached is not None:
                return cached
        try:
            return await asyncio.get_running_loop().run_in_executor(None, self.unknown_partitions, partitions)
        except KafkaError:  # no metadata now: let the transaction coordinator answer
            return set()

    async def AddOffsetsToTxn(self, request, context):
        return pb.AddOffsetsToTxnResponse(error_code=await self.add_offsets_to_txn(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id,
            _wait_s(context, 60.0)))

    async def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                                 timeout_s: float) -> int:
        """Adds the group's partition of `__consumer_offsets` to the transaction."""
        offsets_partition = TopicPartition(GROUP_METADATA_TOPIC, self.groups.partition_for(group_id))
        code, error = await self.transaction_call(lambda reply: self.transactions.handle_add_partitions(
            transactional_id, producer_id, producer_epoch, [offsets_partition], reply), timeout_s)
        return error if code is None else code

    async def EndTxn(self, request, context):
        result = await self.end_txn(request.transactional_id, request.producer_id, request.producer_epoch,
                                    request.committed, _wait_s(context, 60.0), request.bump_epoch)
        return pb.EndTxnResponse(error_code=result.error_code, producer_epoch=result.producer_epoch)

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                      timeout_s: float, bump_epoch: bool = False) -> EndTxnResult:
        result, error = await self.transaction_call(lambda reply: self.transactions.handle_end_txn(
            transactional_id, producer_id, producer_epoch, committed, reply, bump_epoch), timeout_s)
        return EndTxnResult(error) if result is None else result

    def ListTransactions(self, request, context):
        code, unknown, listed = self.list_transactions(set(request.state_filters), set(request.producer_id_filters))
        response = pb.ListTransactionsResponse(error_code=code, unknown_state_filters=unknown)
        for transactional_id, producer_id, state in listed:
            response.transaction_states.add(transactional_id=transactional_id, producer_id=producer_id,
                                            transaction_state=state)
        return response

    def list_transactions(self, states: set[str], producer_ids: set[int], min_duration_ms: int = -1
                          ) -> tuple[int, list[str], list[tuple[str, int, str]]]:
        """(error, unknown state filters, [(transactional id, producer id, state)]); with
        `min_duration_ms` >= 0 only transactions begun longer ago than that."""
        if self.transactions is None:
            return Errors.COORDINATOR_NOT_AVAILABLE, [], []
        return self.transactions.handle_list_transactions(states, producer_ids, min_duration_ms)

    def DescribeTransactions(self, request, context):
        response = pb.DescribeTransactionsResponse()
        for transactional_id in request.transactional_ids:
            described = self.describe_transaction(transactional_id)
            out = response.transaction_states.add(
                error_code=described.error_code, transactional_id=transactional_id,
                transaction_state=described.state, transaction_timeout_ms=described.timeout_ms,
                transaction_start_time_ms=described.start_timestamp_ms, producer_id=described.producer_id,
                producer_epoch=described.producer_epoch)
            for topic, partitions in partitions_by_topic(described.partitions).items():
                out.topics.add(topic=topic, partitions=partitions)
        return response

    def describe_transaction(self, transactional_id: str) -> DescribedTransaction:
        if self.transactions is None:
            return DescribedTransaction(Errors.COORDINATOR_NOT_AVAILABLE, transactional_id)
        return self.transactions.handle_describe_transaction(transactional_id)


def partitions_by_topic(partitions) -> dict[str, list[int]]:
    """{topic: its partitions}, in the order given."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return by_topic
