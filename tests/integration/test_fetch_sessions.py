"""Replication in incremental fetch sessions, with real broker processes: followers keep every
acknowledged acks=all record through leader kills, controlled shutdowns and restarts (their
sessions end with the leader and open again), and through a session cache of one slot that three
followers of each leader compete for; the brokers count their sessions and fetches under Kafka's
FetchSessionCache names. A consumer's session with a broker survives a partition's leader moving to
that broker: the partition joins the session, and the consumer reads every record once."""

from __future__ import annotations

from services.clients.consumer import Consumer
from services.common.topic_partition import TopicPartition
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, SESSION_TIMEOUT_S, create_topic, produce_values
from tests.integration.test_metrics import scrape, values
from tests.integration.test_replication import (
    LAG_TIME_MAX_MS,
    admin_for,
    all_brokers,
    client_for,
    kill_leader_round,
    restart_broker,
    run_steady_load,
    wait_for_full_isr,
    wait_for_metadata,
)

CACHE = "odradek_fetch_session_cache_"
IDLE_FETCHES = 6  # each leader's, once the load is over


def session_figures(cluster, name: str) -> dict[str, float]:
    samples = scrape(cluster, name)
    return {metric: sum(values(samples, CACHE + metric)) for metric in (
        "num_incremental_fetch_sessions", "num_incremental_fetch_partitions_cached",
        "incremental_fetch_session_evictions_total", "full_fetches_total", "incremental_fetches_total")}


def test_followers_in_sessions_keep_every_acked_record_through_leader_changes_and_restarts(cluster_factory):
    cluster = cluster_factory(broker_config={"replica.lag.time.max.ms": LAG_TIME_MAX_MS})
    topic, partitions = "sessions", [0, 1, 2]

    kill_leader = kill_leader_round(cluster, topic, partitions)

    def restart_each(number: int) -> None:  # controlled shutdowns: leadership moves, then returns
        for broker in all_brokers(cluster):
            cluster.stop_service(cluster.broker_name(broker))
            restart_broker(cluster, broker)
            wait_for_full_isr(cluster, topic, 60)

    run_steady_load(cluster, topic, partitions, [kill_leader, restart_each, kill_leader, kill_leader])
    leaders = {info.leader for info in wait_for_full_isr(cluster, topic, 60).values()}
    before = {broker: session_figures(cluster, cluster.broker_name(broker)) for broker in leaders}

    def idle_fetches() -> dict | None:  # a few more fetches of each leader's followers, nothing produced
        now = {broker: session_figures(cluster, cluster.broker_name(broker)) for broker in leaders}
        grown = all(now[b]["incremental_fetches_total"] >= before[b]["incremental_fetches_total"] + IDLE_FETCHES
                    for b in leaders)
        return now if grown else None

    after = wait_until(idle_fetches, 60, 0.2, message="incremental fetches of the idle followers")
    print(before, after)
    # every leader serves its followers in sessions; once idle, every fetch is an incremental one
    for broker, figure in after.items():
        assert figure["num_incremental_fetch_sessions"] >= 1, (broker, figure)
        assert figure["full_fetches_total"] == before[broker]["full_fetches_total"], (broker, before[broker], figure)


def test_a_session_cache_of_one_slot_serves_three_followers_of_each_leader(cluster_factory):
    cluster = cluster_factory(brokers=4, broker_config={"replica.lag.time.max.ms": LAG_TIME_MAX_MS,
                                                        "max.incremental.fetch.session.cache.slots": 1})
    topic, partitions = "one-slot", [0, 1, 2, 3]

    def restart_one(number: int) -> None:
        broker = all_brokers(cluster)[number % 4]
        cluster.stop_service(cluster.broker_name(broker))
        restart_broker(cluster, broker)
        wait_for_full_isr(cluster, topic, 60)

    run_steady_load(cluster, topic, partitions, [restart_one] * 4, replication=4)
    figures = {name: session_figures(cluster, name) for name in cluster.broker_names}
    print(figures)
    for name, figure in figures.items():
        assert figure["num_incremental_fetch_sessions"] <= 1, (name, figure)
    # the followers left without a slot fetch in full, and still keep up
    assert sum(f["full_fetches_total"] for f in figures.values()) > 0
    wait_until(lambda: wait_for_full_isr(cluster, topic, 60), 60, message="every ISR full at the end")


def consumer_sessions(consumer: Consumer) -> dict[int, int]:
    """The consumer's fetch session id with each broker (0: none)."""
    return {broker: handler.session_id for broker, handler in consumer._fetcher._sessions.items()}


def test_a_consumers_session_survives_a_leader_moving_to_its_broker(cluster_factory):
    cluster = cluster_factory(brokers=2, broker_config={"replica.lag.time.max.ms": LAG_TIME_MAX_MS})
    topic = "consumed"
    with admin_for(cluster) as admin:
        create_topic(admin, topic, 2, 2)
    view = wait_for_full_isr(cluster, topic, 30)
    mover = view[0].leader
    stayer = next(b for b in all_brokers(cluster) if b != mover)
    with client_for(cluster) as writer:
        sent = {0: [b"a%d" % i for i in range(50)], 1: [b"b%d" % i for i in range(50)]}
        for partition, values in sent.items():
            produce_values(writer, topic, partition, values)
        received: dict[int, list[bytes]] = {0: [], 1: []}
        with Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                      **CLIENT_CONFIG) as consumer:
            consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])

            def poll_until(count: int) -> bool:
                for record in consumer.poll(timeout_ms=200):
                    received[record.partition].append(record.value)
                return sum(map(len, received.values())) >= count

            wait_until(lambda: poll_until(100), 30, 0, message="the first 100 records")
            sessions = consumer_sessions(consumer)
            if view[1].leader == stayer:
                assert sessions.get(stayer, 0) > 0, sessions
            # partition 0's leader shuts down: its leadership moves to the other broker
            cluster.stop_service(cluster.broker_name(mover))
            wait_for_metadata(cluster, topic, [stayer], lambda v: v[0].leader == stayer, SESSION_TIMEOUT_S + 20,
                              f"{topic}-0 led by broker {stayer}")
            more = {0: [b"c%d" % i for i in range(50)], 1: [b"d%d" % i for i in range(50)]}
            for partition, values in more.items():
                produce_values(writer, topic, partition, values)
            wait_until(lambda: poll_until(200), 60, 0, message="the records written after the move")
            after = consumer_sessions(consumer)
            if sessions.get(stayer, 0) > 0:
                assert after[stayer] == sessions[stayer], (sessions, after)
            restart_broker(cluster, mover)
    assert received == {p: sent[p] + more[p] for p in (0, 1)}
