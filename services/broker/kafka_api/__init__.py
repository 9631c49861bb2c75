"""The broker's Kafka protocol handlers: Kafka requests translated to and from
`services.broker.handling` and the ReplicaManager, the same code the gRPC servicer calls; admin
requests (`admin`) forwarded to the controller."""

from services.broker.kafka_api.handlers import BrokerKafkaApis

__all__ = ["BrokerKafkaApis"]
