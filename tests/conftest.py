"""Fixtures every test directory shares: one real ZooKeeper per session, a chroot and a kazoo client
per test, the ZooKeeper log tail printed for a failed test, and the `integration` marker.

Nothing starts until a test asks for `zookeeper`, so unit tests never run a server. Set
ODRADEK_TEST_ZK to a connect string to use an existing ensemble instead of starting one.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from services.devcluster.proc import LISTEN_PORTS_ENV, listen_port_range, log_tail
from services.devcluster.zookeeper import ZooKeeperNotInstalledError, ZooKeeperServer

EXTERNAL_ZK_ENV = "ODRADEK_TEST_ZK"


def pytest_configure(config: pytest.Config) -> None:
    """Each of several test processes (pytest-xdist) chooses its clusters' ports from its own slice
    of the range, so a port one process's stopped broker will bind again is never another's."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if worker is None or count is None or os.environ.get(LISTEN_PORTS_ENV):
        return
    ports, index, slices = listen_port_range(), int(worker.removeprefix("gw")), int(count)
    size = len(ports) // slices
    low = ports.start + index * size
    os.environ[LISTEN_PORTS_ENV] = f"{low}-{low + size - 1}"
ZK_START_TIMEOUT_S = 30.0
ZK_CONNECT_TIMEOUT_S = 15.0
ZK_SESSION_TIMEOUT_S = 10.0
ZK_LOG_TAIL_LINES = 80
DELETES_PER_TRANSACTION = 1000

_INTEGRATION_DIRS = (Path(__file__).parent / "integration", Path(__file__).parent / "spark")
_chroot_numbers = itertools.count(1)


@dataclass(frozen=True)
class ExternalZooKeeper:
    """An ensemble this run did not start: nothing to stop, and no log of ours to show."""

    connect_string: str
    log_path: Path | None = None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(directory in item.path.parents for directory in _INTEGRATION_DIRS):
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    report = yield
    setattr(item, f"rep_{report.when}", report)  # read back by fixture teardowns
    return report


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer | ExternalZooKeeper]:
    """The session's ZooKeeper: `.connect_string`, and `.log_path` when this run started it."""
    external = os.environ.get(EXTERNAL_ZK_ENV)
    if external:
        yield ExternalZooKeeper(external)
        return
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    try:
        server.start(ZK_START_TIMEOUT_S)
    except ZooKeeperNotInstalledError as exc:  # a missing server fails the tests, never skips them
        raise pytest.fail.Exception(str(exc), pytrace=False) from None
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _zookeeper_log_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a failed test that used `zookeeper`, print the server's log tail; pytest shows it
    under "Captured stdout teardown" in the failure report."""
    yield
    report = getattr(request.node, "rep_call", None)
    server = request.node.funcargs.get("zookeeper") if "zookeeper" in request.fixturenames else None
    if report is None or not report.failed or server is None or server.log_path is None:
        return
    print(f"--- ZooKeeper log tail ({server.log_path}) ---")
    print(log_tail(server.log_path, ZK_LOG_TAIL_LINES))


@pytest.fixture(scope="session")
def _zk_root_client(zookeeper: ZooKeeperServer | ExternalZooKeeper) -> Iterator[KazooClient]:
    """A client at the root, only for creating and deleting the per-test chroots."""
    client = KazooClient(hosts=zookeeper.connect_string, timeout=ZK_SESSION_TIMEOUT_S)
    client.start(timeout=ZK_CONNECT_TIMEOUT_S)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def delete_tree(client: KazooClient, root: str) -> None:
    """Deletes `root` and every znode under it, deepest first, many deletes to a transaction and
    each level's reads sent together: kazoo's recursive delete takes one round trip per znode,
    many seconds for a chroot holding the states of thousands of partitions."""
    levels = [[root]]
    while levels[-1]:
        pending = [(path, client.get_children_async(path)) for path in levels[-1]]
        levels.append([f"{path.rstrip('/')}/{child}" for path, result in pending for child in _children(result)])
    for paths in reversed(levels):
        transactions = []
        for start in range(0, len(paths), DELETES_PER_TRANSACTION):
            transaction = client.transaction()
            for path in paths[start:start + DELETES_PER_TRANSACTION]:
                transaction.delete(path)
            transactions.append((paths[start:start + DELETES_PER_TRANSACTION], transaction.commit_async()))
        for chunk, result in transactions:
            if any(isinstance(outcome, Exception) for outcome in result.get()):  # a znode gone or added meanwhile
                for path in chunk:
                    if client.exists(path):
                        client.delete(path, recursive=True)


def _children(result) -> list[str]:
    try:
        return result.get()
    except NoNodeError:
        return []


@pytest.fixture
def zk_chroot(request: pytest.FixtureRequest, _zk_root_client: KazooClient) -> Iterator[str]:
    """A fresh znode path for this test alone, created before and recursively deleted after."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:80]
    chroot = f"/odradek-test-{os.getpid()}-{next(_chroot_numbers)}-{name}"
    _zk_root_client.ensure_path(chroot)
    try:
        yield chroot
    finally:
        delete_tree(_zk_root_client, chroot)


@pytest.fixture
def zk_client(zookeeper: ZooKeeperServer | ExternalZooKeeper, zk_chroot: str) -> Iterator[KazooClient]:
    """A started kazoo client whose root is this test's chroot."""
    client = KazooClient(hosts=zookeeper.connect_string + zk_chroot, timeout=ZK_SESSION_TIMEOUT_S)
    client.start(timeout=ZK_CONNECT_TIMEOUT_S)
    try:
        yield client
    finally:
        client.stop()
        client.close()
