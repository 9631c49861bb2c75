"""A network of hosts (a namespace and an address per service) for the tests that need one, made
for a module and checked to leave nothing behind; skipped with the reason where it cannot run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from services.devcluster.launcher import hosts_for
from services.devcluster.netns import HostNetwork, run_links, run_namespaces, unsupported_reason
from services.devcluster.zookeeper import ZooKeeperNotInstalledError, find_installation


def hosts_skip_reason(needing: str) -> str | None:
    """Why `needing` (what the tests do, for the message) cannot run here, or None."""
    reason = unsupported_reason()
    if reason is not None:
        return f"{needing} needs services on hosts of their own (`ip netns`), which cannot run here: {reason}"
    try:
        find_installation()
    except ZooKeeperNotInstalledError as error:
        return str(error)
    return None


@contextlib.contextmanager
def host_network(controllers: int, brokers: int, coordinators: int, needing: str) -> Iterator[HostNetwork]:
    """The created network, torn down afterwards; fails the test if anything of its run is left."""
    if (reason := hosts_skip_reason(needing)) is not None:
        pytest.skip(reason)
    network = HostNetwork(hosts_for(controllers, brokers, coordinators, 0))
    try:
        yield network.create()
    finally:
        network.teardown()
        left = run_namespaces(network.run_id) + run_links(network.run_id)
        assert not left, f"left behind by run {network.run_id}: {left}"
