"""Which node a request goes to: any node, or each partition's leader (one call per broker,
retrying what failed because metadata was stale).

`call_any_node(metadata, pool, method, request, deadline)` sends one BrokerService call to the
least-loaded node (see `Metadata.least_loaded_nodes`), then the next, until one answers.

`group_by_leader(cluster, partitions)` splits partitions into one list per leader node plus the
ones that cannot be routed (unknown topic or partition, no leader). `send_to_leaders` runs the
whole loop for Produce, Fetch and ListOffsets: refresh metadata when due, send one request per
leader (all at once), keep each partition's result, and retry the partitions whose error the
caller calls retriable (after `retry.backoff.ms` and a metadata update) until the deadline. When
the deadline passes, each partition keeps the last result it got, error code included. Reads that
ask with `unknown_is_final` (ListOffsets) stop at UNKNOWN_TOPIC_OR_PARTITION once metadata fetched
during the call says the partition does not exist, as Kafka's admin client answers at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from services.clients.cluster import Cluster, Node
from services.clients.transport.channels import BROKER, ChannelPool
from services.clients.transport.retry import Deadline
from services.common.errors import Errors, KafkaError, error_for_code
from services.common.topic_partition import TopicPartition

if TYPE_CHECKING:  # metadata refreshes through this package: no import at run time
    from services.clients.metadata import Metadata

# Builds the request for the partitions one leader gets.
BuildRequest = Callable[[list[TopicPartition]], Any]
# Reads a response into {partition: (error_code, result)}; raises KafkaError for a whole-response error.
ParseResponse = Callable[[Any], Mapping[TopicPartition, tuple[int, Any]]]
# The result recorded for a partition whose call failed as a whole (or could not be routed).
FailureResult = Callable[[TopicPartition, KafkaError], Any]


def call_any_node(metadata: Metadata, pool: ChannelPool, method: str, request: Any, deadline: Deadline) -> Any:
    """Sends one BrokerService call to the least-loaded node, then the next, until one answers.

    Each try is bounded by `request.timeout.ms`, so a hung node does not use up the whole
    deadline. A Metadata answer listing no brokers counts as a failure of that node. Raises the last
    node's KafkaError when none answers before `deadline`.
    """
    last_error: KafkaError | None = None
    for node in metadata.least_loaded_nodes(pool):
        if deadline.expired:
            break
        try:
            timeout_ms = max(1, min(pool.request_timeout_ms, deadline.remaining_ms()))
            response = pool.call(node.address, BROKER, method, request, timeout_ms)
        except KafkaError as e:
            last_error = e
            continue
        if method == "Metadata" and not response.brokers:
            last_error = KafkaError(f"{node.address} answered metadata without brokers",
                                    error=Errors.LEADER_NOT_AVAILABLE)
            continue
        return response
    raise last_error or KafkaError(f"no node answered {method} in time", error=Errors.REQUEST_TIMED_OUT)


def group_by_leader(
    cluster: Cluster, partitions: Iterable[TopicPartition]
) -> tuple[dict[Node, list[TopicPartition]], dict[TopicPartition, KafkaError]]:
    """({leader: [partitions in the given order]}, {unroutable partition: why})."""
    groups: dict[Node, list[TopicPartition]] = {}
    unroutable: dict[TopicPartition, KafkaError] = {}
    for tp in partitions:
        leader = cluster.leader_for(tp.topic, tp.partition)
        if leader is None:
            unroutable[tp] = unroutable_error(cluster, tp)
        else:
            groups.setdefault(leader, []).append(tp)
    return groups, unroutable


def unroutable_error(cluster: Cluster, tp: TopicPartition) -> KafkaError:
    """Why `tp` has no leader to send to, as Kafka would name it."""
    topic_error = cluster.topic_errors.get(tp.topic, Errors.NONE)
    if topic_error != Errors.NONE:
        return KafkaError.from_code(topic_error, f"metadata for topic {tp.topic}: "
                                                 f"{error_for_code(topic_error).description}")
    info = cluster.partition(tp.topic, tp.partition)
    if tp.topic not in cluster.topics or info is None:
        return KafkaError(f"{tp} is not in the cluster metadata", error=Errors.UNKNOWN_TOPIC_OR_PARTITION)
    if info.has_leader:
        return KafkaError(f"leader {info.leader} of {tp} is not a live broker",
                          error=Errors.LEADER_NOT_AVAILABLE)
    return KafkaError(f"{tp} has no leader", error=Errors.LEADER_NOT_AVAILABLE)


def send_to_leaders(
    metadata: Metadata,
    pool: ChannelPool,
    partitions: Iterable[TopicPartition],
    *,
    method: str,
    build_request: BuildRequest,
    parse_response: ParseResponse,
    failure_result: FailureResult,
    deadline: Deadline,
    backoff_ms: float,
    call_timeout_ms: int,
    retry_code: Callable[[int], bool],
    retry_call_error: Callable[[KafkaError], bool],
    unknown_is_final: bool = False,
) -> dict[TopicPartition, Any]:
    """Sends `method` for every partition to its leader; see the module docstring.

    `retry_code(code)` says whether a per-partition error is worth another try (with fresh
    metadata); `retry_call_error(error)` says the same for a call that failed as a whole.
    Partitions that cannot be routed are retried until the deadline, except, with
    `unknown_is_final`, those that metadata fetched since the call began says do not exist.
    """
    pending = list(dict.fromkeys(partitions))
    results: dict[TopicPartition, Any] = {}
    start_version = metadata.version
    while pending:
        retry = _send_round(metadata, pool, pending, results, method, build_request, parse_response,
                            failure_result, deadline, call_timeout_ms, retry_code, retry_call_error)
        if unknown_is_final and metadata.version > start_version:
            retry = [tp for tp in retry if not _known_not_to_exist(metadata.cluster, tp)]
        pending = retry
        if not pending or deadline.expired:
            break
        metadata.request_update()
        deadline.clock.sleep_ms(min(backoff_ms, deadline.remaining_ms()))
        if deadline.expired:
            break
    return results


def _known_not_to_exist(cluster: Cluster, tp: TopicPartition) -> bool:
    """The metadata describes no such partition: its topic is unknown, or has fewer partitions."""
    if cluster.topic_errors.get(tp.topic, Errors.NONE) == Errors.UNKNOWN_TOPIC_OR_PARTITION:
        return True
    return tp.topic in cluster.topics and cluster.partition(tp.topic, tp.partition) is None


def _send_round(metadata, pool, pending, results, method, build_request, parse_response, failure_result,
                deadline, call_timeout_ms, retry_code, retry_call_error) -> list[TopicPartition]:
    metadata.add_topics(*{tp.topic for tp in pending})  # again: an unknown topic may have left the set
    try:
        cluster = metadata.maybe_refresh(pool, deadline.remaining_ms())
    except KafkaError as error:  # keep what an earlier round learned; it says more than this
        for tp in pending:
            results.setdefault(tp, failure_result(tp, error))
        return list(pending) if error.retriable else []
    groups, unroutable = group_by_leader(cluster, pending)
    retry = []
    for tp, error in unroutable.items():
        results[tp] = failure_result(tp, error)
        retry.append(tp)
    leaders = list(groups)
    timeout_ms = max(1, min(call_timeout_ms, deadline.remaining_ms()))
    calls = [(leader.address, BROKER, method, build_request(groups[leader]), timeout_ms)
             for leader in leaders]
    for leader, response in zip(leaders, pool.call_many(calls), strict=True):
        tps = groups[leader]
        if isinstance(response, KafkaError):
            for tp in tps:
                results[tp] = failure_result(tp, response)
            if retry_call_error(response):
                retry.extend(tps)
            continue
        try:
            parsed = parse_response(response)
        except KafkaError as error:  # a whole-response error code
            for tp in tps:
                results[tp] = failure_result(tp, error)
            if retry_call_error(error):
                retry.extend(tps)
            continue
        for tp in tps:
            if tp not in parsed:
                missing = KafkaError(f"{leader.address} returned no result for {tp}",
                                     error=Errors.UNKNOWN_SERVER_ERROR)
                results[tp] = failure_result(tp, missing)
                continue
            code, result = parsed[tp]
            results[tp] = result
            if code != Errors.NONE and retry_code(code):
                retry.append(tp)
    return retry
