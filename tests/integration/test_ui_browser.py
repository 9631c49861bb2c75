"""The web console in a real browser (Debian's Chromium driven by Playwright) against a running
cluster of three brokers and a gateway, with a producer writing and a consumer group falling behind.

The broker, topic and group tables are checked against the Admin API (the groups' lag against the
rows `odradek consumer-groups --describe` computes), the throughput chart must draw new points,
a topic's latest records (and the page before them) must be what was produced, text or hex, and a
stopped broker must show offline with the partitions it replicated under-replicated. A
screenshot of each page is saved under var/test-artifacts/ui/ (the path is printed). Skipped when
Playwright or /usr/bin/chromium is missing (`make system-deps` installs Chromium).
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.clients.admin import Admin
from services.clients.cli_groups import describe_partition_offsets
from services.clients.consumer import Consumer
from services.clients.lowlevel import LowLevelClient
from services.common.records import build_batch
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.browser_support import chromium, playwright_api
from tests.integration.conftest import CLIENT_CONFIG, SESSION_TIMEOUT_MS, create_topic, gateway_module_cluster

pytestmark = pytest.mark.integration

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts" / "ui"
WAIT_MS = 30000
ORDERS, BLOBS, GROUP = "orders", "blobs", "billing"
BINARY_VALUE = bytes([0xFF, 0x00, 0xC3, 0x28])


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "ui", brokers=3,
                                gateway_config={"ui.sample.interval.ms": 1000}) as local:
        yield local


class Traffic:
    """A producer thread appending batches of "order-<n>" to every partition of a topic; `values`
    holds what each partition got, in offset order."""

    def __init__(self, writer: LowLevelClient, topic: str, partitions: int) -> None:
        self.writer, self.topic = writer, topic
        self.values: dict[int, list[str]] = {p: [] for p in range(partitions)}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="ui-test-producer", daemon=True)

    def _run(self) -> None:
        counter = 0
        while not self.stop.is_set():
            for partition, written in self.values.items():
                values = [f"order-{counter + i}" for i in range(5)]
                keys = [f"customer-{(counter + i) % 7}".encode() for i in range(5)]
                result = self.writer.produce(self.topic, partition, build_batch([v.encode() for v in values], keys),
                                             acks=-1, timeout_ms=15000)
                assert result.base_offset == len(written), result
                written.extend(values)
                counter += 5
            self.stop.wait(0.05)

    def __enter__(self) -> Traffic:
        self.thread.start()
        return self

    def halt(self) -> None:
        self.stop.set()
        self.thread.join(30)

    def __exit__(self, *exc) -> None:
        self.halt()


@contextlib.contextmanager
def lagging_member(cluster: LocalCluster, topic: str, wanted: int) -> Iterator[Consumer]:
    """A member of GROUP that reads and commits `wanted` records, then stops polling (its heartbeat
    thread keeps it in the group), so the group falls behind the producer."""
    consumer = Consumer(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG, group_id=GROUP,
                        client_id="billing-worker", auto_offset_reset="earliest", enable_auto_commit=False,
                        session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=500, fetch_max_wait_ms=100)
    try:
        consumer.subscribe([topic])
        seen: list[object] = []
        wait_until(lambda: seen.extend(consumer.poll(timeout_ms=200)) or len(seen) >= wanted, 30,
                   message="the group to read its first records")
        consumer.commit_sync()
        yield consumer
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as launched:
        yield launched


def screenshot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")


def cell_texts(locator) -> list[str]:
    return [text.strip() for text in locator.all_inner_texts()]


def check_overview(page, admin: Admin) -> None:
    """The brokers as the admin sees them, and a throughput chart that draws new points."""
    expect = playwright_api.expect
    described = admin.describe_cluster()
    expect(page.locator("#brokers tbody tr")).to_have_count(len(described.nodes), timeout=WAIT_MS)
    for node in described.nodes:
        row = page.locator(f'#brokers tr[data-broker-id="{node.node_id}"]')
        expect(row).to_contain_text(f"{node.host}:{node.port}")
        expect(row.locator('[data-role="status"]')).to_contain_text("alive")
    controller = described.controller
    expect(page.locator("#controller")).to_contain_text(f"{controller.node_id}{controller.host}:{controller.port}")
    expect(page.locator("#cluster-id")).to_contain_text(described.cluster_id)
    page.wait_for_function("() => Number(document.querySelector('#throughput-chart svg')?.dataset.points) >= 2",
                           timeout=WAIT_MS)
    first = page.locator("#throughput-chart svg").get_attribute("data-points")
    page.wait_for_function(f"() => document.querySelector('#throughput-chart svg').dataset.points !== '{first}'",
                           timeout=WAIT_MS)
    expect(page.locator('#throughput-chart path[data-series="all topics"]')).to_have_attribute(
        "d", re.compile(r"^M.+L"))
    expect(page.locator(f'#lag-chart path[data-series="{GROUP}"]')).to_have_count(1, timeout=WAIT_MS)


def check_topics(page) -> None:
    expect = playwright_api.expect
    page.click("nav >> text=Topics")
    for topic, partitions, replication in ((ORDERS, 3, 3), (BLOBS, 1, 2)):
        row = page.locator(f'#topics tr[data-topic="{topic}"]')
        expect(row.locator('[data-col="partitions"]')).to_have_text(str(partitions), timeout=WAIT_MS)
        expect(row.locator('[data-col="replication_factor"]')).to_have_text(str(replication))
        expect(row.locator('[data-col="under_replicated"]')).to_have_text("0")
    expect(page.locator(f'#topics tr[data-topic="{BLOBS}"] [data-col="messages"]')).to_have_text("2")
    screenshot(page, "topics")
    page.fill('input[type="search"]', "blo")
    expect(page.locator("#topics tbody tr")).to_have_count(1, timeout=WAIT_MS)
    expect(page.locator("#topics tbody tr")).to_have_attribute("data-topic", BLOBS)


def check_topic_page(page, base: str, admin: Admin, produced: dict[int, list[str]]) -> None:
    """Partitions as the admin describes them, the latest records, the page before, another partition."""
    expect = playwright_api.expect
    page.goto(f"{base}/ui/#/topic/{ORDERS}")
    for info in admin.describe_topics([ORDERS])[ORDERS].partitions:
        row = page.locator(f'#partitions tr[data-partition="{info.partition}"]')
        expect(row.locator('[data-col="leader"]')).to_have_text(str(info.leader), timeout=WAIT_MS)
        expect(row.locator('[data-col="replicas"]')).to_have_text(", ".join(map(str, info.replicas)))
        expect(row.locator('[data-col="isr"]')).to_contain_text(", ".join(map(str, info.isr)))
        expect(row.locator('[data-col="end"]')).to_have_text(f"{len(produced[info.partition]):,}")
    end = len(produced[0])
    rows = page.locator("#records-table tbody tr")
    expect(rows).to_have_count(20, timeout=WAIT_MS)
    expect(rows.first).to_have_attribute("data-offset", str(end - 20))
    assert cell_texts(page.locator('#records-table [data-col="value"]')) == produced[0][-20:]
    screenshot(page, "topic")
    page.click("#records-older")
    expect(rows.first).to_have_attribute("data-offset", str(end - 40), timeout=WAIT_MS)
    assert cell_texts(page.locator('#records-table [data-col="value"]')) == produced[0][-40:-20]
    page.select_option("#record-partition", "2")
    page.fill("#record-offset", "5")
    page.click("#records-load")
    expect(rows.first).to_have_attribute("data-offset", "5", timeout=WAIT_MS)
    assert cell_texts(page.locator('#records-table [data-col="value"]')) == produced[2][5:25]

    page.goto(f"{base}/ui/#/topic/{BLOBS}")
    expect(rows).to_have_count(2, timeout=WAIT_MS)
    values = page.locator('#records-table [data-col="value"]')
    expect(values.nth(0)).to_have_text("plain text")
    expect(values.nth(1)).to_have_attribute("data-kind", "hex")
    expect(values.nth(1)).to_contain_text(BINARY_VALUE.hex(" "))
    expect(page.locator('#records-table [data-col="headers"]').nth(0)).to_have_text("trace: abc")
    screenshot(page, "topic-binary")


def check_groups(page, base: str, admin: Admin) -> None:
    """State, members and lag as `odradek consumer-groups --describe` computes them."""
    expect = playwright_api.expect
    description = admin.describe_consumer_groups([GROUP])[GROUP]
    expected = describe_partition_offsets(admin, GROUP, description)
    assert any(row.lag for row in expected), expected
    page.goto(f"{base}/ui/#/groups")
    group = page.locator(f'[data-group="{GROUP}"]')
    expect(group).to_contain_text(description.state, timeout=WAIT_MS)
    (member,) = description.members
    member_row = group.locator(f'tr[data-member="{member.member_id}"]')
    expect(member_row.locator('[data-col="client_id"]')).to_have_text("billing-worker")
    expect(member_row).to_contain_text(member.host)
    expect(member_row.locator('[data-col="assignment"]')).to_have_text(
        ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(member.assignment)))
    for row in expected:
        lag = group.locator(f'tr[data-lag="{row.partition.topic}-{row.partition.partition}"] [data-col="lag"]')
        expect(lag).to_have_text("—" if row.lag is None else f"{row.lag:,}")
    total = sum(row.lag for row in expected if row.lag is not None)
    expect(group.locator('[data-role="total-lag"]')).to_have_text(f"{total:,}")
    screenshot(page, "groups")


def check_a_stopped_broker(page, base: str, admin: Admin, cluster: LocalCluster) -> None:
    """A broker stopped: listed offline, and the partitions it replicated marked under-replicated."""
    expect = playwright_api.expect
    victim = 3
    cluster.stop_service(cluster.broker_name(victim))

    def shrunk() -> list[int]:
        partitions = admin.describe_topics([ORDERS])[ORDERS].partitions
        return [] if any(victim in info.isr for info in partitions) else [
            info.partition for info in partitions if len(info.isr) < len(info.replicas)]

    under_replicated = wait_until(shrunk, 30, message="the stopped broker to leave every ISR")
    wait_until(lambda: victim not in {node.node_id for node in admin.describe_cluster().nodes}, 30,
               message="the stopped broker to leave the cluster")
    page.goto(f"{base}/ui/")
    expect(page.locator(f'#brokers tr[data-broker-id="{victim}"] [data-role="status"]')).to_have_text(
        "offline", timeout=WAIT_MS)
    page.goto(f"{base}/ui/#/topics")
    expect(page.locator(f'#topics tr[data-topic="{ORDERS}"] [data-col="under_replicated"]')).to_have_text(
        str(len(under_replicated)), timeout=WAIT_MS)
    page.goto(f"{base}/ui/#/topic/{ORDERS}")
    expect(page.locator("#partitions tr.urp")).to_have_count(len(under_replicated), timeout=WAIT_MS)
    for partition in under_replicated:
        expect(page.locator(f'#partitions tr[data-partition="{partition}"] [data-col="isr"]')).to_contain_text(
            "under-replicated")
    screenshot(page, "topic-under-replicated")


def test_the_console_shows_the_cluster_its_traffic_and_its_records(cluster: LocalCluster, browser):
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin, \
            LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as writer:
        create_topic(admin, ORDERS, 3, 3)
        create_topic(admin, BLOBS, 1, 2)
        writer.produce(BLOBS, 0, build_batch([b"plain text", BINARY_VALUE], [None, b"k"],
                                             headers=[[("trace", b"abc")], None]), acks=-1, timeout_ms=15000)
        page = browser.new_page(viewport={"width": 1360, "height": 900})
        page.on("pageerror", lambda error: print(f"page error: {error}"))
        page.on("console", lambda message: print(f"console {message.type}: {message.text}"))
        base = cluster.gateway_url()
        with Traffic(writer, ORDERS, 3) as traffic:
            wait_until(lambda: min(map(len, traffic.values.values())) >= 40, 30, message="the producer to start")
            with lagging_member(cluster, ORDERS, 20):
                page.goto(f"{base}/ui/")
                check_overview(page, admin)
                screenshot(page, "overview")
                check_topics(page)
                traffic.halt()  # the member stays in its group, reading nothing: the lag holds still
                check_topic_page(page, base, admin, traffic.values)
                check_groups(page, base, admin)
                check_a_stopped_broker(page, base, admin, cluster)
        page.close()
