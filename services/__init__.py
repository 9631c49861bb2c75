"""Odradek: a distributed commit log in the manner of Apache Kafka, one gRPC service per subsystem."""
