"""The group APIs over Kafka's protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch (one group, or a batch from v8), ListGroups, DescribeGroups, DeleteGroups and
OffsetDelete, answered through the servicer's own calls (its waiting limit, its unknown-partition
rule, the same group coordinator), so Kafka clients and Odradek's get the same answers.

JoinGroup before v4 cannot carry MEMBER_ID_REQUIRED (KIP-394): such a client's first join is
joined again at once with the member id the coordinator gave, as Kafka does for those versions.
A JoinGroup or SyncGroup that outlives its rebalance timeout answers REBALANCE_IN_PROGRESS.

With an authorizer, as Kafka's: membership and OffsetCommit need READ on the group (and
OffsetCommit READ on each topic), OffsetFetch and DescribeGroups DESCRIBE on the group (OffsetFetch
answers only topics the principal may DESCRIBE), DeleteGroups DELETE, OffsetDelete DELETE on the
group and READ on each topic; ListGroups lists the groups the principal may DESCRIBE (every one
with DESCRIBE on the cluster). Refusals answer GROUP_AUTHORIZATION_FAILED or TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from services.common.errors import Errors
from services.common.kafka_wire import ApiRegistry, RequestContext, fields_of, kafka_error
from services.common.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from services.coordinator.group import CommittedOffset, TopicPartition
from services.coordinator.servicer import CoordinatorServicer

OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 8, 9, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47

# API key -> (lowest, highest) version served: the classic group protocol (KIP-848's versions,
# OffsetCommit 9+ and OffsetFetch 9+, and topic ids are not served).
API_VERSIONS = {
    OFFSET_COMMIT: (2, 8),
    OFFSET_FETCH: (1, 8),
    JOIN_GROUP: (0, 9),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 5),
    SYNC_GROUP: (0, 5),
    DESCRIBE_GROUPS: (0, 5),
    LIST_GROUPS: (0, 4),
    DELETE_GROUPS: (0, 2),
    OFFSET_DELETE: (0, 0),
}
JOIN_GRACE_S = 5.0  # beyond the rebalance timeout, before a JoinGroup stops waiting
COMMIT_WAIT_S = 60.0
SYNC_WAIT_S = 330.0  # a SyncGroup waits for the leader's assignment; clients give up before that


def _ms(value: Any) -> int:
    return round(value.total_seconds() * 1000) if isinstance(value, timedelta) else int(value)


def client_host(peer: str) -> str:
    """Kafka shows the client's address as "/127.0.0.1"."""
    return "/" + peer.rpartition(":")[0].strip("[]")


def _group_allowed(context: RequestContext, operation: AclOperation, group_id: str) -> bool:
    return context.access.allowed(operation, ResourceType.GROUP, group_id)


def _by_topic(codes: dict[TopicPartition, int]) -> dict[str, list[tuple[int, int]]]:
    topics: dict[str, list[tuple[int, int]]] = {}
    for tp, code in codes.items():
        topics.setdefault(tp.topic, []).append((tp.partition, code))
    return topics


class GroupKafkaApis:
    def __init__(self, servicer: CoordinatorServicer) -> None:
        self.servicer = servicer
        self.groups = servicer.groups
        self.clock = servicer.clock

    def register(self, registry: ApiRegistry) -> None:
        handlers = {
            OFFSET_COMMIT: self.offset_commit, OFFSET_FETCH: self.offset_fetch, JOIN_GROUP: self.join_group,
            HEARTBEAT: self.heartbeat, LEAVE_GROUP: self.leave_group, SYNC_GROUP: self.sync_group,
            DESCRIBE_GROUPS: self.describe_groups, LIST_GROUPS: self.list_groups,
            DELETE_GROUPS: self.delete_groups, OFFSET_DELETE: self.offset_delete,
        }
        for api_key, (low, high) in API_VERSIONS.items():
            registry.register(api_key, low, high, handlers[api_key])

    # ------------------------------------------------------------------ membership

    async def join_group(self, request: Any, context: RequestContext) -> Any:
        if not _group_allowed(context, AclOperation.READ, request.group_id):
            return fields_of(context.response_type, error_code=kafka_error(Errors.GROUP_AUTHORIZATION_FAILED),
                             generation_id=-1, protocol_type=None, protocol_name="", leader="",
                             skip_assignment=False, member_id=request.member_id, members=())
        session_timeout_ms = _ms(request.session_timeout)
        rebalance = getattr(request, "rebalance_timeout", None)
        rebalance_timeout_ms = session_timeout_ms if rebalance is None else _ms(rebalance)
        instance_id = getattr(request, "group_instance_id", None)
        protocols = [(p.name, p.metadata) for p in request.protocols]
        wait_s = rebalance_timeout_ms / 1000 + JOIN_GRACE_S
        member_id = request.member_id
        result = None
        for _ in range(2):
            result = await self.servicer.join_group(
                request.group_id, member_id, instance_id, context.client_id or "", client_host(context.peer),
                rebalance_timeout_ms, session_timeout_ms, request.protocol_type, protocols, wait_s)
            if (result is None or result.error_code != Errors.MEMBER_ID_REQUIRED or context.api_version >= 4):
                break
            member_id = result.member_id  # an old client: join again at once with the given id
        module = context.response_module
        if result is None:
            return fields_of(context.response_type, error_code=kafka_error(Errors.REBALANCE_IN_PROGRESS),
                             generation_id=-1, leader="", member_id=member_id, members=())
        return fields_of(
            context.response_type, error_code=kafka_error(result.error_code), generation_id=result.generation_id,
            protocol_type=result.protocol_type, protocol_name=result.protocol_name or "",
            leader=result.leader_id or "", skip_assignment=False, member_id=result.member_id or "",
            members=tuple(fields_of(module.JoinGroupResponseMember, member_id=m.member_id,
                                    group_instance_id=m.group_instance_id, metadata=m.metadata)
                          for m in result.members))

    async def sync_group(self, request: Any, context: RequestContext) -> Any:
        if not _group_allowed(context, AclOperation.READ, request.group_id):
            return fields_of(context.response_type, error_code=kafka_error(Errors.GROUP_AUTHORIZATION_FAILED),
                             protocol_type=None, protocol_name=None, assignment=b"")
        result = await self.servicer.sync_group(
            request.group_id, request.generation_id, request.member_id, getattr(request, "group_instance_id", None),
            getattr(request, "protocol_type", None), getattr(request, "protocol_name", None),
            {a.member_id: a.assignment for a in request.assignments},
            SYNC_WAIT_S)
        if result is None:
            return fields_of(context.response_type, error_code=kafka_error(Errors.REBALANCE_IN_PROGRESS),
                             assignment=b"")
        return fields_of(context.response_type, error_code=kafka_error(result.error_code),
                         protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                         assignment=result.assignment or b"")

    async def heartbeat(self, request: Any, context: RequestContext) -> Any:
        if not _group_allowed(context, AclOperation.READ, request.group_id):
            return fields_of(context.response_type, error_code=kafka_error(Errors.GROUP_AUTHORIZATION_FAILED))
        code = self.groups.handle_heartbeat(request.group_id, request.member_id,
                                            getattr(request, "group_instance_id", None), request.generation_id)
        return fields_of(context.response_type, error_code=kafka_error(code))

    async def leave_group(self, request: Any, context: RequestContext) -> Any:
        if hasattr(request, "members"):  # v3+: a batch, static members by instance id
            members = [(m.member_id, m.group_instance_id) for m in request.members]
        else:
            members = [(request.member_id, None)]
        if not _group_allowed(context, AclOperation.READ, request.group_id):
            return fields_of(context.response_type, error_code=kafka_error(Errors.GROUP_AUTHORIZATION_FAILED),
                             members=())
        result = self.groups.handle_leave_group(request.group_id, members)
        code = result.error_code
        if context.api_version < 3 and code == Errors.NONE and result.member_errors:
            code = result.member_errors[0].error_code  # one member: its error is the answer's
        module = context.response_module
        return fields_of(context.response_type, error_code=kafka_error(code), members=tuple(
            module.MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                  error_code=kafka_error(m.error_code))
            for m in result.member_errors) if hasattr(module, "MemberResponse") else ())

    # ------------------------------------------------------------------ offsets

    async def offset_commit(self, request: Any, context: RequestContext) -> Any:
        now_ms = self.clock.time_ms()
        retention = getattr(request, "retention_time", None)
        retention_ms = -1 if retention is None else _ms(retention)
        expire_ms = now_ms + retention_ms if retention_ms > 0 else None
        offsets = {TopicPartition(topic.name, part.partition_index): CommittedOffset(
            part.committed_offset, getattr(part, "committed_leader_epoch", -1), part.committed_metadata or "",
            now_ms, expire_ms) for topic in request.topics for part in topic.partitions}
        if not _group_allowed(context, AclOperation.READ, request.group_id):
            denied = dict.fromkeys(offsets, Errors.GROUP_AUTHORIZATION_FAILED)
        else:
            denied = {tp: Errors.TOPIC_AUTHORIZATION_FAILED for tp in offsets if not context.access.allowed(
                AclOperation.READ, ResourceType.TOPIC, tp.topic)}
        wanted = {tp: offset for tp, offset in offsets.items() if tp not in denied}
        results, refused = ({}, Errors.NONE) if not wanted else await self.servicer.commit_offsets(
            request.group_id, request.member_id, getattr(request, "group_instance_id", None),
            request.generation_id_or_member_epoch, wanted, COMMIT_WAIT_S)
        codes = {tp: denied.get(tp, refused if results is None else results.get(tp, refused)) for tp in offsets}
        module = context.response_module
        return fields_of(context.response_type, topics=tuple(
            module.OffsetCommitResponseTopic(name=topic, partitions=tuple(
                module.OffsetCommitResponsePartition(partition_index=p, error_code=kafka_error(code))
                for p, code in answers))
            for topic, answers in _by_topic(codes).items()))

    async def offset_fetch(self, request: Any, context: RequestContext) -> Any:
        module = context.response_module
        if hasattr(request, "groups"):  # v8+: several groups in one request
            return fields_of(context.response_type, groups=tuple(
                self._fetched_group(module, group.group_id, group.topics, request.require_stable, context)
                for group in request.groups))
        if not _group_allowed(context, AclOperation.DESCRIBE, request.group_id):
            return fields_of(context.response_type, topics=(),
                             error_code=kafka_error(Errors.GROUP_AUTHORIZATION_FAILED))
        code, topics = self._fetched(module, request.group_id, request.topics,
                                     getattr(request, "require_stable", False),
                                     module.OffsetFetchResponseTopic, module.OffsetFetchResponsePartition, context)
        return fields_of(context.response_type, topics=topics, error_code=kafka_error(code))

    def _fetched_group(self, module: Any, group_id: str, topics: Any, require_stable: bool,
                       context: RequestContext) -> Any:
        if not _group_allowed(context, AclOperation.DESCRIBE, group_id):
            return module.OffsetFetchResponseGroup(group_id=group_id, topics=(),
                                                   error_code=kafka_error(Errors.GROUP_AUTHORIZATION_FAILED))
        code, answered = self._fetched(module, group_id, topics, require_stable, module.OffsetFetchResponseTopics,
                                       module.OffsetFetchResponsePartitions, context)
        return module.OffsetFetchResponseGroup(group_id=group_id, topics=answered, error_code=kafka_error(code))

    def _fetched(self, module: Any, group_id: str, topics: Any, require_stable: bool, topic_type: type,
                 partition_type: type, context: RequestContext) -> tuple[int, tuple]:
        partitions = None if topics is None else [TopicPartition(t.name, p) for t in topics
                                                  for p in t.partition_indexes]
        code, fetched = self.groups.handle_fetch_offsets(group_id, partitions, require_stable)
        by_topic: dict[str, list] = {}
        for tp in sorted(fetched):
            offset = fetched[tp]
            if not context.access.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, tp.topic,
                                          log_denial=partitions is not None):
                if partitions is None:
                    continue  # every committed offset: those of topics the principal may describe
                by_topic.setdefault(tp.topic, []).append(fields_of(
                    partition_type, partition_index=tp.partition, committed_offset=-1, committed_leader_epoch=-1,
                    metadata="", error_code=kafka_error(Errors.TOPIC_AUTHORIZATION_FAILED)))
                continue
            by_topic.setdefault(tp.topic, []).append(fields_of(
                partition_type, partition_index=tp.partition, committed_offset=offset.offset,
                committed_leader_epoch=offset.leader_epoch, metadata=offset.metadata or "",
                error_code=kafka_error(offset.error_code)))
        return code, tuple(topic_type(name=name, partitions=tuple(parts)) for name, parts in by_topic.items())

    # ------------------------------------------------------------------ groups

    async def list_groups(self, request: Any, context: RequestContext) -> Any:
        states = set(getattr(request, "states_filter", ()) or ()) or None
        code, groups = self.groups.handle_list_groups(states)
        access = context.access
        if not access.allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, log_denial=False):
            groups = [g for g in groups
                      if access.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id, log_denial=False)]
        module = context.response_module
        return fields_of(context.response_type, error_code=kafka_error(code), groups=tuple(
            fields_of(module.ListedGroup, group_id=g.group_id, protocol_type=g.protocol_type or "",
                      group_state=g.state, group_type="classic") for g in groups))

    async def describe_groups(self, request: Any, context: RequestContext) -> Any:
        module = context.response_module
        described = []
        for group_id in request.groups:
            if not _group_allowed(context, AclOperation.DESCRIBE, group_id):
                described.append(fields_of(
                    module.DescribedGroup, error_code=kafka_error(Errors.GROUP_AUTHORIZATION_FAILED),
                    group_id=group_id, group_state="", protocol_type="", protocol_data="",
                    authorized_operations=-2147483648, members=()))
                continue
            group = self.groups.handle_describe_group(group_id)
            described.append(fields_of(
                module.DescribedGroup, error_code=kafka_error(group.error_code), group_id=group_id,
                group_state=group.state, protocol_type=group.protocol_type or "",
                protocol_data=group.protocol_name or "", authorized_operations=-2147483648,
                members=tuple(fields_of(module.DescribedGroupMember, member_id=m.member_id,
                                        group_instance_id=m.group_instance_id, client_id=m.client_id,
                                        client_host=m.client_host, member_metadata=m.metadata or b"",
                                        member_assignment=m.assignment or b"")
                              for m in group.members)))
        return fields_of(context.response_type, groups=tuple(described))

    async def delete_groups(self, request: Any, context: RequestContext) -> Any:
        denied = {g: Errors.GROUP_AUTHORIZATION_FAILED for g in request.groups_names
                  if not _group_allowed(context, AclOperation.DELETE, g)}
        wanted = [g for g in request.groups_names if g not in denied]
        results, refused = ({}, Errors.NONE) if not wanted else await self.servicer.delete_groups(wanted,
                                                                                                  COMMIT_WAIT_S)
        results = {**results, **denied}
        module = context.response_module
        return fields_of(context.response_type, results=tuple(
            module.DeletableGroupResult(group_id=g, error_code=kafka_error(results.get(g, refused)))
            for g in request.groups_names))

    async def offset_delete(self, request: Any, context: RequestContext) -> Any:
        partitions = [TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions]
        module = context.response_module
        if not _group_allowed(context, AclOperation.DELETE, request.group_id):
            return fields_of(context.response_type, error_code=kafka_error(Errors.GROUP_AUTHORIZATION_FAILED),
                             topics=())
        denied = {tp: Errors.TOPIC_AUTHORIZATION_FAILED for tp in partitions
                  if not context.access.allowed(AclOperation.READ, ResourceType.TOPIC, tp.topic)}
        partitions = [tp for tp in partitions if tp not in denied]
        group_error, partition_errors = await self.servicer.delete_offsets(request.group_id, partitions,
                                                                           COMMIT_WAIT_S)
        partition_errors = {**partition_errors, **denied}
        return fields_of(context.response_type, error_code=kafka_error(group_error), topics=tuple(
            module.OffsetDeleteResponseTopic(name=topic, partitions=tuple(
                module.OffsetDeleteResponsePartition(partition_index=p, error_code=kafka_error(code))
                for p, code in answers))
            for topic, answers in _by_topic(dict(sorted(partition_errors.items()))).items()))
