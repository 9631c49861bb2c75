"""Replication in incremental fetch sessions, with real broker processes: followers keep every
acknowledged acks=all record through leader kills, controlled shutdowns and restarts (their
sessions end with the leader and open again), and through a session cache of one slot that three
followers of each leader compete for; the brokers count their sessions and fetches under Kafka's
FetchSessionCache names."""

from __future__ import annotations

import threading
import warnings

from services.devcluster.proc import wait_until
from tests.integration.conftest import SESSION_TIMEOUT_S, create_topic
from tests.integration.test_metrics import scrape, values
from tests.integration.test_replication import (
    LAG_TIME_MAX_MS,
    MIN_ISR_CONFIG,
    SteadyProducer,
    TailingConsumer,
    _assert_running,
    _check_partition,
    _wait_for_progress,
    admin_for,
    all_brokers,
    client_for,
    init_producer_id,
    read_partition,
    restart_broker,
    wait_for_full_isr,
    wait_for_metadata,
)

CACHE = "odradek_fetch_session_cache_"


def session_figures(cluster, name: str) -> dict[str, float]:
    samples = scrape(cluster, name)
    return {metric: sum(values(samples, CACHE + metric)) for metric in (
        "num_incremental_fetch_sessions", "num_incremental_fetch_partitions_cached",
        "incremental_fetch_session_evictions_total", "full_fetches_total", "incremental_fetches_total")}


def run_steady_load(cluster, topic: str, partitions: list[int], rounds, config=MIN_ISR_CONFIG,
                    replication: int = 3) -> None:
    """Producers and a tailing consumer on `partitions` while `rounds` (callables taking the
    round number) disturb the cluster; then every acknowledged record is read back once."""
    identity = init_producer_id(cluster)
    if not identity.idempotent:
        warnings.warn("no producer id from the brokers: duplicates of retried batches are allowed", stacklevel=1)
    stop = threading.Event()
    with admin_for(cluster) as admin:
        create_topic(admin, topic, len(partitions), replication, configs=config)
    wait_for_full_isr(cluster, topic, 30)
    producers = [SteadyProducer(cluster, topic, p, identity, stop) for p in partitions]
    consumer = TailingConsumer(cluster, topic, partitions, stop)
    for thread in (*producers, consumer):
        thread.start()
    try:
        for number, disturb in enumerate(rounds):
            _wait_for_progress(producers, consumer)
            disturb(number)
        _wait_for_progress(producers, consumer)
    finally:
        stop.set()
        for thread in (*producers, consumer):
            thread.join(30)
    _assert_running(producers, consumer)
    with client_for(cluster) as client:
        for producer in producers:
            log = read_partition(client, topic, producer.partition)
            _check_partition(log, producer, consumer.seen[producer.partition])


def test_followers_in_sessions_keep_every_acked_record_through_leader_changes_and_restarts(cluster_factory):
    cluster = cluster_factory(broker_config={"replica.lag.time.max.ms": LAG_TIME_MAX_MS})
    topic, partitions = "sessions", [0, 1, 2]

    def kill_leader(number: int) -> None:
        partition = partitions[number % len(partitions)]
        victim = wait_for_full_isr(cluster, topic, 60)[partition].leader
        cluster.kill_service(cluster.broker_name(victim))
        survivors = [b for b in all_brokers(cluster) if b != victim]
        wait_for_metadata(cluster, topic, survivors, lambda v, p=partition, dead=victim: v[p].leader not in (-1, dead),
                          SESSION_TIMEOUT_S + 20, f"a new leader of {topic}-{partition}")
        restart_broker(cluster, victim)
        wait_for_full_isr(cluster, topic, 60)

    def restart_each(number: int) -> None:  # controlled shutdowns: leadership moves, then returns
        for broker in all_brokers(cluster):
            restart_broker(cluster, broker)
            wait_for_full_isr(cluster, topic, 60)

    run_steady_load(cluster, topic, partitions, [kill_leader, restart_each, kill_leader, kill_leader])
    figures = {name: session_figures(cluster, name) for name in cluster.broker_names}
    print(figures)
    # every leader serves its followers in sessions, and most fetches are incremental
    for name, figure in figures.items():
        assert figure["num_incremental_fetch_sessions"] >= 1, (name, figure)
        assert figure["incremental_fetches_total"] > figure["full_fetches_total"], (name, figure)


def test_a_session_cache_of_one_slot_serves_three_followers_of_each_leader(cluster_factory):
    cluster = cluster_factory(brokers=4, broker_config={"replica.lag.time.max.ms": LAG_TIME_MAX_MS,
                                                        "max.incremental.fetch.session.cache.slots": 1})
    topic, partitions = "one-slot", [0, 1, 2, 3]

    def restart_one(number: int) -> None:
        restart_broker(cluster, all_brokers(cluster)[number % 4])
        wait_for_full_isr(cluster, topic, 60)

    run_steady_load(cluster, topic, partitions, [restart_one] * 4, replication=4)
    figures = {name: session_figures(cluster, name) for name in cluster.broker_names}
    print(figures)
    for name, figure in figures.items():
        assert figure["num_incremental_fetch_sessions"] <= 1, (name, figure)
    # the followers left without a slot fetch in full, and still keep up
    assert sum(f["full_fetches_total"] for f in figures.values()) > 0
    wait_until(lambda: wait_for_full_isr(cluster, topic, 60), 60, message="every ISR full at the end")
