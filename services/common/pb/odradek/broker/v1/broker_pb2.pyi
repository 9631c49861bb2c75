from services.common.pb.odradek.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ProduceRequest(_message.Message):
    __slots__ = ("transactional_id", "acks", "timeout_ms", "topic_data", "coordinator_id")
    class PartitionProduceData(_message.Message):
        __slots__ = ("index", "records")
        INDEX_FIELD_NUMBER: _ClassVar[int]
        RECORDS_FIELD_NUMBER: _ClassVar[int]
        index: int
        records: bytes
        def __init__(self, index: _Optional[int] = ..., records: _Optional[bytes] = ...) -> None: ...
    class TopicProduceData(_message.Message):
        __slots__ = ("name", "partition_data")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITION_DATA_FIELD_NUMBER: _ClassVar[int]
        name: str
        partition_data: _containers.RepeatedCompositeFieldContainer[ProduceRequest.PartitionProduceData]
        def __init__(self, name: _Optional[str] = ..., partition_data: _Optional[_Iterable[_Union[ProduceRequest.PartitionProduceData, _Mapping]]] = ...) -> None: ...
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_DATA_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    acks: int
    timeout_ms: int
    topic_data: _containers.RepeatedCompositeFieldContainer[ProduceRequest.TopicProduceData]
    coordinator_id: int
    def __init__(self, transactional_id: _Optional[str] = ..., acks: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., topic_data: _Optional[_Iterable[_Union[ProduceRequest.TopicProduceData, _Mapping]]] = ..., coordinator_id: _Optional[int] = ...) -> None: ...

class ProduceResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "responses")
    class BatchIndexAndErrorMessage(_message.Message):
        __slots__ = ("batch_index", "batch_index_error_message")
        BATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
        BATCH_INDEX_ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        batch_index: int
        batch_index_error_message: str
        def __init__(self, batch_index: _Optional[int] = ..., batch_index_error_message: _Optional[str] = ...) -> None: ...
    class PartitionProduceResponse(_message.Message):
        __slots__ = ("index", "error_code", "base_offset", "log_append_time_ms", "log_start_offset", "record_errors", "error_message")
        INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
        LOG_APPEND_TIME_MS_FIELD_NUMBER: _ClassVar[int]
        LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        RECORD_ERRORS_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        index: int
        error_code: int
        base_offset: int
        log_append_time_ms: int
        log_start_offset: int
        record_errors: _containers.RepeatedCompositeFieldContainer[ProduceResponse.BatchIndexAndErrorMessage]
        error_message: str
        def __init__(self, index: _Optional[int] = ..., error_code: _Optional[int] = ..., base_offset: _Optional[int] = ..., log_append_time_ms: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., record_errors: _Optional[_Iterable[_Union[ProduceResponse.BatchIndexAndErrorMessage, _Mapping]]] = ..., error_message: _Optional[str] = ...) -> None: ...
    class TopicProduceResponse(_message.Message):
        __slots__ = ("name", "partition_responses")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITION_RESPONSES_FIELD_NUMBER: _ClassVar[int]
        name: str
        partition_responses: _containers.RepeatedCompositeFieldContainer[ProduceResponse.PartitionProduceResponse]
        def __init__(self, name: _Optional[str] = ..., partition_responses: _Optional[_Iterable[_Union[ProduceResponse.PartitionProduceResponse, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    responses: _containers.RepeatedCompositeFieldContainer[ProduceResponse.TopicProduceResponse]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., responses: _Optional[_Iterable[_Union[ProduceResponse.TopicProduceResponse, _Mapping]]] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("replica_id", "max_wait_ms", "min_bytes", "max_bytes", "isolation_level", "topics", "rack_id", "session_id", "session_epoch", "forgotten_topics_data")
    class FetchPartition(_message.Message):
        __slots__ = ("partition", "current_leader_epoch", "fetch_offset", "last_fetched_epoch", "log_start_offset", "partition_max_bytes")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
        LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
        LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        PARTITION_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
        partition: int
        current_leader_epoch: int
        fetch_offset: int
        last_fetched_epoch: int
        log_start_offset: int
        partition_max_bytes: int
        def __init__(self, partition: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., partition_max_bytes: _Optional[int] = ...) -> None: ...
    class FetchTopic(_message.Message):
        __slots__ = ("topic", "partitions")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partitions: _containers.RepeatedCompositeFieldContainer[FetchRequest.FetchPartition]
        def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[FetchRequest.FetchPartition, _Mapping]]] = ...) -> None: ...
    class ForgottenTopic(_message.Message):
        __slots__ = ("topic", "partitions")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FORGOTTEN_TOPICS_DATA_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: _common_pb2.IsolationLevel
    topics: _containers.RepeatedCompositeFieldContainer[FetchRequest.FetchTopic]
    rack_id: str
    session_id: int
    session_epoch: int
    forgotten_topics_data: _containers.RepeatedCompositeFieldContainer[FetchRequest.ForgottenTopic]
    def __init__(self, replica_id: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., min_bytes: _Optional[int] = ..., max_bytes: _Optional[int] = ..., isolation_level: _Optional[_Union[_common_pb2.IsolationLevel, str]] = ..., topics: _Optional[_Iterable[_Union[FetchRequest.FetchTopic, _Mapping]]] = ..., rack_id: _Optional[str] = ..., session_id: _Optional[int] = ..., session_epoch: _Optional[int] = ..., forgotten_topics_data: _Optional[_Iterable[_Union[FetchRequest.ForgottenTopic, _Mapping]]] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "responses", "session_id")
    class EpochEndOffset(_message.Message):
        __slots__ = ("epoch", "end_offset")
        EPOCH_FIELD_NUMBER: _ClassVar[int]
        END_OFFSET_FIELD_NUMBER: _ClassVar[int]
        epoch: int
        end_offset: int
        def __init__(self, epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...
    class LeaderIdAndEpoch(_message.Message):
        __slots__ = ("leader_id", "leader_epoch")
        LEADER_ID_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        leader_id: int
        leader_epoch: int
        def __init__(self, leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...
    class AbortedTransaction(_message.Message):
        __slots__ = ("producer_id", "first_offset")
        PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
        FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
        producer_id: int
        first_offset: int
        def __init__(self, producer_id: _Optional[int] = ..., first_offset: _Optional[int] = ...) -> None: ...
    class PartitionData(_message.Message):
        __slots__ = ("partition_index", "error_code", "high_watermark", "last_stable_offset", "log_start_offset", "diverging_epoch", "current_leader", "aborted_transactions", "preferred_read_replica", "records")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
        LAST_STABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
        LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        DIVERGING_EPOCH_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_FIELD_NUMBER: _ClassVar[int]
        ABORTED_TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
        PREFERRED_READ_REPLICA_FIELD_NUMBER: _ClassVar[int]
        RECORDS_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error_code: int
        high_watermark: int
        last_stable_offset: int
        log_start_offset: int
        diverging_epoch: FetchResponse.EpochEndOffset
        current_leader: FetchResponse.LeaderIdAndEpoch
        aborted_transactions: _containers.RepeatedCompositeFieldContainer[FetchResponse.AbortedTransaction]
        preferred_read_replica: int
        records: bytes
        def __init__(self, partition_index: _Optional[int] = ..., error_code: _Optional[int] = ..., high_watermark: _Optional[int] = ..., last_stable_offset: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., diverging_epoch: _Optional[_Union[FetchResponse.EpochEndOffset, _Mapping]] = ..., current_leader: _Optional[_Union[FetchResponse.LeaderIdAndEpoch, _Mapping]] = ..., aborted_transactions: _Optional[_Iterable[_Union[FetchResponse.AbortedTransaction, _Mapping]]] = ..., preferred_read_replica: _Optional[int] = ..., records: _Optional[bytes] = ...) -> None: ...
    class FetchableTopicResponse(_message.Message):
        __slots__ = ("topic", "partitions")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partitions: _containers.RepeatedCompositeFieldContainer[FetchResponse.PartitionData]
        def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[FetchResponse.PartitionData, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    responses: _containers.RepeatedCompositeFieldContainer[FetchResponse.FetchableTopicResponse]
    session_id: int
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., responses: _Optional[_Iterable[_Union[FetchResponse.FetchableTopicResponse, _Mapping]]] = ..., session_id: _Optional[int] = ...) -> None: ...

class ListOffsetsRequest(_message.Message):
    __slots__ = ("replica_id", "isolation_level", "topics")
    class ListOffsetsPartition(_message.Message):
        __slots__ = ("partition_index", "current_leader_epoch", "timestamp")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        current_leader_epoch: int
        timestamp: int
        def __init__(self, partition_index: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., timestamp: _Optional[int] = ...) -> None: ...
    class ListOffsetsTopic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[ListOffsetsRequest.ListOffsetsPartition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ListOffsetsRequest.ListOffsetsPartition, _Mapping]]] = ...) -> None: ...
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    isolation_level: _common_pb2.IsolationLevel
    topics: _containers.RepeatedCompositeFieldContainer[ListOffsetsRequest.ListOffsetsTopic]
    def __init__(self, replica_id: _Optional[int] = ..., isolation_level: _Optional[_Union[_common_pb2.IsolationLevel, str]] = ..., topics: _Optional[_Iterable[_Union[ListOffsetsRequest.ListOffsetsTopic, _Mapping]]] = ...) -> None: ...

class ListOffsetsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "topics")
    class ListOffsetsPartitionResponse(_message.Message):
        __slots__ = ("partition_index", "error_code", "timestamp", "offset", "leader_epoch")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
        OFFSET_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error_code: int
        timestamp: int
        offset: int
        leader_epoch: int
        def __init__(self, partition_index: _Optional[int] = ..., error_code: _Optional[int] = ..., timestamp: _Optional[int] = ..., offset: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...
    class ListOffsetsTopicResponse(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[ListOffsetsResponse.ListOffsetsPartitionResponse]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ListOffsetsResponse.ListOffsetsPartitionResponse, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[ListOffsetsResponse.ListOffsetsTopicResponse]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[ListOffsetsResponse.ListOffsetsTopicResponse, _Mapping]]] = ...) -> None: ...

class MetadataRequest(_message.Message):
    __slots__ = ("topics", "all_topics", "allow_auto_topic_creation")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALL_TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_AUTO_TOPIC_CREATION_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    all_topics: bool
    allow_auto_topic_creation: bool
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., all_topics: _Optional[bool] = ..., allow_auto_topic_creation: _Optional[bool] = ...) -> None: ...

class MetadataResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "brokers", "cluster_id", "controller_id", "topics", "controller", "coordinators")
    class MetadataResponsePartition(_message.Message):
        __slots__ = ("error_code", "partition_index", "leader_id", "leader_epoch", "replica_nodes", "isr_nodes", "offline_replicas")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        LEADER_ID_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        REPLICA_NODES_FIELD_NUMBER: _ClassVar[int]
        ISR_NODES_FIELD_NUMBER: _ClassVar[int]
        OFFLINE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        error_code: int
        partition_index: int
        leader_id: int
        leader_epoch: int
        replica_nodes: _containers.RepeatedScalarFieldContainer[int]
        isr_nodes: _containers.RepeatedScalarFieldContainer[int]
        offline_replicas: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, error_code: _Optional[int] = ..., partition_index: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., replica_nodes: _Optional[_Iterable[int]] = ..., isr_nodes: _Optional[_Iterable[int]] = ..., offline_replicas: _Optional[_Iterable[int]] = ...) -> None: ...
    class MetadataResponseTopic(_message.Message):
        __slots__ = ("error_code", "name", "is_internal", "partitions")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        NAME_FIELD_NUMBER: _ClassVar[int]
        IS_INTERNAL_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        error_code: int
        name: str
        is_internal: bool
        partitions: _containers.RepeatedCompositeFieldContainer[MetadataResponse.MetadataResponsePartition]
        def __init__(self, error_code: _Optional[int] = ..., name: _Optional[str] = ..., is_internal: _Optional[bool] = ..., partitions: _Optional[_Iterable[_Union[MetadataResponse.MetadataResponsePartition, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    COORDINATORS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    brokers: _containers.RepeatedCompositeFieldContainer[_common_pb2.Node]
    cluster_id: str
    controller_id: int
    topics: _containers.RepeatedCompositeFieldContainer[MetadataResponse.MetadataResponseTopic]
    controller: _common_pb2.Node
    coordinators: _containers.RepeatedCompositeFieldContainer[_common_pb2.Node]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., brokers: _Optional[_Iterable[_Union[_common_pb2.Node, _Mapping]]] = ..., cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[MetadataResponse.MetadataResponseTopic, _Mapping]]] = ..., controller: _Optional[_Union[_common_pb2.Node, _Mapping]] = ..., coordinators: _Optional[_Iterable[_Union[_common_pb2.Node, _Mapping]]] = ...) -> None: ...

class OffsetForLeaderEpochRequest(_message.Message):
    __slots__ = ("replica_id", "topics")
    class OffsetForLeaderPartition(_message.Message):
        __slots__ = ("partition", "current_leader_epoch", "leader_epoch")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        partition: int
        current_leader_epoch: int
        leader_epoch: int
        def __init__(self, partition: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...
    class OffsetForLeaderTopic(_message.Message):
        __slots__ = ("topic", "partitions")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partitions: _containers.RepeatedCompositeFieldContainer[OffsetForLeaderEpochRequest.OffsetForLeaderPartition]
        def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetForLeaderEpochRequest.OffsetForLeaderPartition, _Mapping]]] = ...) -> None: ...
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    topics: _containers.RepeatedCompositeFieldContainer[OffsetForLeaderEpochRequest.OffsetForLeaderTopic]
    def __init__(self, replica_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[OffsetForLeaderEpochRequest.OffsetForLeaderTopic, _Mapping]]] = ...) -> None: ...

class OffsetForLeaderEpochResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "topics")
    class EpochEndOffset(_message.Message):
        __slots__ = ("error_code", "partition", "leader_epoch", "end_offset")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        END_OFFSET_FIELD_NUMBER: _ClassVar[int]
        error_code: int
        partition: int
        leader_epoch: int
        end_offset: int
        def __init__(self, error_code: _Optional[int] = ..., partition: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...
    class OffsetForLeaderTopicResult(_message.Message):
        __slots__ = ("topic", "partitions")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partitions: _containers.RepeatedCompositeFieldContainer[OffsetForLeaderEpochResponse.EpochEndOffset]
        def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetForLeaderEpochResponse.EpochEndOffset, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult, _Mapping]]] = ...) -> None: ...

class DescribeProducersRequest(_message.Message):
    __slots__ = ("topics",)
    class TopicRequest(_message.Message):
        __slots__ = ("name", "partition_indexes")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITION_INDEXES_FIELD_NUMBER: _ClassVar[int]
        name: str
        partition_indexes: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partition_indexes: _Optional[_Iterable[int]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DescribeProducersRequest.TopicRequest]
    def __init__(self, topics: _Optional[_Iterable[_Union[DescribeProducersRequest.TopicRequest, _Mapping]]] = ...) -> None: ...

class DescribeProducersResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "topics")
    class ProducerState(_message.Message):
        __slots__ = ("producer_id", "producer_epoch", "last_sequence", "last_timestamp", "coordinator_epoch", "current_txn_start_offset")
        PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
        PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
        LAST_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
        COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
        CURRENT_TXN_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        producer_id: int
        producer_epoch: int
        last_sequence: int
        last_timestamp: int
        coordinator_epoch: int
        current_txn_start_offset: int
        def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., last_sequence: _Optional[int] = ..., last_timestamp: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ..., current_txn_start_offset: _Optional[int] = ...) -> None: ...
    class PartitionResponse(_message.Message):
        __slots__ = ("partition_index", "error_code", "error_message", "active_producers")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        ACTIVE_PRODUCERS_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error_code: int
        error_message: str
        active_producers: _containers.RepeatedCompositeFieldContainer[DescribeProducersResponse.ProducerState]
        def __init__(self, partition_index: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., active_producers: _Optional[_Iterable[_Union[DescribeProducersResponse.ProducerState, _Mapping]]] = ...) -> None: ...
    class TopicResponse(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[DescribeProducersResponse.PartitionResponse]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[DescribeProducersResponse.PartitionResponse, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[DescribeProducersResponse.TopicResponse]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[DescribeProducersResponse.TopicResponse, _Mapping]]] = ...) -> None: ...

class DeleteRecordsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms")
    class DeleteRecordsPartition(_message.Message):
        __slots__ = ("partition_index", "offset")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        OFFSET_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        offset: int
        def __init__(self, partition_index: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...
    class DeleteRecordsTopic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[DeleteRecordsRequest.DeleteRecordsPartition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[DeleteRecordsRequest.DeleteRecordsPartition, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DeleteRecordsRequest.DeleteRecordsTopic]
    timeout_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[DeleteRecordsRequest.DeleteRecordsTopic, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class DeleteRecordsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "topics")
    class DeleteRecordsPartitionResult(_message.Message):
        __slots__ = ("partition_index", "low_watermark", "error_code")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        LOW_WATERMARK_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        low_watermark: int
        error_code: int
        def __init__(self, partition_index: _Optional[int] = ..., low_watermark: _Optional[int] = ..., error_code: _Optional[int] = ...) -> None: ...
    class DeleteRecordsTopicResult(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[DeleteRecordsResponse.DeleteRecordsPartitionResult]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[DeleteRecordsResponse.DeleteRecordsPartitionResult, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[DeleteRecordsResponse.DeleteRecordsTopicResult]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[DeleteRecordsResponse.DeleteRecordsTopicResult, _Mapping]]] = ...) -> None: ...

class DescribeLogDirsRequest(_message.Message):
    __slots__ = ("all_topics", "topics")
    class DescribableLogDirTopic(_message.Message):
        __slots__ = ("topic", "partitions")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    ALL_TOPICS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    all_topics: bool
    topics: _containers.RepeatedCompositeFieldContainer[DescribeLogDirsRequest.DescribableLogDirTopic]
    def __init__(self, all_topics: _Optional[bool] = ..., topics: _Optional[_Iterable[_Union[DescribeLogDirsRequest.DescribableLogDirTopic, _Mapping]]] = ...) -> None: ...

class DescribeLogDirsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "results")
    class DescribeLogDirsPartition(_message.Message):
        __slots__ = ("partition_index", "partition_size", "offset_lag", "is_future_key")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        PARTITION_SIZE_FIELD_NUMBER: _ClassVar[int]
        OFFSET_LAG_FIELD_NUMBER: _ClassVar[int]
        IS_FUTURE_KEY_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        partition_size: int
        offset_lag: int
        is_future_key: bool
        def __init__(self, partition_index: _Optional[int] = ..., partition_size: _Optional[int] = ..., offset_lag: _Optional[int] = ..., is_future_key: _Optional[bool] = ...) -> None: ...
    class DescribeLogDirsTopic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[DescribeLogDirsResponse.DescribeLogDirsPartition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[DescribeLogDirsResponse.DescribeLogDirsPartition, _Mapping]]] = ...) -> None: ...
    class DescribeLogDirsResult(_message.Message):
        __slots__ = ("error_code", "log_dir", "topics")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        LOG_DIR_FIELD_NUMBER: _ClassVar[int]
        TOPICS_FIELD_NUMBER: _ClassVar[int]
        error_code: int
        log_dir: str
        topics: _containers.RepeatedCompositeFieldContainer[DescribeLogDirsResponse.DescribeLogDirsTopic]
        def __init__(self, error_code: _Optional[int] = ..., log_dir: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[DescribeLogDirsResponse.DescribeLogDirsTopic, _Mapping]]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    results: _containers.RepeatedCompositeFieldContainer[DescribeLogDirsResponse.DescribeLogDirsResult]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., results: _Optional[_Iterable[_Union[DescribeLogDirsResponse.DescribeLogDirsResult, _Mapping]]] = ...) -> None: ...

class PartitionError(_message.Message):
    __slots__ = ("topic_name", "partition_index", "error_code")
    TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    topic_name: str
    partition_index: int
    error_code: int
    def __init__(self, topic_name: _Optional[str] = ..., partition_index: _Optional[int] = ..., error_code: _Optional[int] = ...) -> None: ...

class LeaderAndIsrRequest(_message.Message):
    __slots__ = ("controller_id", "controller_epoch", "broker_epoch", "type", "partition_states", "live_leaders")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_STATES_FIELD_NUMBER: _ClassVar[int]
    LIVE_LEADERS_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    type: int
    partition_states: _containers.RepeatedCompositeFieldContainer[_common_pb2.PartitionState]
    live_leaders: _containers.RepeatedCompositeFieldContainer[_common_pb2.Node]
    def __init__(self, controller_id: _Optional[int] = ..., controller_epoch: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., type: _Optional[int] = ..., partition_states: _Optional[_Iterable[_Union[_common_pb2.PartitionState, _Mapping]]] = ..., live_leaders: _Optional[_Iterable[_Union[_common_pb2.Node, _Mapping]]] = ...) -> None: ...

class LeaderAndIsrResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "partition_errors")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ERRORS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    partition_errors: _containers.RepeatedCompositeFieldContainer[PartitionError]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., partition_errors: _Optional[_Iterable[_Union[PartitionError, _Mapping]]] = ...) -> None: ...

class UpdateMetadataRequest(_message.Message):
    __slots__ = ("controller_id", "controller_epoch", "broker_epoch", "partition_states", "live_brokers", "controller", "cluster_id")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_STATES_FIELD_NUMBER: _ClassVar[int]
    LIVE_BROKERS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: _containers.RepeatedCompositeFieldContainer[_common_pb2.PartitionState]
    live_brokers: _containers.RepeatedCompositeFieldContainer[_common_pb2.Node]
    controller: _common_pb2.Node
    cluster_id: str
    def __init__(self, controller_id: _Optional[int] = ..., controller_epoch: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., partition_states: _Optional[_Iterable[_Union[_common_pb2.PartitionState, _Mapping]]] = ..., live_brokers: _Optional[_Iterable[_Union[_common_pb2.Node, _Mapping]]] = ..., controller: _Optional[_Union[_common_pb2.Node, _Mapping]] = ..., cluster_id: _Optional[str] = ...) -> None: ...

class UpdateMetadataResponse(_message.Message):
    __slots__ = ("error_code", "error_message")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class StopReplicaRequest(_message.Message):
    __slots__ = ("controller_id", "controller_epoch", "broker_epoch", "topic_states")
    class StopReplicaPartitionState(_message.Message):
        __slots__ = ("partition_index", "leader_epoch", "delete_partition")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        DELETE_PARTITION_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        leader_epoch: int
        delete_partition: bool
        def __init__(self, partition_index: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., delete_partition: _Optional[bool] = ...) -> None: ...
    class StopReplicaTopicState(_message.Message):
        __slots__ = ("topic_name", "partition_states")
        TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITION_STATES_FIELD_NUMBER: _ClassVar[int]
        topic_name: str
        partition_states: _containers.RepeatedCompositeFieldContainer[StopReplicaRequest.StopReplicaPartitionState]
        def __init__(self, topic_name: _Optional[str] = ..., partition_states: _Optional[_Iterable[_Union[StopReplicaRequest.StopReplicaPartitionState, _Mapping]]] = ...) -> None: ...
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPIC_STATES_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    topic_states: _containers.RepeatedCompositeFieldContainer[StopReplicaRequest.StopReplicaTopicState]
    def __init__(self, controller_id: _Optional[int] = ..., controller_epoch: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., topic_states: _Optional[_Iterable[_Union[StopReplicaRequest.StopReplicaTopicState, _Mapping]]] = ...) -> None: ...

class StopReplicaResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "partition_errors")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ERRORS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    partition_errors: _containers.RepeatedCompositeFieldContainer[PartitionError]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., partition_errors: _Optional[_Iterable[_Union[PartitionError, _Mapping]]] = ...) -> None: ...
