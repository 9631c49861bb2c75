"""The JSON of the console's views that REST Proxy v3 does not answer, from the admin client's types.

- a page of names: those containing a filter text (case-insensitive), sorted, `offset`/`limit`;
- a topic row: partitions, replication factor, under-replicated and offline partition counts, and
  its messages (end less start offset, summed; null while a partition's offsets are unknown);
- a partition row: leader (-1: none), replicas, ISR, whether it is under-replicated (an ISR smaller
  than its replicas) or offline (no leader);
- a consumer group: state, members (client id, host, assigned partitions), and per partition the
  rows of `odradek consumer-groups --describe` (`cli_groups.PartitionOffsets`) with their total lag;
- the cluster's health: brokers that replicas name but that are not live, and partition counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from services.clients.admin_types import ConsumerGroupDescription, TopicDescription
from services.clients.cli_groups import PartitionOffsets
from services.clients.cluster import PartitionInfo
from services.common.topic_partition import TopicPartition


def page(names: Iterable[str], text: str, offset: int, limit: int) -> tuple[int, list[str]]:
    """(how many names match `text`, the matching names of the page)."""
    needle = text.strip().lower()
    matching = sorted(name for name in names if needle in name.lower())
    return len(matching), matching[offset:offset + limit]


def under_replicated(info: PartitionInfo) -> bool:
    return len(info.isr) < len(info.replicas)


def partition_row(info: PartitionInfo) -> dict[str, Any]:
    return {"partition": info.partition, "leader": info.leader, "replicas": list(info.replicas),
            "isr": list(info.isr), "under_replicated": under_replicated(info), "offline": not info.has_leader}


def _offset(result: object) -> int | None:
    offset = getattr(result, "offset", None)
    return offset if isinstance(offset, int) and offset >= 0 else None


def topic_row(topic: TopicDescription, earliest: Mapping[TopicPartition, object],
              latest: Mapping[TopicPartition, object]) -> dict[str, Any]:
    messages: int | None = 0
    for info in topic.partitions:
        start, end = _offset(earliest.get(info.topic_partition)), _offset(latest.get(info.topic_partition))
        messages = None if messages is None or start is None or end is None else messages + end - start
    return {"name": topic.name, "partitions": len(topic.partitions), "replication_factor": topic.replication_factor,
            "under_replicated": sum(under_replicated(info) for info in topic.partitions),
            "offline": sum(not info.has_leader for info in topic.partitions), "messages": messages}


def group_view(group: ConsumerGroupDescription, offsets: Sequence[PartitionOffsets]) -> dict[str, Any]:
    members = [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(m.assignment)]}
               for m in sorted(group.members, key=lambda m: m.member_id)]
    lags = [{"topic": row.partition.topic, "partition": row.partition.partition,
             "current_offset": row.current_offset, "log_end_offset": row.log_end_offset, "lag": row.lag,
             "consumer_id": row.member.member_id if row.member else None,
             "client_id": row.member.client_id if row.member else None} for row in offsets]
    return {"group_id": group.group_id, "state": group.state, "members": members, "lags": lags,
            "total_lag": sum(row.lag for row in offsets if row.lag is not None)}


def cluster_health(live_broker_ids: Iterable[int], topics: Iterable[TopicDescription]) -> dict[str, Any]:
    live = set(live_broker_ids)
    partitions = [info for topic in topics for info in topic.partitions]
    named = {replica for info in partitions for replica in info.replicas}
    return {"offline_broker_ids": sorted(named - live), "partitions": len(partitions),
            "under_replicated_partitions": sum(under_replicated(info) for info in partitions),
            "offline_partitions": sum(not info.has_leader for info in partitions)}
