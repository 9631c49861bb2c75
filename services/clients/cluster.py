"""An immutable snapshot of cluster metadata, as Kafka's `Cluster`: nodes, partitions, controller.

`Cluster.from_response(MetadataResponse)` builds one from a broker's Metadata answer;
`Cluster.bootstrap([(host, port), ...])` is the placeholder used before the first answer (its
nodes carry negative ids, as the Java client's bootstrap nodes do). Topics whose metadata came
back with an error are not in `topics`; their error codes are in `topic_errors`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.topic_partition import TopicPartition

NO_NODE_ID = -1


@dataclass(frozen=True, slots=True)
class Node:
    """A broker (or controller) endpoint."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        """The gRPC target, "host:port" (IPv6 hosts bracketed)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @classmethod
    def from_proto(cls, node: common_pb2.Node) -> Node:
        return cls(node.node_id, node.host, node.port, node.rack if node.HasField("rack") else None)

    def __str__(self) -> str:
        rack = f" rack: {self.rack}" if self.rack is not None else ""
        return f"{self.address} (id: {self.node_id}{rack})"


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition's leadership as a broker reported it; `leader` is -1 when there is none."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = Errors.NONE

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def has_leader(self) -> bool:
        return self.leader >= 0


@dataclass(frozen=True, slots=True)
class Cluster:
    """What one Metadata answer said about the cluster."""

    nodes: Mapping[int, Node]
    topics: Mapping[str, tuple[PartitionInfo, ...]] = field(default_factory=dict)
    topic_errors: Mapping[str, int] = field(default_factory=dict)
    internal_topics: frozenset[str] = frozenset()
    controller: Node | None = None
    controller_id: int = NO_NODE_ID
    cluster_id: str | None = None
    is_bootstrap: bool = False

    @classmethod
    def empty(cls) -> Cluster:
        return cls(nodes={})

    @classmethod
    def bootstrap(cls, addresses: Iterable[tuple[str, int]]) -> Cluster:
        nodes = {-(i + 1): Node(-(i + 1), host, port) for i, (host, port) in enumerate(addresses)}
        return cls(nodes=nodes, is_bootstrap=True)

    @classmethod
    def from_response(cls, response: broker_pb2.MetadataResponse) -> Cluster:
        nodes = {b.node_id: Node.from_proto(b) for b in response.brokers}
        topics: dict[str, tuple[PartitionInfo, ...]] = {}
        errors: dict[str, int] = {}
        internal = set()
        for topic in response.topics:
            if topic.is_internal:
                internal.add(topic.name)
            if topic.error_code != Errors.NONE:
                errors[topic.name] = topic.error_code
                continue
            partitions = (_partition_info(topic.name, p) for p in topic.partitions)
            topics[topic.name] = tuple(sorted(partitions, key=lambda p: p.partition))
        controller = Node.from_proto(response.controller) if response.HasField("controller") else None
        return cls(
            nodes=nodes,
            topics=topics,
            topic_errors=errors,
            internal_topics=frozenset(internal),
            controller=controller,
            controller_id=response.controller_id,
            cluster_id=response.cluster_id or None,
        )

    # ------------------------------------------------------------------ queries

    def node(self, node_id: int) -> Node | None:
        return self.nodes.get(node_id)

    def partitions_for(self, topic: str) -> tuple[PartitionInfo, ...]:
        return self.topics.get(topic, ())

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        for info in self.topics.get(topic, ()):
            if info.partition == partition:
                return info
        return None

    def leader_for(self, topic: str, partition: int) -> Node | None:
        """The leader's endpoint, or None when the partition, its leader or the node is unknown."""
        info = self.partition(topic, partition)
        if info is None or not info.has_leader:
            return None
        return self.nodes.get(info.leader)

    def topic_names(self, include_internal: bool = True) -> list[str]:
        return sorted(t for t in self.topics if include_internal or t not in self.internal_topics)

    def with_partitions(self, topic: str, partitions: Iterable[PartitionInfo]) -> Cluster:
        """A copy where `topic` has the given partitions (used to keep newer leader epochs)."""
        topics = dict(self.topics)
        topics[topic] = tuple(sorted(partitions, key=lambda p: p.partition))
        return Cluster(self.nodes, topics, self.topic_errors, self.internal_topics, self.controller,
                       self.controller_id, self.cluster_id, self.is_bootstrap)


    def without_topics(self, names: Iterable[str]) -> Cluster:
        """A copy that knows nothing of the topics `names` (their partitions and errors)."""
        names = set(names)
        if not names & (set(self.topics) | set(self.topic_errors)):
            return self
        return Cluster(self.nodes, {t: p for t, p in self.topics.items() if t not in names},
                       {t: c for t, c in self.topic_errors.items() if t not in names},
                       self.internal_topics - names, self.controller, self.controller_id, self.cluster_id,
                       self.is_bootstrap)


def _partition_info(topic: str, p: broker_pb2.MetadataResponse.MetadataResponsePartition) -> PartitionInfo:
    return PartitionInfo(
        topic=topic,
        partition=p.partition_index,
        leader=p.leader_id,
        leader_epoch=p.leader_epoch,
        replicas=tuple(p.replica_nodes),
        isr=tuple(p.isr_nodes),
        offline_replicas=tuple(p.offline_replicas),
        error_code=p.error_code,
    )
