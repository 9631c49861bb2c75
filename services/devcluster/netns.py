"""Network hosts for a local cluster: one Linux network namespace per service on a bridge of the run.

`HostNetwork(hosts)` owns, for one run id (six hex digits, random unless given):

    bridge      odr<run>br            address 10.<n>.0.1/24; the root namespace reaches every host
                                      through it, so the CLI, clients and tests need nothing else
    namespace   odr-<run>-<host>      one per host (`zookeeper`, `controller-1001`, `broker-1`, ...),
                                      loopback up, `eth0` at 10.<n>.0.<2+i>/24
    veth        odr<run>v<i>          the root side of host i's `eth0`, enslaved to the bridge

`<n>` is the first of 100-249 no address or route of the machine uses, chosen under a lock so
parallel runs never share a subnet; every name carries the run id, so `teardown()` (and
`teardown_run(run_id)`, which needs nothing but the id) removes exactly this run's namespaces, veths
and bridge, after ending the processes still inside its namespaces by their pids. Used as a context
manager, or with `create(remove_at_exit=True)`, the network is torn down however the process ends
(short of SIGKILL); `odradek dev up --hosts` creates it without that, records it in the cluster's
layout, and `odradek dev down` tears it down.

A host's command runs inside its namespace through `exec_prefix(host)` (`ip netns exec <ns>`), and
`run_in(host, argv)` runs a short command there (`nft`, `tc`). `unsupported_reason()` says why
namespaces cannot be made here (not root, no `ip`, no kernel support), or None.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from services.devcluster.proc import pid_alive, wait_until

NAME_PREFIX = "odr"
HOST_INTERFACE = "eth0"
SUBNET_SECOND_OCTETS = range(100, 250)
FIRST_HOST_OCTET = 2
LOCK_PATH = Path("/run/odradek-netns.lock")
COMMAND_TIMEOUT_S = 20.0


class NetworkError(RuntimeError):
    """An `ip`/`tc`/`nft` command failed; the message carries the command and its stderr."""


def run_command(argv: Sequence[str], *, input_text: str | None = None, check: bool = True) -> str:
    """Runs a short command, returns its stdout; NetworkError (with stderr) when it fails and `check`."""
    result = subprocess.run(list(argv), input=input_text, capture_output=True, text=True,
                            timeout=COMMAND_TIMEOUT_S, check=False)
    if check and result.returncode != 0:
        raise NetworkError(f"`{' '.join(argv)}` failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def unsupported_reason() -> str | None:
    """Why network namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed: apt-get install iproute2"
    probe = f"{NAME_PREFIX}-probe-{secrets.token_hex(3)}"
    try:
        run_command(["ip", "netns", "add", probe])
    except (NetworkError, OSError) as error:
        return f"cannot create a network namespace: {error}"
    run_command(["ip", "netns", "del", probe], check=False)
    return None


def namespaces() -> list[str]:
    """Every named network namespace of the machine."""
    return [line.split()[0] for line in run_command(["ip", "netns", "list"]).splitlines() if line.strip()]


def links() -> list[str]:
    """Every network interface of the root namespace (without `@peer` suffixes)."""
    names = []
    for line in run_command(["ip", "-o", "link", "show"]).splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names


def run_namespaces(run_id: str) -> list[str]:
    return [ns for ns in namespaces() if ns.startswith(f"{NAME_PREFIX}-{run_id}-")]


def run_links(run_id: str) -> list[str]:
    return [link for link in links() if link.startswith(f"{NAME_PREFIX}{run_id}")]


def namespace_pids(namespace: str) -> list[int]:
    return [int(pid) for pid in run_command(["ip", "netns", "pids", namespace], check=False).split()]


def teardown_run(run_id: str, kill_timeout_s: float = 10.0) -> list[str]:
    """Removes everything of run `run_id`: SIGKILLs the processes left in its namespaces (by pid),
    deletes the namespaces (their `eth0` ends, and so the veth pairs, go with them), then any veth
    and the bridge left. Returns what it removed."""
    removed = []
    for namespace in run_namespaces(run_id):
        pids = namespace_pids(namespace)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_until(lambda pids=pids: not any(pid_alive(pid) for pid in pids), kill_timeout_s,
                   message=f"the processes of {namespace} to die")
        run_command(["ip", "netns", "del", namespace])
        removed.append(namespace)
    for link in sorted(run_links(run_id), key=lambda name: name.endswith("br")):  # veths, then the bridge
        run_command(["ip", "link", "del", link], check=False)
        removed.append(link)
    return removed


@dataclass
class HostNetwork:
    """A bridge and one network namespace per host, for one run (see the module docstring)."""

    hosts: list[str] = field(default_factory=list)
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))
    subnet_octet: int = -1  # the <n> of 10.<n>.0.0/24, chosen by `create`
    created: bool = False

    @property
    def bridge(self) -> str:
        return f"{NAME_PREFIX}{self.run_id}br"

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"10.{self.subnet_octet}.0.0/24")

    @property
    def root_address(self) -> str:
        """The bridge's address: where the root namespace (CLI, clients, tests) appears to hosts."""
        return f"10.{self.subnet_octet}.0.1"

    def namespace(self, host: str) -> str:
        return f"{NAME_PREFIX}-{self.run_id}-{host}"

    def veth(self, host: str) -> str:
        return f"{NAME_PREFIX}{self.run_id}v{self.hosts.index(host)}"

    def address(self, host: str) -> str:
        return f"10.{self.subnet_octet}.0.{FIRST_HOST_OCTET + self.hosts.index(host)}"

    def host_of_address(self, address: str) -> str | None:
        return next((host for host in self.hosts if self.address(host) == address), None)

    def exec_prefix(self, host: str) -> list[str]:
        """The argv prefix that runs a command inside the host's namespace."""
        return ["ip", "netns", "exec", self.namespace(host)]

    def run_in(self, host: str, argv: Sequence[str], *, input_text: str | None = None, check: bool = True) -> str:
        return run_command([*self.exec_prefix(host), *argv], input_text=input_text, check=check)

    # ------------------------------------------------------------------ lifecycle

    def create(self, *, remove_at_exit: bool = True) -> Self:
        """Makes the bridge and every host's namespace; on any failure removes what it made."""
        if len(self.hosts) > 250 - FIRST_HOST_OCTET:
            raise ValueError(f"at most {250 - FIRST_HOST_OCTET} hosts on one network")
        if remove_at_exit:
            atexit.register(self.teardown)
        try:
            with _allocation_lock():
                self.subnet_octet = _free_subnet_octet()
                run_command(["ip", "link", "add", self.bridge, "type", "bridge"])
                run_command(["ip", "addr", "add", f"{self.root_address}/24", "dev", self.bridge])
            run_command(["ip", "link", "set", self.bridge, "up"])
            for host in self.hosts:
                self._create_host(host)
        except BaseException:
            self.teardown()
            raise
        self.created = True
        return self

    def add_host(self, host: str) -> str:
        """Adds one more host to a created network (its namespace, veth and the next address)."""
        if host in self.hosts:
            raise ValueError(f"{host} is already a host of run {self.run_id}")
        self.hosts.append(host)
        try:
            self._create_host(host)
        except BaseException:
            run_command(["ip", "netns", "del", self.namespace(host)], check=False)
            run_command(["ip", "link", "del", self.veth(host)], check=False)
            self.hosts.remove(host)
            raise
        return self.address(host)

    def _create_host(self, host: str) -> None:
        namespace, veth = self.namespace(host), self.veth(host)
        run_command(["ip", "netns", "add", namespace])
        run_command(["ip", "link", "add", veth, "type", "veth", "peer", "name", HOST_INTERFACE,
                     "netns", namespace])
        run_command(["ip", "link", "set", veth, "master", self.bridge, "up"])
        run_command(["ip", "-n", namespace, "addr", "add", f"{self.address(host)}/24", "dev", HOST_INTERFACE])
        run_command(["ip", "-n", namespace, "link", "set", HOST_INTERFACE, "up"])
        run_command(["ip", "-n", namespace, "link", "set", "lo", "up"])

    def teardown(self) -> list[str]:
        """Removes this run's namespaces (ending what still runs in them), veths and bridge."""
        self.created = False
        return teardown_run(self.run_id)

    def exists(self) -> bool:
        return bool(run_namespaces(self.run_id) or run_links(self.run_id))

    def __enter__(self) -> Self:
        return self if self.created else self.create()

    def __exit__(self, *exc_info: object) -> None:
        self.teardown()

    # ------------------------------------------------------------------ layout

    def to_dict(self) -> dict[str, object]:
        return {"run_id": self.run_id, "subnet_octet": self.subnet_octet, "hosts": list(self.hosts)}

    @classmethod
    def from_dict(cls, data: dict) -> HostNetwork:
        return cls(hosts=list(data["hosts"]), run_id=data["run_id"], subnet_octet=data["subnet_octet"],
                   created=True)


@contextlib.contextmanager
def _allocation_lock() -> Iterator[None]:
    LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_PATH, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _free_subnet_octet() -> int:
    """The first 10.<n>.0.0/24 overlapping no address or route of the root namespace (a default
    route does not count)."""
    text = run_command(["ip", "-o", "-4", "addr", "show"]) + run_command(["ip", "-4", "route", "show", "table", "all"])
    used = []
    for token in text.split():
        with contextlib.suppress(ValueError):
            network = ipaddress.IPv4Network(token, strict=False)
            if network.prefixlen > 0:
                used.append(network)
    for octet in SUBNET_SECOND_OCTETS:
        candidate = ipaddress.IPv4Network(f"10.{octet}.0.0/24")
        if not any(candidate.overlaps(network) for network in used):
            return octet
    raise NetworkError(f"no free 10.<n>.0.0/24 subnet for n in {SUBNET_SECOND_OCTETS.start}-"
                       f"{SUBNET_SECOND_OCTETS.stop - 1}")
