"""Replica assignment: Kafka's AdminUtils.assignReplicasToBrokers and the checks on given assignments.

Rack-unaware: the first replica of partition p goes to broker (p + start_index) % n; the others
follow it at an increasing shift, `1 + (shift + j) % (n - 1)` places further on, where the shift
grows by one each time p wraps around the broker list. Kafka's example, 5 brokers, 10 partitions,
replication factor 3, start index and shift 0:

    p0 0,1,2  p1 1,2,3  p2 2,3,4  p3 3,4,0  p4 4,0,1
    p5 0,2,3  p6 1,3,4  p7 2,4,0  p8 3,0,1  p9 4,1,2

Rack-aware: the same round robin over a rack-alternated broker list (racks sorted, brokers of each
rack sorted, taken one rack at a time); a follower is skipped while its rack already has a
replica and some rack has none, or while its broker already has one and some broker has none.

The start index and the initial shift are each drawn from the random source unless a fixed start
index is given (which then serves as both). New partitions of an existing topic continue from
the existing assignment: the start index is the position of the first broker whose id is at
least partition 0's first replica, and partition ids continue from the current count.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from services.common.errors import Errors, KafkaError
from services.common.shared_types import BrokerInfo

_DEFAULT_RANDOM = random.Random()


class RandomSource(Protocol):
    def randrange(self, stop: int, /) -> int: ...


class AdminOperationError(KafkaError):
    """Kafka's AdminOperationException (answered as UNKNOWN_SERVER_ERROR)."""

    error = Errors.UNKNOWN_SERVER_ERROR


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    broker_id: int
    rack: str | None = None


def broker_metadatas(brokers: Iterable[BrokerInfo], rack_aware: bool = True) -> list[BrokerMetadata]:
    """Brokers sorted by id, with racks (Kafka's RackAwareMode.Enforced) or without (Disabled).

    Enforced mode refuses a cluster where only some brokers have a rack.
    """
    ordered = sorted(brokers, key=lambda b: b.broker_id)
    if not rack_aware:
        return [BrokerMetadata(b.broker_id) for b in ordered]
    with_rack = [b for b in ordered if b.rack is not None]
    if with_rack and len(with_rack) < len(ordered):
        raise AdminOperationError(
            "Not all brokers have rack information. Add --disable-rack-aware in command line"
            " to make replica assignment without rack information."
        )
    return [BrokerMetadata(b.broker_id, b.rack) for b in ordered]


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerMetadata],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rand: RandomSource | None = None,
) -> dict[int, tuple[int, ...]]:
    """Partition id -> replicas (the first is the preferred leader)."""
    if num_partitions <= 0:
        raise KafkaError("Number of partitions must be larger than 0.", error=Errors.INVALID_PARTITIONS)
    if replication_factor <= 0:
        raise KafkaError("Replication factor must be larger than 0.", error=Errors.INVALID_REPLICATION_FACTOR)
    if replication_factor > len(brokers):
        raise KafkaError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
            error=Errors.INVALID_REPLICATION_FACTOR,
        )
    rand = rand if rand is not None else _DEFAULT_RANDOM
    if all(b.rack is None for b in brokers):
        broker_ids = [b.broker_id for b in brokers]
        return _assign_rack_unaware(
            num_partitions, replication_factor, broker_ids, fixed_start_index, start_partition_id, rand
        )
    if any(b.rack is None for b in brokers):
        raise AdminOperationError("Not all brokers have rack information for replica rack aware assignment.")
    racks = {b.broker_id: b.rack for b in brokers if b.rack is not None}
    return _assign_rack_aware(
        num_partitions, replication_factor, racks, fixed_start_index, start_partition_id, rand
    )


def _start(fixed_start_index: int, n: int, rand: RandomSource) -> tuple[int, int]:
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    start_index = rand.randrange(n)
    return start_index, rand.randrange(n)


def _replica_index(first_replica_index: int, shift: int, replica_index: int, n: int) -> int:
    return (first_replica_index + 1 + (shift + replica_index) % (n - 1)) % n


def _assign_rack_unaware(
    num_partitions: int,
    replication_factor: int,
    broker_ids: list[int],
    fixed_start_index: int,
    start_partition_id: int,
    rand: RandomSource,
) -> dict[int, tuple[int, ...]]:
    n = len(broker_ids)
    start_index, shift = _start(fixed_start_index, n, rand)
    partition_id = max(0, start_partition_id)
    result: dict[int, tuple[int, ...]] = {}
    for _ in range(num_partitions):
        if partition_id > 0 and partition_id % n == 0:
            shift += 1
        first = (partition_id + start_index) % n
        followers = [broker_ids[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)]
        result[partition_id] = (broker_ids[first], *followers)
        partition_id += 1
    return result


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one rack at a time (racks and each rack's brokers sorted):
    {0: r1, 1: r3, 2: r3, 3: r2, 4: r2, 5: r1} -> [0, 3, 1, 5, 4, 2]."""
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker_id)
    iterators = {rack: iter(sorted(ids)) for rack, ids in by_rack.items()}
    racks = sorted(iterators)
    result: list[int] = []
    rack_index = 0
    while len(result) < len(broker_racks):
        broker = next(iterators[racks[rack_index]], None)
        if broker is not None:
            result.append(broker)
        rack_index = (rack_index + 1) % len(racks)
    return result


def _assign_rack_aware(
    num_partitions: int,
    replication_factor: int,
    broker_racks: Mapping[int, str],
    fixed_start_index: int,
    start_partition_id: int,
    rand: RandomSource,
) -> dict[int, tuple[int, ...]]:
    num_racks = len(set(broker_racks.values()))
    arranged = rack_alternated_broker_list(broker_racks)
    n = len(arranged)
    start_index, shift = _start(fixed_start_index, n, rand)
    partition_id = max(0, start_partition_id)
    result: dict[int, tuple[int, ...]] = {}
    for _ in range(num_partitions):
        if partition_id > 0 and partition_id % n == 0:
            shift += 1
        first = (partition_id + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with_replicas = {broker_racks[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                rack_ok = rack not in racks_with_replicas or len(racks_with_replicas) == num_racks
                broker_ok = broker not in brokers_with_replicas or len(brokers_with_replicas) == n
                if rack_ok and broker_ok:
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        result[partition_id] = tuple(replicas)
        partition_id += 1
    return result


def validate_replica_assignment(
    assignment: Mapping[int, Sequence[int]],
    expected_replication_factor: int,
    available_broker_ids: Collection[int],
) -> None:
    """Kafka's checks on an explicit assignment of new partitions (CreatePartitions)."""
    for partition_id, replicas in assignment.items():
        if not replicas:
            raise _invalid_assignment(f"Cannot have replication factor of 0 for partition id {partition_id}.")
        if len(replicas) != len(set(replicas)):
            raise _invalid_assignment(
                "Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, replicas))} for partition id {partition_id}."
            )
        if not set(replicas) <= set(available_broker_ids):
            raise KafkaError(
                f"Some brokers specified for partition id {partition_id} are not available. "
                f"Specified brokers: {', '.join(map(str, replicas))}, "
                f"available brokers: {', '.join(map(str, sorted(available_broker_ids)))}.",
                error=Errors.BROKER_NOT_AVAILABLE,
            )
    bad = sorted((p, len(r)) for p, r in assignment.items() if len(r) != expected_replication_factor)
    if bad:
        raise _invalid_assignment(
            "Inconsistent replication factor between partitions, partition 0 has "
            f"{expected_replication_factor} while partitions [{', '.join(str(p) for p, _ in bad)}] have "
            f"replication factors [{', '.join(str(n) for _, n in bad)}], respectively."
        )


def validate_topic_assignment(assignment: Mapping[int, Sequence[int]]) -> None:
    """Kafka's checks on a new topic's assignment: one replication factor, no duplicate replica,
    partition ids 0..n-1."""
    if len({len(replicas) for replicas in assignment.values()}) != 1:
        raise _invalid_assignment("All partitions should have the same number of replicas")
    for replicas in assignment.values():
        if len(replicas) != len(set(replicas)):
            raise _invalid_assignment(f"Duplicate replica assignment found: {dict(assignment)}")
    if sorted(assignment) != list(range(len(assignment))):
        raise _invalid_assignment("partitions should be a consecutive 0-based integer sequence")


def new_partitions_assignment(
    topic: str,
    existing_assignment: Mapping[int, Sequence[int]],
    brokers: Sequence[BrokerMetadata],
    num_partitions: int,
    replica_assignment: Mapping[int, Sequence[int]] | None = None,
    rand: RandomSource | None = None,
) -> dict[int, tuple[int, ...]]:
    """Assignment of the partitions that take `topic` from its current count to `num_partitions`
    (Kafka's createNewPartitionsAssignment); `brokers` sorted by id."""
    partition0 = existing_assignment.get(0)
    if partition0 is None:
        raise AdminOperationError(
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is missing. "
            f"Assignment: {dict(existing_assignment)}"
        )
    to_add = num_partitions - len(existing_assignment)
    if to_add <= 0:
        raise KafkaError(
            "The number of partitions for a topic can only be increased. "
            f"Topic {topic} currently has {len(existing_assignment)} partitions, "
            f"{num_partitions} would not be an increase.",
            error=Errors.INVALID_PARTITIONS,
        )
    if replica_assignment is not None:
        validate_replica_assignment(replica_assignment, len(partition0), {b.broker_id for b in brokers})
        return {p: tuple(r) for p, r in sorted(replica_assignment.items())}
    start_index = next((i for i, b in enumerate(brokers) if b.broker_id >= partition0[0]), 0)
    return assign_replicas_to_brokers(
        brokers, to_add, len(partition0), start_index, len(existing_assignment), rand
    )


def _invalid_assignment(message: str) -> KafkaError:
    return KafkaError(message, error=Errors.INVALID_REPLICA_ASSIGNMENT)
