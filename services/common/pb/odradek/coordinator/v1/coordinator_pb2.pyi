from services.common.pb.odradek.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JoinGroupRequest(_message.Message):
    __slots__ = ("group_id", "session_timeout_ms", "rebalance_timeout_ms", "member_id", "group_instance_id", "protocol_type", "protocols", "reason", "client_id")
    class JoinGroupRequestProtocol(_message.Message):
        __slots__ = ("name", "metadata")
        NAME_FIELD_NUMBER: _ClassVar[int]
        METADATA_FIELD_NUMBER: _ClassVar[int]
        name: str
        metadata: bytes
        def __init__(self, name: _Optional[str] = ..., metadata: _Optional[bytes] = ...) -> None: ...
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOLS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str
    protocol_type: str
    protocols: _containers.RepeatedCompositeFieldContainer[JoinGroupRequest.JoinGroupRequestProtocol]
    reason: str
    client_id: str
    def __init__(self, group_id: _Optional[str] = ..., session_timeout_ms: _Optional[int] = ..., rebalance_timeout_ms: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., protocol_type: _Optional[str] = ..., protocols: _Optional[_Iterable[_Union[JoinGroupRequest.JoinGroupRequestProtocol, _Mapping]]] = ..., reason: _Optional[str] = ..., client_id: _Optional[str] = ...) -> None: ...

class JoinGroupResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "generation_id", "protocol_type", "protocol_name", "leader", "member_id", "members")
    class JoinGroupResponseMember(_message.Message):
        __slots__ = ("member_id", "group_instance_id", "metadata")
        MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
        GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
        METADATA_FIELD_NUMBER: _ClassVar[int]
        member_id: str
        group_instance_id: str
        metadata: bytes
        def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., metadata: _Optional[bytes] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    generation_id: int
    protocol_type: str
    protocol_name: str
    leader: str
    member_id: str
    members: _containers.RepeatedCompositeFieldContainer[JoinGroupResponse.JoinGroupResponseMember]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., generation_id: _Optional[int] = ..., protocol_type: _Optional[str] = ..., protocol_name: _Optional[str] = ..., leader: _Optional[str] = ..., member_id: _Optional[str] = ..., members: _Optional[_Iterable[_Union[JoinGroupResponse.JoinGroupResponseMember, _Mapping]]] = ...) -> None: ...

class SyncGroupRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id", "protocol_type", "protocol_name", "assignments")
    class SyncGroupRequestAssignment(_message.Message):
        __slots__ = ("member_id", "assignment")
        MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
        ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
        member_id: str
        assignment: bytes
        def __init__(self, member_id: _Optional[str] = ..., assignment: _Optional[bytes] = ...) -> None: ...
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str
    protocol_type: str
    protocol_name: str
    assignments: _containers.RepeatedCompositeFieldContainer[SyncGroupRequest.SyncGroupRequestAssignment]
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., protocol_type: _Optional[str] = ..., protocol_name: _Optional[str] = ..., assignments: _Optional[_Iterable[_Union[SyncGroupRequest.SyncGroupRequestAssignment, _Mapping]]] = ...) -> None: ...

class SyncGroupResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "protocol_type", "protocol_name", "assignment")
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    protocol_type: str
    protocol_name: str
    assignment: bytes
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., protocol_type: _Optional[str] = ..., protocol_name: _Optional[str] = ..., assignment: _Optional[bytes] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message")
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class LeaveGroupRequest(_message.Message):
    __slots__ = ("group_id", "members")
    class MemberIdentity(_message.Message):
        __slots__ = ("member_id", "group_instance_id", "reason")
        MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
        GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
        REASON_FIELD_NUMBER: _ClassVar[int]
        member_id: str
        group_instance_id: str
        reason: str
        def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    members: _containers.RepeatedCompositeFieldContainer[LeaveGroupRequest.MemberIdentity]
    def __init__(self, group_id: _Optional[str] = ..., members: _Optional[_Iterable[_Union[LeaveGroupRequest.MemberIdentity, _Mapping]]] = ...) -> None: ...

class LeaveGroupResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "members")
    class MemberResponse(_message.Message):
        __slots__ = ("member_id", "group_instance_id", "error_code")
        MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
        GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        member_id: str
        group_instance_id: str
        error_code: int
        def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., error_code: _Optional[int] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    members: _containers.RepeatedCompositeFieldContainer[LeaveGroupResponse.MemberResponse]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., members: _Optional[_Iterable[_Union[LeaveGroupResponse.MemberResponse, _Mapping]]] = ...) -> None: ...

class OffsetCommitRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id", "retention_time_ms", "topics")
    class OffsetCommitRequestPartition(_message.Message):
        __slots__ = ("partition_index", "committed_offset", "committed_leader_epoch", "committed_metadata")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
        COMMITTED_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        COMMITTED_METADATA_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        committed_offset: int
        committed_leader_epoch: int
        committed_metadata: str
        def __init__(self, partition_index: _Optional[int] = ..., committed_offset: _Optional[int] = ..., committed_leader_epoch: _Optional[int] = ..., committed_metadata: _Optional[str] = ...) -> None: ...
    class OffsetCommitRequestTopic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[OffsetCommitRequest.OffsetCommitRequestPartition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetCommitRequest.OffsetCommitRequestPartition, _Mapping]]] = ...) -> None: ...
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    RETENTION_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str
    retention_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[OffsetCommitRequest.OffsetCommitRequestTopic]
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., retention_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[OffsetCommitRequest.OffsetCommitRequestTopic, _Mapping]]] = ...) -> None: ...

class OffsetCommitResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "topics")
    class OffsetCommitResponsePartition(_message.Message):
        __slots__ = ("partition_index", "error_code")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error_code: int
        def __init__(self, partition_index: _Optional[int] = ..., error_code: _Optional[int] = ...) -> None: ...
    class OffsetCommitResponseTopic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[OffsetCommitResponse.OffsetCommitResponsePartition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetCommitResponse.OffsetCommitResponsePartition, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetCommitResponse.OffsetCommitResponseTopic]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetCommitResponse.OffsetCommitResponseTopic, _Mapping]]] = ...) -> None: ...

class OffsetFetchRequest(_message.Message):
    __slots__ = ("group_id", "topics", "all_topics", "require_stable")
    class OffsetFetchRequestTopic(_message.Message):
        __slots__ = ("name", "partition_indexes")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITION_INDEXES_FIELD_NUMBER: _ClassVar[int]
        name: str
        partition_indexes: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partition_indexes: _Optional[_Iterable[int]] = ...) -> None: ...
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALL_TOPICS_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_STABLE_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetFetchRequest.OffsetFetchRequestTopic]
    all_topics: bool
    require_stable: bool
    def __init__(self, group_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetFetchRequest.OffsetFetchRequestTopic, _Mapping]]] = ..., all_topics: _Optional[bool] = ..., require_stable: _Optional[bool] = ...) -> None: ...

class OffsetFetchResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "topics")
    class OffsetFetchResponsePartition(_message.Message):
        __slots__ = ("partition_index", "committed_offset", "committed_leader_epoch", "metadata", "error_code")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
        COMMITTED_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        METADATA_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        committed_offset: int
        committed_leader_epoch: int
        metadata: str
        error_code: int
        def __init__(self, partition_index: _Optional[int] = ..., committed_offset: _Optional[int] = ..., committed_leader_epoch: _Optional[int] = ..., metadata: _Optional[str] = ..., error_code: _Optional[int] = ...) -> None: ...
    class OffsetFetchResponseTopic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[OffsetFetchResponse.OffsetFetchResponsePartition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetFetchResponse.OffsetFetchResponsePartition, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetFetchResponse.OffsetFetchResponseTopic]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetFetchResponse.OffsetFetchResponseTopic, _Mapping]]] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ("states_filter",)
    STATES_FILTER_FIELD_NUMBER: _ClassVar[int]
    states_filter: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, states_filter: _Optional[_Iterable[str]] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "groups")
    class ListedGroup(_message.Message):
        __slots__ = ("group_id", "protocol_type", "group_state")
        GROUP_ID_FIELD_NUMBER: _ClassVar[int]
        PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
        GROUP_STATE_FIELD_NUMBER: _ClassVar[int]
        group_id: str
        protocol_type: str
        group_state: str
        def __init__(self, group_id: _Optional[str] = ..., protocol_type: _Optional[str] = ..., group_state: _Optional[str] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    groups: _containers.RepeatedCompositeFieldContainer[ListGroupsResponse.ListedGroup]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., groups: _Optional[_Iterable[_Union[ListGroupsResponse.ListedGroup, _Mapping]]] = ...) -> None: ...

class DescribeGroupsRequest(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, groups: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeGroupsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "groups")
    class DescribedGroupMember(_message.Message):
        __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "member_metadata", "member_assignment")
        MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
        GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
        CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
        CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
        MEMBER_METADATA_FIELD_NUMBER: _ClassVar[int]
        MEMBER_ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
        member_id: str
        group_instance_id: str
        client_id: str
        client_host: str
        member_metadata: bytes
        member_assignment: bytes
        def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., member_metadata: _Optional[bytes] = ..., member_assignment: _Optional[bytes] = ...) -> None: ...
    class DescribedGroup(_message.Message):
        __slots__ = ("error_code", "error_message", "group_id", "group_state", "protocol_type", "protocol_data", "members")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        GROUP_ID_FIELD_NUMBER: _ClassVar[int]
        GROUP_STATE_FIELD_NUMBER: _ClassVar[int]
        PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
        PROTOCOL_DATA_FIELD_NUMBER: _ClassVar[int]
        MEMBERS_FIELD_NUMBER: _ClassVar[int]
        error_code: int
        error_message: str
        group_id: str
        group_state: str
        protocol_type: str
        protocol_data: str
        members: _containers.RepeatedCompositeFieldContainer[DescribeGroupsResponse.DescribedGroupMember]
        def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., group_id: _Optional[str] = ..., group_state: _Optional[str] = ..., protocol_type: _Optional[str] = ..., protocol_data: _Optional[str] = ..., members: _Optional[_Iterable[_Union[DescribeGroupsResponse.DescribedGroupMember, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    groups: _containers.RepeatedCompositeFieldContainer[DescribeGroupsResponse.DescribedGroup]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[DescribeGroupsResponse.DescribedGroup, _Mapping]]] = ...) -> None: ...

class DeleteGroupsRequest(_message.Message):
    __slots__ = ("groups_names",)
    GROUPS_NAMES_FIELD_NUMBER: _ClassVar[int]
    groups_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, groups_names: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteGroupsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "results")
    class DeletableGroupResult(_message.Message):
        __slots__ = ("group_id", "error_code")
        GROUP_ID_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        group_id: str
        error_code: int
        def __init__(self, group_id: _Optional[str] = ..., error_code: _Optional[int] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    results: _containers.RepeatedCompositeFieldContainer[DeleteGroupsResponse.DeletableGroupResult]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., results: _Optional[_Iterable[_Union[DeleteGroupsResponse.DeletableGroupResult, _Mapping]]] = ...) -> None: ...

class OffsetDeleteRequest(_message.Message):
    __slots__ = ("group_id", "topics")
    class OffsetDeleteRequestTopic(_message.Message):
        __slots__ = ("name", "partition_indexes")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITION_INDEXES_FIELD_NUMBER: _ClassVar[int]
        name: str
        partition_indexes: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partition_indexes: _Optional[_Iterable[int]] = ...) -> None: ...
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetDeleteRequest.OffsetDeleteRequestTopic]
    def __init__(self, group_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetDeleteRequest.OffsetDeleteRequestTopic, _Mapping]]] = ...) -> None: ...

class OffsetDeleteResponse(_message.Message):
    __slots__ = ("error_code", "throttle_time_ms", "topics")
    class OffsetDeleteResponsePartition(_message.Message):
        __slots__ = ("partition_index", "error_code")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error_code: int
        def __init__(self, partition_index: _Optional[int] = ..., error_code: _Optional[int] = ...) -> None: ...
    class OffsetDeleteResponseTopic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[OffsetDeleteResponse.OffsetDeleteResponsePartition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetDeleteResponse.OffsetDeleteResponsePartition, _Mapping]]] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    throttle_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[OffsetDeleteResponse.OffsetDeleteResponseTopic]
    def __init__(self, error_code: _Optional[int] = ..., throttle_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[OffsetDeleteResponse.OffsetDeleteResponseTopic, _Mapping]]] = ...) -> None: ...

class AddPartitionsToTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "topics")
    class AddPartitionsToTxnTopic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic]
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic, _Mapping]]] = ...) -> None: ...

class AddPartitionsToTxnResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "results")
    class AddPartitionsToTxnPartitionResult(_message.Message):
        __slots__ = ("partition_index", "error_code")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error_code: int
        def __init__(self, partition_index: _Optional[int] = ..., error_code: _Optional[int] = ...) -> None: ...
    class AddPartitionsToTxnTopicResult(_message.Message):
        __slots__ = ("name", "results_by_partition")
        NAME_FIELD_NUMBER: _ClassVar[int]
        RESULTS_BY_PARTITION_FIELD_NUMBER: _ClassVar[int]
        name: str
        results_by_partition: _containers.RepeatedCompositeFieldContainer[AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult]
        def __init__(self, name: _Optional[str] = ..., results_by_partition: _Optional[_Iterable[_Union[AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    results: _containers.RepeatedCompositeFieldContainer[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., results: _Optional[_Iterable[_Union[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult, _Mapping]]] = ...) -> None: ...

class AddOffsetsToTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "group_id")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., group_id: _Optional[str] = ...) -> None: ...

class AddOffsetsToTxnResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message")
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class TxnOffsetCommitRequest(_message.Message):
    __slots__ = ("transactional_id", "group_id", "producer_id", "producer_epoch", "generation_id", "member_id", "group_instance_id", "topics")
    class TxnOffsetCommitRequestPartition(_message.Message):
        __slots__ = ("partition_index", "committed_offset", "committed_leader_epoch", "committed_metadata")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
        COMMITTED_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        COMMITTED_METADATA_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        committed_offset: int
        committed_leader_epoch: int
        committed_metadata: str
        def __init__(self, partition_index: _Optional[int] = ..., committed_offset: _Optional[int] = ..., committed_leader_epoch: _Optional[int] = ..., committed_metadata: _Optional[str] = ...) -> None: ...
    class TxnOffsetCommitRequestTopic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition, _Mapping]]] = ...) -> None: ...
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str
    topics: _containers.RepeatedCompositeFieldContainer[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic]
    def __init__(self, transactional_id: _Optional[str] = ..., group_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic, _Mapping]]] = ...) -> None: ...

class TxnOffsetCommitResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "topics")
    class TxnOffsetCommitResponsePartition(_message.Message):
        __slots__ = ("partition_index", "error_code")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error_code: int
        def __init__(self, partition_index: _Optional[int] = ..., error_code: _Optional[int] = ...) -> None: ...
    class TxnOffsetCommitResponseTopic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    topics: _containers.RepeatedCompositeFieldContainer[TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic, _Mapping]]] = ...) -> None: ...

class EndTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "committed", "bump_epoch")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    BUMP_EPOCH_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    bump_epoch: bool
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., committed: _Optional[bool] = ..., bump_epoch: _Optional[bool] = ...) -> None: ...

class EndTxnResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "producer_epoch")
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    producer_epoch: int
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class ListTransactionsRequest(_message.Message):
    __slots__ = ("state_filters", "producer_id_filters")
    STATE_FILTERS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FILTERS_FIELD_NUMBER: _ClassVar[int]
    state_filters: _containers.RepeatedScalarFieldContainer[str]
    producer_id_filters: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, state_filters: _Optional[_Iterable[str]] = ..., producer_id_filters: _Optional[_Iterable[int]] = ...) -> None: ...

class ListTransactionsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "unknown_state_filters", "transaction_states")
    class TransactionState(_message.Message):
        __slots__ = ("transactional_id", "producer_id", "transaction_state")
        TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
        PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
        TRANSACTION_STATE_FIELD_NUMBER: _ClassVar[int]
        transactional_id: str
        producer_id: int
        transaction_state: str
        def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., transaction_state: _Optional[str] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_STATE_FILTERS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_STATES_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    unknown_state_filters: _containers.RepeatedScalarFieldContainer[str]
    transaction_states: _containers.RepeatedCompositeFieldContainer[ListTransactionsResponse.TransactionState]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., unknown_state_filters: _Optional[_Iterable[str]] = ..., transaction_states: _Optional[_Iterable[_Union[ListTransactionsResponse.TransactionState, _Mapping]]] = ...) -> None: ...

class DescribeTransactionsRequest(_message.Message):
    __slots__ = ("transactional_ids",)
    TRANSACTIONAL_IDS_FIELD_NUMBER: _ClassVar[int]
    transactional_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, transactional_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeTransactionsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "transaction_states")
    class TopicData(_message.Message):
        __slots__ = ("topic", "partitions")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    class TransactionState(_message.Message):
        __slots__ = ("error_code", "transactional_id", "transaction_state", "transaction_timeout_ms", "transaction_start_time_ms", "producer_id", "producer_epoch", "topics")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
        TRANSACTION_STATE_FIELD_NUMBER: _ClassVar[int]
        TRANSACTION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
        TRANSACTION_START_TIME_MS_FIELD_NUMBER: _ClassVar[int]
        PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
        PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        TOPICS_FIELD_NUMBER: _ClassVar[int]
        error_code: int
        transactional_id: str
        transaction_state: str
        transaction_timeout_ms: int
        transaction_start_time_ms: int
        producer_id: int
        producer_epoch: int
        topics: _containers.RepeatedCompositeFieldContainer[DescribeTransactionsResponse.TopicData]
        def __init__(self, error_code: _Optional[int] = ..., transactional_id: _Optional[str] = ..., transaction_state: _Optional[str] = ..., transaction_timeout_ms: _Optional[int] = ..., transaction_start_time_ms: _Optional[int] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[DescribeTransactionsResponse.TopicData, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_STATES_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    transaction_states: _containers.RepeatedCompositeFieldContainer[DescribeTransactionsResponse.TransactionState]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., transaction_states: _Optional[_Iterable[_Union[DescribeTransactionsResponse.TransactionState, _Mapping]]] = ...) -> None: ...
