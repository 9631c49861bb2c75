"""Consumer partition assignors and the `partition.assignment.strategy` setting.

Modules: `base` (the ConsumerPartitionAssignor contract, RebalanceProtocol, member order),
`range`, `round_robin`, `sticky` and `cooperative_sticky` (Kafka's four built-in assignors),
`abstract_sticky` and `sticky_balance` (the sticky algorithm they share).

`assignors_from_config(value)` accepts what Kafka's `partition.assignment.strategy` accepts: a
list or a comma-separated string of protocol names ("range", "roundrobin", "sticky",
"cooperative-sticky") or Java class names ("org.apache.kafka.clients.consumer.RangeAssignor"),
plus assignor classes and instances. None means the default, [RangeAssignor()] (Kafka 2.8's
default). An empty list is returned as is; the consumer refuses to subscribe without an assignor.
"""

from __future__ import annotations

from collections.abc import Iterable

from services.clients.consumer.assignors.abstract_sticky import AbstractStickyAssignor, MemberData
from services.clients.consumer.assignors.base import (
    ConsumerPartitionAssignor,
    RebalanceProtocol,
    common_rebalance_protocol,
)
from services.clients.consumer.assignors.cooperative_sticky import CooperativeStickyAssignor
from services.clients.consumer.assignors.range import RangeAssignor
from services.clients.consumer.assignors.round_robin import RoundRobinAssignor
from services.clients.consumer.assignors.sticky import StickyAssignor

ASSIGNORS_BY_NAME: dict[str, type[ConsumerPartitionAssignor]] = {
    cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}

_JAVA_PACKAGE = "org.apache.kafka.clients.consumer."
ASSIGNORS_BY_CLASS_NAME: dict[str, type[ConsumerPartitionAssignor]] = {
    _JAVA_PACKAGE + cls.__name__: cls for cls in ASSIGNORS_BY_NAME.values()
}

AssignorSpec = str | type[ConsumerPartitionAssignor] | ConsumerPartitionAssignor


def default_assignors() -> list[ConsumerPartitionAssignor]:
    return [RangeAssignor()]


def _assignor_from_name(name: str) -> ConsumerPartitionAssignor:
    cls = ASSIGNORS_BY_NAME.get(name) or ASSIGNORS_BY_CLASS_NAME.get(name)
    if cls is None:
        known = ", ".join([*ASSIGNORS_BY_NAME, *ASSIGNORS_BY_CLASS_NAME])
        raise ValueError(f"unknown partition.assignment.strategy entry {name!r}; known assignors: {known}")
    return cls()


def _assignor_from_spec(spec: AssignorSpec) -> ConsumerPartitionAssignor:
    if isinstance(spec, ConsumerPartitionAssignor):
        return spec
    if isinstance(spec, type) and issubclass(spec, ConsumerPartitionAssignor):
        return spec()
    if isinstance(spec, str):
        return _assignor_from_name(spec.strip())
    raise ValueError(f"partition.assignment.strategy entry {spec!r} is neither an assignor name, "
                     f"an assignor class nor an assignor instance")


def assignors_from_config(value: str | AssignorSpec | Iterable[AssignorSpec] | None
                          ) -> list[ConsumerPartitionAssignor]:
    """The assignors named by a `partition.assignment.strategy` value, in preference order."""
    if value is None:
        return default_assignors()
    if isinstance(value, str):
        specs: list[AssignorSpec] = [part for part in (p.strip() for p in value.split(",")) if part]
    elif isinstance(value, ConsumerPartitionAssignor | type):
        specs = [value]
    else:
        specs = list(value)
    assignors = [_assignor_from_spec(spec) for spec in specs]
    names = [assignor.name for assignor in assignors]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"partition.assignment.strategy names assignor(s) {duplicates} more than once")
    return assignors


__all__ = [
    "ASSIGNORS_BY_CLASS_NAME", "ASSIGNORS_BY_NAME", "AbstractStickyAssignor", "ConsumerPartitionAssignor",
    "CooperativeStickyAssignor", "MemberData", "RangeAssignor", "RebalanceProtocol", "RoundRobinAssignor",
    "StickyAssignor", "assignors_from_config", "common_rebalance_protocol", "default_assignors",
]
