"""`GET /v3/clusters/{cluster_id}/topics/{topic_name}/offsets?isolation_level=&timestamp=`: every
partition's offsets in one answer, for Spark's planning (and anyone sizing a read).

Answers `{"topic": t, "partitions": [{"partition", "earliest_offset", "latest_offset",
"high_watermark", "timestamp_offset"}]}` in partition order: `latest_offset` is what Kafka's
ListOffsets calls latest at the isolation level (the high watermark, or the last stable offset under
read_committed); with `timestamp` (ms), `timestamp_offset` is the first offset whose record
timestamp is at or after it (null when there is none), as ListOffsets by timestamp answers. The
offsets are asked of the partitions' leaders by the process's Admin, one request per leader and
kind of offset. An unknown topic is 404/40403.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from services.common.shared_types import IsolationLevel
from services.common.topic_partition import TopicPartition
from services.gateway.routes.ranges import ReadIsolation
from services.gateway.routes.v3_resources import V3_ERRORS, KnownCluster, cluster_call, describe_topic
from services.gateway.schemas import INT64_JSON_MAX
from services.gateway.state import GatewayState, State

router = APIRouter(tags=["v3 range reads"], responses=V3_ERRORS)

MAX_TIMESTAMP_MS = INT64_JSON_MAX


class PartitionOffsets(BaseModel):
    partition: int
    earliest_offset: int
    latest_offset: int = Field(description="the high watermark, or the last stable offset under read_committed")
    high_watermark: int
    timestamp_offset: int | None = Field(
        None, description="with `timestamp`: the first offset whose timestamp is at or after it, null if none")


class TopicOffsets(BaseModel):
    topic: str
    partitions: list[PartitionOffsets]


@router.get("/v3/clusters/{cluster_id}/topics/{topic_name}/offsets", response_model=TopicOffsets,
            summary="Every partition's earliest, latest and high-watermark offsets (and the offset of a "
                    "timestamp)")
async def topic_offsets(state: State, _cluster: KnownCluster, topic_name: str,
                        isolation_level: ReadIsolation = ReadIsolation.READ_UNCOMMITTED,
                        timestamp: int | None = Query(None, ge=0, le=MAX_TIMESTAMP_MS,
                                                      description="A record timestamp in ms.")) -> JSONResponse:
    description = await describe_topic(state, topic_name)
    partitions = sorted(info.partition for info in description.partitions)
    body = await offsets_of(state, topic_name, partitions, isolation_level, timestamp)
    return JSONResponse(body)


async def offsets_of(state: GatewayState, topic: str, partitions: list[int], isolation_level: ReadIsolation,
                     timestamp: int | None) -> dict[str, Any]:
    tps = [TopicPartition(topic, partition) for partition in partitions]

    async def offsets(spec: str | int, level: int = IsolationLevel.READ_UNCOMMITTED) -> dict[TopicPartition, Any]:
        return await cluster_call(state, state.admin.list_offsets, dict.fromkeys(tps, spec), isolation_level=level)

    earliest = await offsets("earliest")
    high_watermarks = await offsets("latest")
    committed = isolation_level is ReadIsolation.READ_COMMITTED
    latest = await offsets("latest", IsolationLevel.READ_COMMITTED) if committed else high_watermarks
    found = await offsets(timestamp) if timestamp is not None else {}
    rows = []
    for tp in tps:
        at_timestamp = found[tp].offset if tp in found else None
        rows.append({"partition": tp.partition, "earliest_offset": earliest[tp].offset,
                     "latest_offset": latest[tp].offset, "high_watermark": high_watermarks[tp].offset,
                     "timestamp_offset": at_timestamp if at_timestamp is None or at_timestamp >= 0 else None})
    return {"topic": topic, "partitions": rows}
