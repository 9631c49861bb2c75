"""One rebalance attempt's ZooKeeper work, as Kafka 0.8's ZKRebalancerListener: deciding which
partitions this member's threads own, and claiming them.

`plan_assignment` reads every member's registration under `/consumers/<group>/ids`, the topics
under `/brokers/topics` (for wildcard subscriptions) and the subscribed topics' partitions from
`/brokers/topics/<topic>`, assigns them over the group's sorted thread ids with the configured
strategy (`assignment`), and returns the group's assignment and this member's share. The reads
set the connector's watches (members, topic list, each subscribed topic's assignment), so any
change to them triggers the next rebalance.

`claim_ownership` creates `/consumers/<group>/owners/<topic>/<partition>` for each partition
(ephemeral, the thread id as value). If any is still owned by another thread, the ones just
created are deleted again and the attempt fails, to be retried after `rebalance.backoff.ms`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from services.clients.zk_consumer.assignment import RANGE, assign, group_threads_per_topic
from services.clients.zk_consumer.topic_count import ConsumerThreadId, TopicCount, topic_count_from_registration
from services.common.topic_partition import TopicPartition
from services.common.zk import OdradekZkClient
from services.common.zk.access import Watch

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RebalanceWatches:
    members: Watch
    topic_data: Watch
    topic_list: Watch | None


@dataclass(frozen=True)
class AssignmentPlan:
    mine: dict[TopicPartition, ConsumerThreadId]
    group: dict[TopicPartition, ConsumerThreadId]
    partition_counts: dict[str, int]


def plan_assignment(zk: OdradekZkClient, group: str, own: TopicCount, watches: RebalanceWatches,
                    exclude_internal_topics: bool = True, strategy: str = RANGE) -> AssignmentPlan:
    all_topics = zk.get_all_topics(watches.topic_list)
    my_threads = own.thread_ids_per_topic(all_topics)
    members = zk.get_legacy_consumers(group, watches.members)
    counts = []
    for member_id, registration in members.items():
        if member_id == own.consumer_id:
            counts.append(own)
            continue
        try:
            counts.append(topic_count_from_registration(member_id, registration, exclude_internal_topics))
        except ValueError as exc:
            logger.warning("ignoring a member of group %s: %s", group, exc)
    if own.consumer_id not in members:
        counts.append(own)
    group_threads = group_threads_per_topic(counts, all_topics)
    partitions: dict[str, list[int]] = {}
    for topic in my_threads:
        found = zk.get_topic_assignment(topic, watches.topic_data)
        partitions[topic] = sorted(found.value.partitions) if found is not None else []
    owners = assign(strategy, group_threads, partitions)
    mine = {tp: thread for tp, thread in owners.items() if thread.consumer_id == own.consumer_id}
    return AssignmentPlan(mine, owners, {t: len(p) for t, p in partitions.items()})


def claim_ownership(zk: OdradekZkClient, group: str, mine: dict[TopicPartition, ConsumerThreadId]) -> bool:
    claimed: list[TopicPartition] = []
    for tp, thread in sorted(mine.items()):
        if zk.claim_partition(group, tp, str(thread)) or zk.get_partition_owner(group, tp) == str(thread):
            claimed.append(tp)
            continue
        logger.info("%s is still owned by %s; %s waits for it", tp, zk.get_partition_owner(group, tp), thread)
        for done in claimed:
            zk.release_partition(group, done)
        return False
    return True
