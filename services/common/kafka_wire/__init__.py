"""Kafka's binary protocol, served over asyncio streams: size-prefixed frames, request and response
headers, the kio codec generated from Kafka's message specs, and a registry of API handlers from
which ApiVersions is answered. Brokers and coordinators each register their own handlers."""

from services.common.kafka_wire.codec import fields_of, kafka_error
from services.common.kafka_wire.registry import ApiRegistry, RequestContext
from services.common.kafka_wire.server import DEFAULT_REQUEST_MAX_BYTES, KafkaWireServer

__all__ = ["DEFAULT_REQUEST_MAX_BYTES", "ApiRegistry", "KafkaWireServer", "RequestContext", "fields_of",
           "kafka_error"]
