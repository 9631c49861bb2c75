"""Faults injected into a running `LocalCluster`, and seeded schedules of them.

    nemesis = Nemesis(cluster)               # cluster started with a HostNetwork for network faults
    record = nemesis.apply("isolate:broker-1")    # or nemesis.apply(Op("isolate", ("broker-1",)))
    nemesis.heal_all()                       # every fault undone; returns the records of doing so
    schedule = Schedule.generate(seed=7, hosts=cluster.network.hosts, duration_s=30,
                                 kinds=("isolate", "split", "pause"))
    print(schedule)                          # one line; Schedule.parse(line) gives it back exactly
    records = run_schedule(cluster, schedule, stop_event)   # heals at the end, whatever happens

An `Op` is a kind and string arguments, written `kind:arg:arg` (`str(op)`, `Op.parse`). Host names
are those of the cluster's `HostNetwork` (`zookeeper`, `controller-1001`, `broker-1`, ...); `client`
stands for the root namespace (the CLI, clients and tests, at the bridge's address).

    isolate:H            H exchanges no packet with any other host nor with the client
    split:A+B:C+D        no packet between a host of A+B and one of C+D (others are untouched)
    drop:A:B             packets from A to B are dropped, B to A still pass (one-way; the TCP
                         connections between them stall both ways, as on a real network)
    heal                 every drop above removed
    link:H:loss=5,delay_ms=50,jitter_ms=10,reorder=25   `tc netem` on H's eth0 (what H sends);
                         on a kernel without sch_netem, loss alone is an nft `numgen random` rule
                         and the rest is done in user space by `linkqueue` (an NFQUEUE consumer
                         in H's namespace, fed by the iptables chain ODRADEK_LINK)
    unlink:H             H's link faults removed
    pause:S / resume:S   SIGSTOP / SIGCONT to S's process (a service or `zookeeper`)
    kill:S / restart:S   SIGKILL to S; start it again with its config (waiting until it serves)
    skew:S:+30s          S restarted with its clock offset by libfaketime (`LD_PRELOAD`, `FAKETIME`;
                         monotonic clocks untouched); `unskew:S` restarts it with the true clock

Drops are nft rules in the table `odradek_nemesis` inside the hosts' namespaces: a drop A→B is a
rule in B's input chain (packets vanish, as on a partitioned network; a drop towards the client is
in A's output chain, since the root namespace is never touched); heal deletes that table in every
namespace. Every applied op is kept in `nemesis.records` as an `OpRecord` (the op, wall-clock start
and end, what was done or why it failed). `available_kinds(nemesis)` lists the schedule kinds this
machine can apply (no `link` without `sch_netem` or NetfilterQueue).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from services.devcluster.launcher import ZOOKEEPER_HOST, LocalCluster
from services.devcluster.linkqueue import READY
from services.devcluster.netns import HOST_INTERFACE, HostNetwork, NetworkError
from services.devcluster.proc import log_tail, process_state, start_process, stop_process, wait_until
from services.devcluster.zookeeper import running_pid as zookeeper_pid

CLIENT = "client"
NEMESIS_TABLE = "odradek_nemesis"
LINK_TABLE = "odradek_nemesis_link"
FAKETIME_LIBRARY_GLOB = "/usr/lib/*/faketime/libfaketime.so.1"
FAKETIME_INSTALL = "apt-get install faketime libfaketime"
RESTART_TIMEOUT_S = 60.0
SIGNAL_TIMEOUT_S = 10.0  # for a paused process to show as stopped, a resumed one as running
LINK_CHAIN = "ODRADEK_LINK"
LINK_QUEUE_NUMBER = 0  # queues are per network namespace
LINK_QUEUE_START_TIMEOUT_S = 10.0
LINK_QUEUE_INSTALL = ("NetfilterQueue (`pip install 'odradek[faults]'`, over Debian's libnetfilter-queue-dev) "
                      "and iptables")

NETWORK_KINDS = ("isolate", "split", "drop", "loss", "link")
PROCESS_KINDS = ("pause", "kill", "skew")
ALL_KINDS = NETWORK_KINDS + PROCESS_KINDS
LINK_SETTINGS = ("loss", "delay_ms", "jitter_ms", "reorder")


class NemesisError(RuntimeError):
    """An op could not be applied (bad arguments, a command failed, not supported here)."""


class Op(NamedTuple):
    """One fault or its undoing: `kind:arg:arg`."""

    kind: str
    args: tuple[str, ...] = ()

    def __str__(self) -> str:
        return ":".join((self.kind, *self.args))

    @classmethod
    def parse(cls, text: str) -> Op:
        kind, *args = text.strip().split(":")
        return cls(kind, tuple(args))


class Step(NamedTuple):
    """An op due `at_s` seconds after a schedule starts."""

    at_s: float
    op: str
    args: tuple[str, ...] = ()

    @property
    def as_op(self) -> Op:
        return Op(self.op, self.args)

    def __str__(self) -> str:
        return f"{self.at_s:.3f} {self.as_op}"


@dataclass
class OpRecord:
    """What applying one op did."""

    op: Op
    started_at: float  # time.time()
    ended_at: float
    ok: bool
    detail: str
    due_at: float | None = None  # time.time() it was scheduled for, under run_schedule

    def __str__(self) -> str:
        state = "ok" if self.ok else "FAILED"
        return f"{self.started_at:.3f} {self.op} {state} ({self.ended_at - self.started_at:.2f} s): {self.detail}"


# ---------------------------------------------------------------------- the nemesis

class Nemesis:
    """Applies ops to one cluster and remembers what it must undo (see the module docstring)."""

    def __init__(self, cluster: LocalCluster, restart_timeout_s: float = RESTART_TIMEOUT_S):
        self.cluster = cluster
        self.restart_timeout_s = restart_timeout_s
        self.records: list[OpRecord] = []
        self._lock = threading.Lock()
        self._ruled_hosts: set[str] = set()
        self._linked_hosts: set[str] = set()
        self._paused: set[str] = set()
        self._killed: set[str] = set()
        self._skewed: set[str] = set()
        self._netem: bool | None = None
        self._link_queues: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def network(self) -> HostNetwork:
        if self.cluster.network is None:
            raise NemesisError("network faults need a cluster started on a HostNetwork (`--hosts`)")
        return self.cluster.network

    def apply(self, op: Op | Step | str, due_at: float | None = None) -> OpRecord:
        """Applies one op and records it; raises NemesisError (recorded too) when it fails."""
        op = Op.parse(op) if isinstance(op, str) else op.as_op if isinstance(op, Step) else op
        handler = getattr(self, f"_op_{op.kind.replace('-', '_')}", None)
        started = time.time()
        with self._lock:
            try:
                if handler is None:
                    raise NemesisError(f"unknown op {op.kind!r}; known: {', '.join(known_ops())}")
                detail = handler(*op.args)
            except (NemesisError, NetworkError, RuntimeError, TimeoutError, OSError, TypeError) as error:
                record = OpRecord(op, started, time.time(), False, f"{type(error).__name__}: {error}", due_at)
                self.records.append(record)
                raise NemesisError(str(record)) from error
        record = OpRecord(op, started, time.time(), True, detail, due_at)
        self.records.append(record)
        return record

    def heal_all(self) -> list[OpRecord]:
        """Undoes every fault: drops and link faults removed, paused processes resumed, killed ones
        started, skewed ones restarted with the true clock. Returns the records of doing so (a
        failure is recorded and the rest still done)."""
        ops = []
        if self.cluster.network is not None:
            ops += [Op("heal")] + [Op("unlink", (host,)) for host in sorted(self._linked_hosts)]
        ops += [Op("resume", (name,)) for name in sorted(self._paused)]
        ops += [Op("restart", (name,)) for name in sorted(self._killed)]
        ops += [Op("unskew", (name,)) for name in sorted(self._skewed - self._killed)]
        done = []
        for op in ops:
            try:
                done.append(self.apply(op))
            except NemesisError:
                done.append(self.records[-1])
        return done

    # ------------------------------------------------------------------ network

    def _hosts(self, text: str) -> list[str]:
        hosts = [host for host in text.split("+") if host]
        for host in hosts:
            if host != CLIENT and host not in self.network.hosts:
                raise NemesisError(f"no host {host!r}; hosts: {', '.join([*self.network.hosts, CLIENT])}")
        if not hosts:
            raise NemesisError("an empty group of hosts")
        return hosts

    def _drop_pairs(self, pairs: Iterable[tuple[str, str]]) -> str:
        """Drops every packet from a to b for each (a, b); returns what it did."""
        rules: dict[str, list[str]] = {}
        for source, target in pairs:
            if source == target or CLIENT == source == target:
                continue
            if target != CLIENT:
                address = self.network.root_address if source == CLIENT else self.network.address(source)
                rules.setdefault(target, []).append(f"add rule inet {NEMESIS_TABLE} input ip saddr {address} drop")
            else:
                rules.setdefault(source, []).append(
                    f"add rule inet {NEMESIS_TABLE} output ip daddr {self.network.root_address} drop")
        for host, host_rules in rules.items():
            script = "\n".join([f"add table inet {NEMESIS_TABLE}",
                                f"add chain inet {NEMESIS_TABLE} input {{ type filter hook input priority 0; }}",
                                f"add chain inet {NEMESIS_TABLE} output {{ type filter hook output priority 0; }}",
                                *host_rules]) + "\n"
            self.network.run_in(host, ["nft", "-f", "-"], input_text=script)
            self._ruled_hosts.add(host)
        return "nft drops: " + "; ".join(f"{host}: {len(r)} rule(s)" for host, r in sorted(rules.items()))

    def _op_isolate(self, host: str) -> str:
        self._hosts(host)
        others = [other for other in [*self.network.hosts, CLIENT] if other != host]
        return self._drop_pairs([(host, other) for other in others] + [(other, host) for other in others])

    def _op_split(self, group_a: str, group_b: str) -> str:
        side_a, side_b = self._hosts(group_a), self._hosts(group_b)
        if set(side_a) & set(side_b):
            raise NemesisError(f"the groups share {sorted(set(side_a) & set(side_b))}")
        return self._drop_pairs([(a, b) for a in side_a for b in side_b] + [(b, a) for a in side_a for b in side_b])

    def _op_drop(self, source: str, target: str) -> str:
        self._hosts(source), self._hosts(target)
        return self._drop_pairs([(source, target)])

    def _op_heal(self) -> str:
        for host in self.network.hosts:  # every namespace: a rule left by an earlier nemesis goes too
            self.network.run_in(host, ["nft", "delete", "table", "inet", NEMESIS_TABLE], check=False)
        healed, self._ruled_hosts = sorted(self._ruled_hosts), set()
        return f"nft table {NEMESIS_TABLE} deleted in every namespace (had rules: {', '.join(healed) or 'none'})"

    def netem_supported(self) -> bool:
        """Whether the kernel has `sch_netem` (tried on a host's loopback)."""
        if self._netem is None:
            host = self.network.hosts[0]
            added = self.network.run_in(host, ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                                        check=False)
            shown = self.network.run_in(host, ["tc", "qdisc", "show", "dev", "lo"], check=False)
            self._netem = added == "" and "netem" in shown
            self.network.run_in(host, ["tc", "qdisc", "del", "dev", "lo", "root"], check=False)
        return self._netem

    def _op_link(self, host: str, settings: str) -> str:
        self._hosts(host)
        values = parse_link_settings(settings)
        if self.netem_supported():
            netem = []
            if values.get("delay_ms") or values.get("jitter_ms") or values.get("reorder"):
                netem += ["delay", f"{values.get('delay_ms', 0):g}ms"]
                if values.get("jitter_ms"):
                    netem += [f"{values['jitter_ms']:g}ms"]
            if values.get("loss"):
                netem += ["loss", f"{values['loss']:g}%"]
            if values.get("reorder"):
                netem += ["reorder", f"{values['reorder']:g}%"]
            argv = ["tc", "qdisc", "replace", "dev", HOST_INTERFACE, "root", "netem", *netem]
            self.network.run_in(host, argv)
            self._linked_hosts.add(host)
            return f"{host}: {' '.join(argv)}"
        self._unlink(host)
        if set(values) - {"loss"}:
            return self._start_link_queue(host, values)
        per_ten_thousand = round(values["loss"] * 100)
        rule = (f"oifname {HOST_INTERFACE} drop" if per_ten_thousand >= 10000
                else f"oifname {HOST_INTERFACE} numgen random mod 10000 < {per_ten_thousand} drop")
        script = "\n".join([f"add table inet {LINK_TABLE}",
                            f"add chain inet {LINK_TABLE} output {{ type filter hook output priority 0; }}",
                            f"flush chain inet {LINK_TABLE} output",
                            f"add rule inet {LINK_TABLE} output {rule}"]) + "\n"
        self.network.run_in(host, ["nft", "-f", "-"], input_text=script)
        self._linked_hosts.add(host)
        return f"{host}: nft {rule} (no sch_netem in this kernel)"

    def _start_link_queue(self, host: str, values: dict[str, float]) -> str:
        """Delay, jitter and reordering without netem: `linkqueue` holds the host's outgoing packets."""
        if not link_queue_supported():
            raise NemesisError("this kernel has no sch_netem (tc netem), and delay, jitter and reordering in "
                               f"user space need {LINK_QUEUE_INSTALL}; loss alone needs neither")
        log_path = self.cluster.base_dir / "logs" / f"linkqueue-{host}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text("")
        argv = [*self.network.exec_prefix(host), sys.executable, "-m", "services.devcluster.linkqueue",
                "--queue", str(LINK_QUEUE_NUMBER)]
        for key in LINK_SETTINGS:
            argv += [f"--{key.replace('_', '-')}", f"{values.get(key, 0):g}"]
        process = start_process(argv, log_path, env=self.cluster.env, cwd=Path(__file__).resolve().parents[2])
        self._link_queues[host] = process

        def ready() -> bool:
            if process.poll() is not None:
                raise NemesisError(f"linkqueue on {host} exited ({process.returncode}): {log_tail(log_path, 20)}")
            return READY in log_path.read_text()

        queue_rule = ["-o", HOST_INTERFACE, "-j", "NFQUEUE", "--queue-num", str(LINK_QUEUE_NUMBER), "--queue-bypass"]
        try:
            wait_until(ready, LINK_QUEUE_START_TIMEOUT_S, 0.05, message=f"linkqueue on {host} to bind its queue")
            for rule in (["-N", LINK_CHAIN], ["-A", LINK_CHAIN, *queue_rule], ["-A", "OUTPUT", "-j", LINK_CHAIN]):
                self.network.run_in(host, ["iptables", *rule])
        except BaseException:
            self._unlink(host)
            raise
        self._linked_hosts.add(host)
        settings = ", ".join(f"{key}={values[key]:g}" for key in LINK_SETTINGS if key in values)
        return (f"{host}: {settings} by linkqueue (pid {process.pid}) on netfilter queue {LINK_QUEUE_NUMBER} "
                f"(no sch_netem in this kernel)")

    def _unlink(self, host: str) -> None:
        self.network.run_in(host, ["tc", "qdisc", "del", "dev", HOST_INTERFACE, "root"], check=False)
        self.network.run_in(host, ["nft", "delete", "table", "inet", LINK_TABLE], check=False)
        for argv in (["-D", "OUTPUT", "-j", LINK_CHAIN], ["-F", LINK_CHAIN], ["-X", LINK_CHAIN]):
            self.network.run_in(host, ["iptables", *argv], check=False)
        process = self._link_queues.pop(host, None)
        if process is not None:
            stop_process(process, timeout_s=5)
        self._linked_hosts.discard(host)

    def _op_unlink(self, host: str) -> str:
        self._hosts(host)
        self._unlink(host)
        return f"{host}: root qdisc of {HOST_INTERFACE}, nft table {LINK_TABLE} and iptables chain {LINK_CHAIN} removed"

    # ------------------------------------------------------------------ processes

    def _service(self, name: str) -> str:
        if name not in self.cluster.services:
            raise NemesisError(f"no service {name!r}; services: {', '.join(self.cluster.all_names)}")
        return name

    def _signal(self, name: str, signum: int) -> int:
        if name == ZOOKEEPER_HOST:
            pid = zookeeper_pid(self.cluster.base_dir / "zookeeper")
            if pid is None:
                raise NemesisError("ZooKeeper is not running (or not this cluster's)")
            os.kill(pid, signum)
            return pid
        return self.cluster.signal_service(self._service(name), signum)

    def _op_pause(self, name: str) -> str:
        pid = self._signal(name, signal.SIGSTOP)
        self._paused.add(name)
        wait_until(lambda: process_state(pid) == "T", SIGNAL_TIMEOUT_S, message=f"{name} (pid {pid}) to stop")
        return f"SIGSTOP to {name} (pid {pid}), stopped"

    def _op_resume(self, name: str) -> str:
        pid = self._signal(name, signal.SIGCONT)
        self._paused.discard(name)
        wait_until(lambda: process_state(pid) != "T", SIGNAL_TIMEOUT_S, message=f"{name} (pid {pid}) to resume")
        return f"SIGCONT to {name} (pid {pid}), running"

    def _op_kill(self, name: str) -> str:
        self._service(name)
        pid = self.cluster.kill_service(name)
        self._killed.add(name)
        self._paused.discard(name)
        return f"SIGKILL to {name} (pid {pid})"

    def _op_restart(self, name: str) -> str:
        self._service(name)
        if self.cluster.running_pid(name) is not None:
            raise NemesisError(f"{name} is running; kill it first")
        started = time.monotonic()
        pid = self.cluster.start_service(name, timeout_s=self.restart_timeout_s)
        self._killed.discard(name)
        return f"started {name} (pid {pid}), serving after {time.monotonic() - started:.1f} s"

    def _op_skew(self, name: str, offset: str) -> str:
        self._service(name)
        library = faketime_library()
        self.cluster.service_env[name] = {"LD_PRELOAD": library, "FAKETIME": offset,
                                          "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
        pid = self._restart(name)
        self._skewed.add(name)
        return f"restarted {name} (pid {pid}) with FAKETIME={offset} through {library}"

    def _op_unskew(self, name: str) -> str:
        self._service(name)
        self.cluster.service_env.pop(name, None)
        pid = self._restart(name)
        self._skewed.discard(name)
        return f"restarted {name} (pid {pid}) with the true clock"

    def _restart(self, name: str) -> int:
        """Stops `name` cleanly (resuming it first if paused: a stopped process ignores SIGTERM),
        so its ZooKeeper session ends at once, and starts it again."""
        if name in self._paused:
            self._op_resume(name)
        self._killed.discard(name)
        return self.cluster.restart_service(name, timeout_s=self.restart_timeout_s)


def known_ops() -> list[str]:
    return sorted(name[len("_op_"):] for name in dir(Nemesis) if name.startswith("_op_"))


def faketime_library() -> str:
    found = sorted(glob.glob(FAKETIME_LIBRARY_GLOB))
    if not found:
        raise NemesisError(f"libfaketime is not installed: {FAKETIME_INSTALL}")
    return found[0]


def parse_link_settings(text: str) -> dict[str, float]:
    """`loss=5,delay_ms=50,jitter_ms=10,reorder=25` (percentages and milliseconds) as numbers."""
    values = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        if key not in LINK_SETTINGS:
            raise NemesisError(f"unknown link setting {key!r}; known: {', '.join(LINK_SETTINGS)}")
        values[key] = float(value)
        if values[key] < 0 or key in ("loss", "reorder") and values[key] > 100:
            raise NemesisError(f"{key}={value} is out of range ({key} is a percentage)" if key in ("loss", "reorder")
                               else f"{key}={value} is negative")
    if not values:
        raise NemesisError("no link setting given")
    return values


def link_queue_supported() -> bool:
    """Whether `linkqueue` can run: NetfilterQueue importable and iptables there."""
    return importlib.util.find_spec("netfilterqueue") is not None and shutil.which("iptables") is not None


def available_kinds(nemesis: Nemesis) -> tuple[str, ...]:
    """The schedule kinds this machine can apply to the nemesis's cluster."""
    kinds = list(PROCESS_KINDS)
    if not glob.glob(FAKETIME_LIBRARY_GLOB):
        kinds.remove("skew")
    if nemesis.cluster.network is not None:
        kinds = [kind for kind in NETWORK_KINDS
                 if kind != "link" or nemesis.netem_supported() or link_queue_supported()] + kinds
    return tuple(kinds)


# ---------------------------------------------------------------------- schedules

@dataclass
class Schedule:
    """Faults and their undoing at times from a start, from a seed; `str()` is one line that
    `Schedule.parse` turns back into the same schedule."""

    seed: int
    duration_s: float
    hosts: tuple[str, ...]
    kinds: tuple[str, ...]
    steps: list[Step] = field(default_factory=list)

    @classmethod
    def generate(cls, seed: int, hosts: Sequence[str], duration_s: float, kinds: Sequence[str] = ALL_KINDS,
                 *, hold_s: tuple[float, float] = (2.0, 8.0), gap_s: tuple[float, float] = (1.0, 4.0)) -> Schedule:
        """Faults one after another: each of a kind drawn from `kinds`, on hosts drawn from `hosts`,
        held `hold_s` seconds (uniform), then undone, then `gap_s` seconds of calm; the last undone
        by `duration_s`. The same arguments give the same schedule."""
        unknown = set(kinds) - set(ALL_KINDS)
        if unknown:
            raise ValueError(f"unknown kinds {sorted(unknown)}; known: {', '.join(ALL_KINDS)}")
        rng = random.Random(seed)
        hosts = tuple(hosts)
        processes = [host for host in hosts if host != ZOOKEEPER_HOST]
        steps: list[Step] = []
        at_s = round(rng.uniform(*gap_s), 3)
        while at_s < duration_s:
            kind = rng.choice(list(kinds))
            fault, undo = _fault(rng, kind, hosts, processes)
            end_s = round(min(at_s + rng.uniform(*hold_s), duration_s), 3)
            steps += [Step(at_s, fault.kind, fault.args), Step(end_s, undo.kind, undo.args)]
            at_s = round(end_s + rng.uniform(*gap_s), 3)
        return cls(seed, duration_s, hosts, tuple(kinds), steps)

    def __iter__(self):
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def __str__(self) -> str:
        head = (f"seed={self.seed} duration_s={self.duration_s:g} hosts={','.join(self.hosts)} "
                f"kinds={','.join(self.kinds)}")
        return f"{head} | {'; '.join(str(step) for step in self.steps)}"

    @classmethod
    def parse(cls, line: str) -> Schedule:
        head, _, body = line.strip().partition(" | ")
        fields = dict(part.split("=", 1) for part in head.split())
        steps = []
        for text in filter(None, (part.strip() for part in body.split(";"))):
            at_s, op_text = text.split(" ", 1)
            op = Op.parse(op_text)
            steps.append(Step(float(at_s), op.kind, op.args))
        return cls(int(fields["seed"]), float(fields["duration_s"]), tuple(filter(None, fields["hosts"].split(","))),
                   tuple(filter(None, fields["kinds"].split(","))), steps)


def _fault(rng: random.Random, kind: str, hosts: Sequence[str], processes: Sequence[str]) -> tuple[Op, Op]:
    if kind in NETWORK_KINDS and len(hosts) < 2 or kind in PROCESS_KINDS and not processes:
        raise ValueError(f"too few hosts for {kind!r}: {list(hosts)}")
    if kind == "isolate":
        return Op("isolate", (rng.choice(hosts),)), Op("heal")
    if kind == "split":
        shuffled = list(hosts)
        rng.shuffle(shuffled)
        cut = rng.randint(1, len(shuffled) // 2)
        return Op("split", ("+".join(shuffled[:cut]), "+".join(shuffled[cut:]))), Op("heal")
    if kind == "drop":
        source, target = rng.sample(list(hosts), 2)
        return Op("drop", (source, target)), Op("heal")
    if kind == "loss":
        host = rng.choice(hosts)
        return Op("link", (host, f"loss={rng.choice([1, 5, 10, 30])}")), Op("unlink", (host,))
    if kind == "link":
        host = rng.choice(hosts)
        settings = (f"loss={rng.choice([0, 1, 5])},delay_ms={rng.choice([10, 50, 200])},"
                    f"jitter_ms={rng.choice([0, 10, 50])},reorder={rng.choice([0, 10, 25])}")
        return Op("link", (host, settings)), Op("unlink", (host,))
    if kind == "pause":
        host = rng.choice(hosts)
        return Op("pause", (host,)), Op("resume", (host,))
    if kind == "kill":
        name = rng.choice(processes)
        return Op("kill", (name,)), Op("restart", (name,))
    if kind == "skew":
        name = rng.choice(processes)
        offset = rng.choice(["+", "-"]) + f"{rng.choice([5, 30, 120, 600])}s"
        return Op("skew", (name, offset)), Op("unskew", (name,))
    raise ValueError(f"unknown kind {kind!r}")


def run_schedule(cluster: LocalCluster | Nemesis, schedule: Schedule | Iterable[Step],
                 stop_event: threading.Event | None = None,
                 on_record: Callable[[OpRecord], None] | None = None) -> list[OpRecord]:
    """Applies each step when it is due, until the schedule ends or `stop_event` is set; then heals
    everything, however it ended. The schedule's clock stands still while an op is being applied
    (a restart waits until the service serves), so every fault is held, and every calm lasts, as
    long as the schedule says; a record's `due_at` is when its step became due. A failing op is
    recorded and the schedule goes on. Returns every record, each also passed to `on_record`."""
    nemesis = cluster if isinstance(cluster, Nemesis) else Nemesis(cluster)
    stop_event = stop_event or threading.Event()
    started_mono, started_wall = time.monotonic(), time.time()
    applying_s = 0.0  # time spent applying ops, by which every later step moves
    first = len(nemesis.records)
    try:
        for step in schedule:
            if stop_event.wait(max(0.0, started_mono + applying_s + step.at_s - time.monotonic())):
                break
            applying_from = time.monotonic()
            try:
                nemesis.apply(step, due_at=started_wall + applying_s + step.at_s)
            except NemesisError:
                pass  # recorded
            applying_s += time.monotonic() - applying_from
            if on_record is not None:
                on_record(nemesis.records[-1])
    finally:
        for record in nemesis.heal_all():
            if on_record is not None:
                on_record(record)
    return nemesis.records[first:]
