"""The web console's freshness and its offline API docs, in a real browser (Debian's Chromium driven
by Playwright) against a cluster of one broker and a gateway sampling every half second.

While the sampler's reads fail (the only broker stopped), the overview shows a stale banner with the
time of its last good sample; once the broker serves again it shows live data. `/docs` renders
Swagger UI with every request off this machine refused. Skipped when Playwright or /usr/bin/chromium
is missing (`make system-deps` installs Chromium).
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from services.devcluster.launcher import LocalCluster
from tests.integration.browser_support import chromium, playwright_api
from tests.integration.conftest import gateway_module_cluster

pytestmark = pytest.mark.integration

WAIT_MS = 60000
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "ui-stale",
                                gateway_config={"ui.sample.interval.ms": 500}) as local:
        yield local


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser) -> Iterator[object]:
    """A page that may reach this machine only: every other request is refused and remembered."""
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    page.refused = []

    def route(route) -> None:
        host = urlsplit(route.request.url).hostname
        if host in LOCAL_HOSTS or route.request.url.startswith("data:"):
            route.continue_()
        else:
            page.refused.append(route.request.url)
            route.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda error: print(f"page error: {error}"))
    try:
        yield page
    finally:
        page.close()


def test_the_overview_shows_staleness_while_samples_fail_and_live_data_once_they_succeed(cluster, page):
    expect = playwright_api.expect
    status = page.locator("#series-status")
    page.goto(f"{cluster.gateway_url()}/ui/")
    expect(status).to_have_attribute("data-state", "fresh", timeout=WAIT_MS)
    expect(status).to_contain_text("Charts sampled at")
    broker = cluster.broker_name(1)
    cluster.stop_service(broker)
    try:
        expect(status).to_have_attribute("data-state", "stale", timeout=WAIT_MS)
        expect(status).to_contain_text("stale")
        expect(status).to_contain_text("Charts last sampled at")
    finally:
        cluster.start_service(broker)
    expect(status).to_have_attribute("data-state", "fresh", timeout=WAIT_MS)
    expect(status).to_contain_text("live")
    assert page.refused == []


def test_the_api_docs_render_without_the_internet(cluster, page):
    page.goto(f"{cluster.gateway_url()}/docs")
    playwright_api.expect(page.locator(".swagger-ui .opblock").first).to_be_visible(timeout=WAIT_MS)
    assert page.locator(".swagger-ui .opblock").count() > 10
    assert page.refused == []
