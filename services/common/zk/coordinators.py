"""Coordinator instances and their partition ownership (Odradek's own znodes).

`/coordinators/ids/<id>` (ephemeral), written by each coordinator when its session starts; its
`czxid` is the registration epoch, as for brokers. `timestamp` is milliseconds as a string:

    {"version":1,"endpoint":"coord-1:9094","kafka_endpoint":"coord-1:19094","timestamp":"1620000000000"}

`kafka_endpoint` is where its Kafka listener is, when it has one (absent otherwise).

`/coordinators/ownership` (persistent): which live coordinator owns each partition of the internal
topics `__consumer_offsets` and `__transaction_state`, keyed by topic, then partition number as a
string. `owner` is a coordinator id, -1 for none. `epoch` is the ownership epoch of that partition:
it grows by one every time the partition changes owner and never goes back, so a deposed owner's
writes (offset commits, transaction markers) are fenced by their older epoch. `producer_id` is
the producer id every owner of that partition writes it with, using the ownership epoch as the
producer epoch, so the brokers themselves reject a deposed owner's writes (INVALID_PRODUCER_EPOCH);
-1 until one is allocated. `registration` is the owner's registration epoch (the czxid of its
`/coordinators/ids/<id>`) when it was given the partition: an owner that registered again (a
restarted process with the same id) gets the partition with a new epoch too, so nothing its
earlier incarnation might still write is accepted. The whole map is rewritten at once,
conditionally on the znode's data version:

    {"version":1,"partitions":{"__consumer_offsets":{"0":{"owner":1,"epoch":4,"producer_id":1000,
     "registration":4294967310},"1":{"owner":2,"epoch":0,"producer_id":1001,"registration":4294967320}},
     "__transaction_state":{"0":{"owner":2,"epoch":1}}}}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from services.common.topic_partition import TopicPartition
from services.common.zk.codec import as_int, dumps, loads_object
from services.common.zk.codec import field as required
from services.common.zk.errors import ZnodeFormatError

COORDINATORS_PATH = "/coordinators"
COORDINATOR_IDS_PATH = "/coordinators/ids"
OWNERSHIP_PATH = "/coordinators/ownership"
NO_OWNER = -1


def coordinator_path(coordinator_id: int) -> str:
    return f"{COORDINATOR_IDS_PATH}/{int(coordinator_id)}"


@dataclass(frozen=True, slots=True)
class CoordinatorInfo:
    coordinator_id: int
    endpoint: str
    timestamp_ms: int = 0
    kafka_endpoint: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionOwner:
    owner_id: int
    epoch: int
    producer_id: int = -1
    registration: int = -1


@dataclass(frozen=True, slots=True)
class CoordinatorOwnership:
    partitions: dict[TopicPartition, PartitionOwner] = field(default_factory=dict)

    def owned_by(self, coordinator_id: int) -> dict[TopicPartition, int]:
        """The partitions `coordinator_id` owns, with their ownership epochs."""
        return {tp: o.epoch for tp, o in self.partitions.items() if o.owner_id == coordinator_id}

    def reassigned(self, owners: Mapping[TopicPartition, int],
                   registrations: Mapping[int, int] | None = None) -> CoordinatorOwnership:
        """This map with `owners` applied: a partition whose owner changes, or whose owner has
        registered again since it got it (`registrations`: coordinator id -> registration epoch),
        gets epoch + 1; a new partition starts at epoch 0; the rest are kept as they are."""
        registrations = registrations or {}
        partitions = dict(self.partitions)
        for tp, owner_id in owners.items():
            current = partitions.get(tp)
            registration = registrations.get(owner_id, -1)
            if current is None:
                partitions[tp] = PartitionOwner(owner_id, 0, registration=registration)
            elif current.owner_id != owner_id or current.registration != registration:
                partitions[tp] = PartitionOwner(owner_id, current.epoch + 1, current.producer_id, registration)
        return CoordinatorOwnership(partitions)

    def with_producer_ids(self, producer_ids: Mapping[TopicPartition, int]) -> CoordinatorOwnership:
        """This map with the given partitions' producer ids set."""
        partitions = dict(self.partitions)
        for tp, producer_id in producer_ids.items():
            current = partitions[tp]
            partitions[tp] = PartitionOwner(current.owner_id, current.epoch, producer_id, current.registration)
        return CoordinatorOwnership(partitions)


def encode_coordinator(info: CoordinatorInfo) -> bytes:
    obj = {"version": 1, "endpoint": info.endpoint, "timestamp": str(info.timestamp_ms)}
    if info.kafka_endpoint is not None:
        obj["kafka_endpoint"] = info.kafka_endpoint
    return dumps(obj)


def decode_coordinator(coordinator_id: int, data: bytes | None) -> CoordinatorInfo:
    what = coordinator_path(coordinator_id)
    obj = loads_object(data, what)
    timestamp = obj.get("timestamp")
    return CoordinatorInfo(
        coordinator_id=coordinator_id,
        endpoint=str(required(obj, "endpoint", what)),
        timestamp_ms=as_int(timestamp, what) if timestamp is not None else 0,
        kafka_endpoint=str(obj["kafka_endpoint"]) if obj.get("kafka_endpoint") is not None else None,
    )


def encode_ownership(ownership: CoordinatorOwnership) -> bytes:
    topics: dict[str, dict[str, dict[str, int]]] = {}
    for tp, owner in sorted(ownership.partitions.items()):
        entry = {"owner": owner.owner_id, "epoch": owner.epoch}
        if owner.producer_id >= 0:
            entry["producer_id"] = owner.producer_id
        if owner.registration >= 0:
            entry["registration"] = owner.registration
        topics.setdefault(tp.topic, {})[str(tp.partition)] = entry
    return dumps({"version": 1, "partitions": topics})


def decode_ownership(data: bytes | None) -> CoordinatorOwnership:
    what = OWNERSHIP_PATH
    topics = required(loads_object(data, what), "partitions", what)
    if not isinstance(topics, dict):
        raise ZnodeFormatError(f"{what}: partitions must be an object, got {topics!r}")
    partitions: dict[TopicPartition, PartitionOwner] = {}
    for topic, by_partition in topics.items():
        if not isinstance(by_partition, dict):
            raise ZnodeFormatError(f"{what}: {topic} must map partitions to owners, got {by_partition!r}")
        for partition, owner in by_partition.items():
            if not isinstance(owner, dict):
                raise ZnodeFormatError(f"{what}: expected owner and epoch, got {owner!r}")
            partitions[TopicPartition(topic, as_int(partition, what))] = PartitionOwner(
                as_int(required(owner, "owner", what), what), as_int(required(owner, "epoch", what), what),
                as_int(owner.get("producer_id", -1), what), as_int(owner.get("registration", -1), what),
            )
    return CoordinatorOwnership(partitions)
