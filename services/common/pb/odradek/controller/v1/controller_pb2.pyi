from services.common.pb.odradek.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ElectionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PREFERRED: _ClassVar[ElectionType]
    UNCLEAN: _ClassVar[ElectionType]
PREFERRED: ElectionType
UNCLEAN: ElectionType

class CreateTopicsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms", "validate_only")
    class CreatableReplicaAssignment(_message.Message):
        __slots__ = ("partition_index", "broker_ids")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        BROKER_IDS_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        broker_ids: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, partition_index: _Optional[int] = ..., broker_ids: _Optional[_Iterable[int]] = ...) -> None: ...
    class CreatableTopicConfig(_message.Message):
        __slots__ = ("name", "value")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class CreatableTopic(_message.Message):
        __slots__ = ("name", "num_partitions", "replication_factor", "assignments", "configs")
        NAME_FIELD_NUMBER: _ClassVar[int]
        NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
        ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        name: str
        num_partitions: int
        replication_factor: int
        assignments: _containers.RepeatedCompositeFieldContainer[CreateTopicsRequest.CreatableReplicaAssignment]
        configs: _containers.RepeatedCompositeFieldContainer[CreateTopicsRequest.CreatableTopicConfig]
        def __init__(self, name: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., assignments: _Optional[_Iterable[_Union[CreateTopicsRequest.CreatableReplicaAssignment, _Mapping]]] = ..., configs: _Optional[_Iterable[_Union[CreateTopicsRequest.CreatableTopicConfig, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreateTopicsRequest.CreatableTopic]
    timeout_ms: int
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreateTopicsRequest.CreatableTopic, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreateTopicsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "topics")
    class CreatableTopicResult(_message.Message):
        __slots__ = ("name", "error_code", "error_message", "num_partitions", "replication_factor")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
        name: str
        error_code: int
        error_message: str
        num_partitions: int
        replication_factor: int
        def __init__(self, name: _Optional[str] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    topics: _containers.RepeatedCompositeFieldContainer[CreateTopicsResponse.CreatableTopicResult]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[CreateTopicsResponse.CreatableTopicResult, _Mapping]]] = ...) -> None: ...

class DeleteTopicsRequest(_message.Message):
    __slots__ = ("topic_names", "timeout_ms")
    TOPIC_NAMES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    topic_names: _containers.RepeatedScalarFieldContainer[str]
    timeout_ms: int
    def __init__(self, topic_names: _Optional[_Iterable[str]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class DeleteTopicsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "responses")
    class DeletableTopicResult(_message.Message):
        __slots__ = ("name", "error_code", "error_message")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        name: str
        error_code: int
        error_message: str
        def __init__(self, name: _Optional[str] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    responses: _containers.RepeatedCompositeFieldContainer[DeleteTopicsResponse.DeletableTopicResult]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., responses: _Optional[_Iterable[_Union[DeleteTopicsResponse.DeletableTopicResult, _Mapping]]] = ...) -> None: ...

class CreatePartitionsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms", "validate_only")
    class CreatePartitionsAssignment(_message.Message):
        __slots__ = ("broker_ids",)
        BROKER_IDS_FIELD_NUMBER: _ClassVar[int]
        broker_ids: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, broker_ids: _Optional[_Iterable[int]] = ...) -> None: ...
    class CreatePartitionsTopic(_message.Message):
        __slots__ = ("name", "count", "assignments")
        NAME_FIELD_NUMBER: _ClassVar[int]
        COUNT_FIELD_NUMBER: _ClassVar[int]
        ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
        name: str
        count: int
        assignments: _containers.RepeatedCompositeFieldContainer[CreatePartitionsRequest.CreatePartitionsAssignment]
        def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ..., assignments: _Optional[_Iterable[_Union[CreatePartitionsRequest.CreatePartitionsAssignment, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatePartitionsRequest.CreatePartitionsTopic]
    timeout_ms: int
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatePartitionsRequest.CreatePartitionsTopic, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreatePartitionsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "results")
    class CreatePartitionsTopicResult(_message.Message):
        __slots__ = ("name", "error_code", "error_message")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        name: str
        error_code: int
        error_message: str
        def __init__(self, name: _Optional[str] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    results: _containers.RepeatedCompositeFieldContainer[CreatePartitionsResponse.CreatePartitionsTopicResult]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., results: _Optional[_Iterable[_Union[CreatePartitionsResponse.CreatePartitionsTopicResult, _Mapping]]] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "cluster_id", "controller_id", "brokers")
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    cluster_id: str
    controller_id: int
    brokers: _containers.RepeatedCompositeFieldContainer[_common_pb2.Node]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., brokers: _Optional[_Iterable[_Union[_common_pb2.Node, _Mapping]]] = ...) -> None: ...

class ControlledShutdownRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class ControlledShutdownResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "remaining_partitions")
    class RemainingPartition(_message.Message):
        __slots__ = ("topic_name", "partition_index")
        TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        topic_name: str
        partition_index: int
        def __init__(self, topic_name: _Optional[str] = ..., partition_index: _Optional[int] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REMAINING_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    remaining_partitions: _containers.RepeatedCompositeFieldContainer[ControlledShutdownResponse.RemainingPartition]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., remaining_partitions: _Optional[_Iterable[_Union[ControlledShutdownResponse.RemainingPartition, _Mapping]]] = ...) -> None: ...

class AlterIsrRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "topics")
    class PartitionData(_message.Message):
        __slots__ = ("partition_index", "leader_epoch", "new_isr", "current_isr_version")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        NEW_ISR_FIELD_NUMBER: _ClassVar[int]
        CURRENT_ISR_VERSION_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        leader_epoch: int
        new_isr: _containers.RepeatedScalarFieldContainer[int]
        current_isr_version: int
        def __init__(self, partition_index: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., new_isr: _Optional[_Iterable[int]] = ..., current_isr_version: _Optional[int] = ...) -> None: ...
    class TopicData(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[AlterIsrRequest.PartitionData]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterIsrRequest.PartitionData, _Mapping]]] = ...) -> None: ...
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[AlterIsrRequest.TopicData]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[AlterIsrRequest.TopicData, _Mapping]]] = ...) -> None: ...

class AlterIsrResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "topics")
    class PartitionData(_message.Message):
        __slots__ = ("partition_index", "error_code", "leader_id", "leader_epoch", "isr", "current_isr_version")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        LEADER_ID_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        ISR_FIELD_NUMBER: _ClassVar[int]
        CURRENT_ISR_VERSION_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error_code: int
        leader_id: int
        leader_epoch: int
        isr: _containers.RepeatedScalarFieldContainer[int]
        current_isr_version: int
        def __init__(self, partition_index: _Optional[int] = ..., error_code: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., isr: _Optional[_Iterable[int]] = ..., current_isr_version: _Optional[int] = ...) -> None: ...
    class TopicData(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[AlterIsrResponse.PartitionData]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterIsrResponse.PartitionData, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    topics: _containers.RepeatedCompositeFieldContainer[AlterIsrResponse.TopicData]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[AlterIsrResponse.TopicData, _Mapping]]] = ...) -> None: ...

class ElectLeadersRequest(_message.Message):
    __slots__ = ("election_type", "topic_partitions", "all_partitions", "timeout_ms")
    class TopicPartitions(_message.Message):
        __slots__ = ("topic", "partitions")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    ELECTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    ALL_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    election_type: ElectionType
    topic_partitions: _containers.RepeatedCompositeFieldContainer[ElectLeadersRequest.TopicPartitions]
    all_partitions: bool
    timeout_ms: int
    def __init__(self, election_type: _Optional[_Union[ElectionType, str]] = ..., topic_partitions: _Optional[_Iterable[_Union[ElectLeadersRequest.TopicPartitions, _Mapping]]] = ..., all_partitions: _Optional[bool] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ElectLeadersResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "replica_election_results")
    class PartitionResult(_message.Message):
        __slots__ = ("partition_id", "error_code", "error_message")
        PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        partition_id: int
        error_code: int
        error_message: str
        def __init__(self, partition_id: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...
    class ReplicaElectionResult(_message.Message):
        __slots__ = ("topic", "partition_result")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_RESULT_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition_result: _containers.RepeatedCompositeFieldContainer[ElectLeadersResponse.PartitionResult]
        def __init__(self, topic: _Optional[str] = ..., partition_result: _Optional[_Iterable[_Union[ElectLeadersResponse.PartitionResult, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ELECTION_RESULTS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    replica_election_results: _containers.RepeatedCompositeFieldContainer[ElectLeadersResponse.ReplicaElectionResult]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., replica_election_results: _Optional[_Iterable[_Union[ElectLeadersResponse.ReplicaElectionResult, _Mapping]]] = ...) -> None: ...

class AlterPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("timeout_ms", "topics")
    class ReassignablePartition(_message.Message):
        __slots__ = ("partition_index", "replicas", "cancel")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        REPLICAS_FIELD_NUMBER: _ClassVar[int]
        CANCEL_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        replicas: _containers.RepeatedScalarFieldContainer[int]
        cancel: bool
        def __init__(self, partition_index: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., cancel: _Optional[bool] = ...) -> None: ...
    class ReassignableTopic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionReassignmentsRequest.ReassignablePartition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionReassignmentsRequest.ReassignablePartition, _Mapping]]] = ...) -> None: ...
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    timeout_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[AlterPartitionReassignmentsRequest.ReassignableTopic]
    def __init__(self, timeout_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[AlterPartitionReassignmentsRequest.ReassignableTopic, _Mapping]]] = ...) -> None: ...

class AlterPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "responses")
    class ReassignablePartitionResponse(_message.Message):
        __slots__ = ("partition_index", "error_code", "error_message")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error_code: int
        error_message: str
        def __init__(self, partition_index: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...
    class ReassignableTopicResponse(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionReassignmentsResponse.ReassignablePartitionResponse]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionReassignmentsResponse.ReassignablePartitionResponse, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    responses: _containers.RepeatedCompositeFieldContainer[AlterPartitionReassignmentsResponse.ReassignableTopicResponse]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., responses: _Optional[_Iterable[_Union[AlterPartitionReassignmentsResponse.ReassignableTopicResponse, _Mapping]]] = ...) -> None: ...

class ListPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("timeout_ms", "topics", "all_topics")
    class ListPartitionReassignmentsTopics(_message.Message):
        __slots__ = ("name", "partition_indexes")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITION_INDEXES_FIELD_NUMBER: _ClassVar[int]
        name: str
        partition_indexes: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partition_indexes: _Optional[_Iterable[int]] = ...) -> None: ...
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALL_TOPICS_FIELD_NUMBER: _ClassVar[int]
    timeout_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics]
    all_topics: bool
    def __init__(self, timeout_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics, _Mapping]]] = ..., all_topics: _Optional[bool] = ...) -> None: ...

class ListPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "topics")
    class OngoingPartitionReassignment(_message.Message):
        __slots__ = ("partition_index", "replicas", "adding_replicas", "removing_replicas")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        REPLICAS_FIELD_NUMBER: _ClassVar[int]
        ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        replicas: _containers.RepeatedScalarFieldContainer[int]
        adding_replicas: _containers.RepeatedScalarFieldContainer[int]
        removing_replicas: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, partition_index: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...
    class OngoingTopicReassignment(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[ListPartitionReassignmentsResponse.OngoingPartitionReassignment]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ListPartitionReassignmentsResponse.OngoingPartitionReassignment, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    topics: _containers.RepeatedCompositeFieldContainer[ListPartitionReassignmentsResponse.OngoingTopicReassignment]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[ListPartitionReassignmentsResponse.OngoingTopicReassignment, _Mapping]]] = ...) -> None: ...

class DescribeConfigsRequest(_message.Message):
    __slots__ = ("resources", "include_synonyms", "include_documentation")
    class DescribeConfigsResource(_message.Message):
        __slots__ = ("resource_type", "resource_name", "configuration_keys")
        RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
        CONFIGURATION_KEYS_FIELD_NUMBER: _ClassVar[int]
        resource_type: int
        resource_name: str
        configuration_keys: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., configuration_keys: _Optional[_Iterable[str]] = ...) -> None: ...
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SYNONYMS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_DOCUMENTATION_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[DescribeConfigsRequest.DescribeConfigsResource]
    include_synonyms: bool
    include_documentation: bool
    def __init__(self, resources: _Optional[_Iterable[_Union[DescribeConfigsRequest.DescribeConfigsResource, _Mapping]]] = ..., include_synonyms: _Optional[bool] = ..., include_documentation: _Optional[bool] = ...) -> None: ...

class DescribeConfigsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "results")
    class DescribeConfigsSynonym(_message.Message):
        __slots__ = ("name", "value", "source")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        SOURCE_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        source: int
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., source: _Optional[int] = ...) -> None: ...
    class DescribeConfigsResourceResult(_message.Message):
        __slots__ = ("name", "value", "read_only", "config_source", "is_sensitive", "synonyms", "config_type", "documentation")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        READ_ONLY_FIELD_NUMBER: _ClassVar[int]
        CONFIG_SOURCE_FIELD_NUMBER: _ClassVar[int]
        IS_SENSITIVE_FIELD_NUMBER: _ClassVar[int]
        SYNONYMS_FIELD_NUMBER: _ClassVar[int]
        CONFIG_TYPE_FIELD_NUMBER: _ClassVar[int]
        DOCUMENTATION_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        read_only: bool
        config_source: int
        is_sensitive: bool
        synonyms: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.DescribeConfigsSynonym]
        config_type: int
        documentation: str
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., read_only: _Optional[bool] = ..., config_source: _Optional[int] = ..., is_sensitive: _Optional[bool] = ..., synonyms: _Optional[_Iterable[_Union[DescribeConfigsResponse.DescribeConfigsSynonym, _Mapping]]] = ..., config_type: _Optional[int] = ..., documentation: _Optional[str] = ...) -> None: ...
    class DescribeConfigsResult(_message.Message):
        __slots__ = ("error_code", "error_message", "resource_type", "resource_name", "configs")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        error_code: int
        error_message: str
        resource_type: int
        resource_name: str
        configs: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.DescribeConfigsResourceResult]
        def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[DescribeConfigsResponse.DescribeConfigsResourceResult, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    results: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.DescribeConfigsResult]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., results: _Optional[_Iterable[_Union[DescribeConfigsResponse.DescribeConfigsResult, _Mapping]]] = ...) -> None: ...

class AlterConfigsRequest(_message.Message):
    __slots__ = ("resources", "validate_only")
    class AlterableConfig(_message.Message):
        __slots__ = ("name", "value")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AlterConfigsResource(_message.Message):
        __slots__ = ("resource_type", "resource_name", "configs")
        RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        resource_type: int
        resource_name: str
        configs: _containers.RepeatedCompositeFieldContainer[AlterConfigsRequest.AlterableConfig]
        def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[AlterConfigsRequest.AlterableConfig, _Mapping]]] = ...) -> None: ...
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[AlterConfigsRequest.AlterConfigsResource]
    validate_only: bool
    def __init__(self, resources: _Optional[_Iterable[_Union[AlterConfigsRequest.AlterConfigsResource, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterConfigsResourceResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "resource_type", "resource_name")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    resource_type: int
    resource_name: str
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ...) -> None: ...

class AlterConfigsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "responses")
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    responses: _containers.RepeatedCompositeFieldContainer[AlterConfigsResourceResponse]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., responses: _Optional[_Iterable[_Union[AlterConfigsResourceResponse, _Mapping]]] = ...) -> None: ...

class IncrementalAlterConfigsRequest(_message.Message):
    __slots__ = ("resources", "validate_only")
    class AlterableConfig(_message.Message):
        __slots__ = ("name", "config_operation", "value")
        NAME_FIELD_NUMBER: _ClassVar[int]
        CONFIG_OPERATION_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        name: str
        config_operation: int
        value: str
        def __init__(self, name: _Optional[str] = ..., config_operation: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    class AlterConfigsResource(_message.Message):
        __slots__ = ("resource_type", "resource_name", "configs")
        RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        resource_type: int
        resource_name: str
        configs: _containers.RepeatedCompositeFieldContainer[IncrementalAlterConfigsRequest.AlterableConfig]
        def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[IncrementalAlterConfigsRequest.AlterableConfig, _Mapping]]] = ...) -> None: ...
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[IncrementalAlterConfigsRequest.AlterConfigsResource]
    validate_only: bool
    def __init__(self, resources: _Optional[_Iterable[_Union[IncrementalAlterConfigsRequest.AlterConfigsResource, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class IncrementalAlterConfigsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "responses")
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    responses: _containers.RepeatedCompositeFieldContainer[AlterConfigsResourceResponse]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., responses: _Optional[_Iterable[_Union[AlterConfigsResourceResponse, _Mapping]]] = ...) -> None: ...
