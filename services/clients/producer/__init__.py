"""Odradek's producer (Kafka 3.x semantics): `Producer`, its futures and metadata, its config,
the partitioners, and its errors."""

from services.clients.producer.config import ProducerConfig, ProducerPlugins, load_producer_config
from services.clients.producer.errors import (
    BufferExhaustedError,
    KafkaTimeoutError,
    ProducerClosedError,
    ProducerFencedError,
    RecordTooLargeError,
    TransactionAbortedError,
    TransactionStateError,
)
from services.clients.producer.futures import BatchResult, FutureRecordMetadata, ProducerRecord, RecordMetadata
from services.clients.producer.partitioner import (
    DefaultPartitioner,
    Partitioner,
    RoundRobinPartitioner,
    StickyPartitionCache,
    UniformStickyPartitioner,
)
from services.clients.producer.producer import Producer

__all__ = [
    "BatchResult", "BufferExhaustedError", "DefaultPartitioner", "FutureRecordMetadata", "KafkaTimeoutError",
    "Partitioner", "Producer", "ProducerClosedError", "ProducerConfig", "ProducerFencedError", "ProducerPlugins",
    "ProducerRecord", "RecordMetadata", "RecordTooLargeError", "RoundRobinPartitioner", "StickyPartitionCache",
    "TransactionAbortedError", "TransactionStateError", "UniformStickyPartitioner", "load_producer_config",
]
