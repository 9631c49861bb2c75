"""`odradek dev up|down|status|add-broker|nemesis|start|stop|restart|kill`: a local cluster under one
directory, through `LocalCluster`.

`up` starts ZooKeeper, the controllers, the brokers, the coordinators and the HTTP gateways on the
launcher's default ports (ZooKeeper 2181, brokers 9092/9192/9292..., controllers 9093/9193...,
coordinators 9094/9194..., gateways 8080/8180...; each gRPC service's Prometheus metrics on its port
+ 10, brokers 9102/9202..., a gateway's at its own `/metrics`), creates the `demo` topic (3 partitions,
replication factor min(3, brokers)) unless asked not to, and prints the endpoints (the gateways'
URLs among them) and how to use them. A cluster already running from the directory is reported, not started twice.
With `--hosts`, `up` gives ZooKeeper and every service a network namespace and an address of its own
on a bridge made for the run (`HostNetwork`; root only), so network faults can be injected between
them (`services.devcluster.nemesis`); the endpoints it prints are those addresses, reachable from
this machine. `down` stops whatever `<dir>/cluster.json` records and tears down the run's network.
`status` prints each service and exits with 1 when any is down. `add-broker` lays out the next
broker (`broker-4` after three, on the next ports of the scheme: 9392, Kafka listener 19392, metrics
9402; on a network, a host of its own), starts it and waits until it serves.

`nemesis` applies a seeded schedule of faults (`services.devcluster.nemesis`; `--seed`,
`--duration`, `--kinds`), printing its one-line form first and each fault as it is applied, and
heals everything at the end or on Ctrl-C; `--replay LINE` runs that line's schedule again exactly.

`spark up|down|status` runs a Spark standalone cluster beside it (`spark_cli`).

`start|stop|restart|kill SERVICE` act on one service named as `status` prints it (`broker-1`,
`controller-1001`, `coordinator-2001`, ...): `stop` sends SIGTERM and waits for the exit (SIGKILL
after `--timeout`), `kill` sends SIGKILL, `start` runs it again with its config (refused while it
runs) and waits until its gRPC health check answers SERVING, `restart` is `stop` then `start`.
A service restarted soon after a SIGKILL first waits for its previous ZooKeeper session to expire
(up to the session timeout), so `start` may take that long. Each prints what it did and exits with
1 when it could not do it.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import TextIO

from services.clients.admin import Admin
from services.clients.admin_types import NewTopic
from services.common.errors import Errors, KafkaError
from services.devcluster import secure as secure_layout
from services.devcluster import spark_cli
from services.devcluster.launcher import LocalCluster, hosts_for
from services.devcluster.nemesis import ALL_KINDS, Nemesis, Schedule, available_kinds, run_schedule
from services.devcluster.netns import HostNetwork, unsupported_reason
from services.devcluster.proc import log_tail
from services.devcluster.zookeeper import running_pid as zookeeper_pid

DEMO_TOPIC = "demo"
# the Odradek services of docker-compose.yml: `odradek dev certs` issues their certificates by default
COMPOSE_SERVICES = ("controller-1", "controller-2", "broker-1", "broker-2", "broker-3", "coordinator-1",
                    "coordinator-2", "gateway")
DEMO_PARTITIONS = 3
LOG_TAIL_LINES = 40
SERVICE_TIMEOUT_S = 60.0


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("dev", help="run a local development cluster",
                                   description="Run a local cluster (ZooKeeper, controllers, brokers, coordinators).")
    commands = parser.add_subparsers(dest="dev_command", required=True,
                                     metavar="{up,down,status,add-broker,nemesis,certs,start,stop,restart,kill,spark}")
    up = commands.add_parser("up", help="start the cluster and create the demo topic")
    up.add_argument("--brokers", type=_positive, default=3, help="number of brokers (default 3)")
    up.add_argument("--controllers", type=_positive, default=2, help="number of controllers (default 2)")
    up.add_argument("--coordinators", type=_positive, default=2,
                    help="number of group coordinators (default 2)")
    up.add_argument("--gateways", type=_not_negative, default=1,
                    help="number of HTTP gateways (REST Proxy API; default 1, on port 8080)")
    up.add_argument("--hosts", action="store_true",
                    help="run each service in its own network namespace with its own address on a "
                         "bridge made for the run (needs root); default: every service on 127.0.0.1")
    up.add_argument("--secure", action="store_true",
                    help="TLS everywhere: a local CA and certificates under the cluster dir, gRPC over mutual TLS, "
                         "SASL_SSL Kafka listeners (SCRAM user admin), HTTPS gateways, ACLs on, "
                         "ZooKeeper over TLS with client certificates")
    up.add_argument("--zk-plaintext", action="store_true",
                    help="with --secure: keep ZooKeeper's plaintext client port instead of TLS")
    up.add_argument("--no-demo-topic", action="store_true", help=f"do not create the {DEMO_TOPIC!r} topic")
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each service")
    up.set_defaults(run=run_up)
    down = commands.add_parser("down", help="stop the cluster")
    down.set_defaults(run=run_down)
    status = commands.add_parser("status", help="show each service; exit 1 if any is down")
    status.set_defaults(run=run_status)
    add_broker = commands.add_parser("add-broker", help="lay out one more broker (the next id) and start it",
                                     description="Lay out one more broker, the next id, configured as the "
                                                 "others, and start it.")
    add_broker.add_argument("--timeout", type=float, default=SERVICE_TIMEOUT_S,
                            help="seconds to wait for it to serve (default 60)")
    add_broker.set_defaults(run=run_add_broker)
    nemesis = commands.add_parser(
        "nemesis", help="inject faults from a seeded schedule (a cluster of `up --hosts` for network faults)",
        description="Apply a seeded schedule of faults to the cluster, printing each as it is applied, then "
                    "heal everything (also on Ctrl-C). The schedule's line, printed first, replays it with --replay.")
    nemesis.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: a random one)")
    nemesis.add_argument("--duration", type=float, default=60.0, help="seconds of faults (default 60)")
    nemesis.add_argument("--kinds", default=None,
                         help="comma-separated fault kinds (default: every kind this machine can apply; "
                              f"known: {','.join(ALL_KINDS)})")
    nemesis.add_argument("--replay", metavar="LINE", default=None, help="a schedule's line, replayed exactly")
    nemesis.add_argument("--dry-run", action="store_true", help="print the schedule only")
    nemesis.set_defaults(run=run_nemesis)
    certs = commands.add_parser(
        "certs", help="write a local CA and a certificate per service, for containers",
        description="Write a local CA (ca.pem, ca.key) and, per identity, a key and certificate "
                    "(NAME.key, NAME.pem, both in NAME.keystore.pem) with subject CN=NAME, for the host names "
                    "given, localhost and 127.0.0.1; existing files are kept. With the admin identity it "
                    "also writes client.properties (Kafka clients: SASL_SSL, SCRAM-SHA-512 user admin) and "
                    "odradek-client.properties (Odradek's tools: TLS with the admin certificate).")
    certs.add_argument("--out", required=True, metavar="DIR", help="the directory to write")
    certs.add_argument("--ca", metavar="DIR", default=None,
                       help="sign with the CA in DIR (ca.pem, ca.key) instead of the one in --out")
    certs.add_argument("--identity", action="append", default=None, metavar="NAME[=HOST,...]",
                       help="a certificate CN=NAME for these host names (repeatable; default: the services "
                            f"of docker-compose.yml and {secure_layout.ADMIN_USER})")
    certs.add_argument("--files-at", metavar="PATH", default=None,
                       help="where the directory is mounted, for the paths in the properties files (default: --out)")
    certs.set_defaults(run=run_certs)
    services = _add_service_parsers(commands)
    spark_cli.add_parser(commands)
    for sub in (up, down, status, add_broker, nemesis, *services):
        sub.add_argument("--dir", default="./var", help="the cluster's directory (default ./var)")
    return parser


def _add_service_parsers(commands: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    """`start|stop|restart|kill SERVICE`: one service of the cluster, by its name in `status`."""
    helps = {
        "start": ("start a stopped service with its config and wait until it serves", run_start,
                  "seconds to wait for it to serve (default 60; a service restarted soon after a "
                  "kill first waits for its previous ZooKeeper session to expire)"),
        "stop": ("stop a service with SIGTERM and wait for it to exit", run_stop,
                 "seconds to wait for the exit before sending SIGKILL (default 60)"),
        "restart": ("stop a service (SIGTERM), start it again and wait until it serves", run_restart,
                    "seconds to wait for each of the exit and the start (default 60)"),
        "kill": ("kill a service with SIGKILL (no clean shutdown), as a crash would", run_kill, None),
    }
    parsers = []
    for command, (help_text, run, timeout_help) in helps.items():
        sub = commands.add_parser(command, help=help_text, description=help_text[0].upper() + help_text[1:] + ".")
        sub.add_argument("service", metavar="SERVICE",
                         help="the service's name as `odradek dev status` prints it, e.g. broker-1")
        if timeout_help is not None:
            sub.add_argument("--timeout", type=float, default=SERVICE_TIMEOUT_S, help=timeout_help)
        sub.set_defaults(run=run)
        parsers.append(sub)
    return parsers


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _not_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def _layout_exists(base: Path) -> bool:
    return (base / "cluster.json").is_file()


def run_up(args: argparse.Namespace, out: TextIO) -> int:
    base = Path(args.dir)
    if _layout_exists(base):
        existing = LocalCluster.load(base)
        rows = existing.status()
        if any(row["pid"] is not None for row in rows.values()):
            print(f"An Odradek cluster is already running in {existing.base_dir}.", file=out)
            healthy = print_status(existing, rows, out)
            if not healthy:
                print(f"Some services are down; restart with `odradek dev down --dir {args.dir}` "
                      f"then `odradek dev up --dir {args.dir}`.", file=out)
            return 0 if healthy else 1
    network = None
    if args.hosts:
        if (reason := unsupported_reason()) is not None:
            print(f"Cannot give the services hosts of their own: {reason}.", file=out)
            return 1
        network = HostNetwork(hosts_for(args.controllers, args.brokers, args.coordinators, args.gateways))
        network.create(remove_at_exit=False)  # outlives this command; `odradek dev down` removes it
        print(f"Made network {network.subnet} (bridge {network.bridge}, this machine at "
              f"{network.root_address}) with a namespace per service, run id {network.run_id}.", file=out)
    cluster = LocalCluster(base, brokers=args.brokers, controllers=args.controllers,
                           coordinators=args.coordinators, gateways=args.gateways, network=network,
                           secure=args.secure, zookeeper_tls=args.secure and not args.zk_plaintext)
    print(f"Starting ZooKeeper, {args.controllers} controller(s), {args.brokers} broker(s), "
          f"{args.coordinators} coordinator(s) and {args.gateways} HTTP gateway(s) "
          f"in {cluster.base_dir} ...", file=out, flush=True)
    try:
        cluster.start(timeout_s=args.timeout)
    except (RuntimeError, TimeoutError, OSError) as error:
        print(f"Failed to start the cluster: {failure_report(cluster, error)}", file=out)
        if network is not None:
            network.teardown()
        return 1
    except BaseException:  # interrupted: the services are stopped already, the network goes too
        if network is not None:
            network.teardown()
        raise
    code = 0
    if not args.no_demo_topic:
        code = create_demo_topic(cluster, min(3, args.brokers), args.timeout, out)
    print_endpoints(cluster, out)
    return code


def create_demo_topic(cluster: LocalCluster, replication_factor: int, timeout_s: float, out: TextIO) -> int:
    try:
        with Admin(odradek_client_settings(cluster), bootstrap_servers=cluster.bootstrap_servers,
                   default_api_timeout_ms=int(timeout_s * 1000)) as admin:
            try:
                admin.create_topics([NewTopic(DEMO_TOPIC, DEMO_PARTITIONS, replication_factor)])
            except KafkaError as error:
                if error.code != Errors.TOPIC_ALREADY_EXISTS:
                    raise
            admin.wait_for_topic(DEMO_TOPIC, timeout_s)
    except (KafkaError, TimeoutError) as error:
        print(f"Could not create the {DEMO_TOPIC!r} topic: {error}", file=out)
        return 1
    print(f"Topic {DEMO_TOPIC!r} is ready ({DEMO_PARTITIONS} partitions, replication factor "
          f"{replication_factor}).", file=out)
    return 0


def failure_report(cluster: LocalCluster, error: BaseException) -> str:
    """The error, plus the failing service's log tail when the error does not carry it already."""
    text = str(error)
    if "\n" in text:
        return text
    for name in cluster.services:
        if name in text:
            path = cluster.log_path(name)
            return f"{text}\n--- {path} ---\n{log_tail(path, LOG_TAIL_LINES)}"
    zookeeper_log = cluster.base_dir / "zookeeper" / "zookeeper.log"
    if "zookeeper" in text.lower() and zookeeper_log.exists():
        return f"{text}\n--- {zookeeper_log} ---\n{log_tail(zookeeper_log, LOG_TAIL_LINES)}"
    return f"{text}\n{cluster.dump_logs(LOG_TAIL_LINES)}"


def run_certs(args: argparse.Namespace, out: TextIO) -> int:
    identities: dict[str, list[str]] = {name: [name] for name in COMPOSE_SERVICES}
    identities[secure_layout.ADMIN_USER] = []
    if args.identity:
        identities = {}
        for item in args.identity:
            name, _, hosts = item.partition("=")
            if not name:
                print(f"--identity {item!r}: no name", file=out)
                return 2
            identities[name] = [host for host in hosts.split(",") if host]
    directory = Path(args.out)
    try:
        issued = secure_layout.write_certificates(directory, identities, Path(args.ca) if args.ca else None)
    except FileNotFoundError as error:
        print(f"odradek dev certs: {error}", file=out)
        return 1
    for name, hosts in identities.items():
        state = "issued" if name in issued else "kept"
        names = ", ".join([*hosts, "localhost", "127.0.0.1"])
        print(f"{directory / (name + '.keystore.pem')}: CN={name} for {names} ({state})", file=out)
    if secure_layout.ADMIN_USER in identities:
        files_at = Path(args.files_at) if args.files_at else directory.resolve()
        kafka_path, odradek_path = directory / "client.properties", directory / "odradek-client.properties"
        secure_layout.write_client_properties(kafka_path, odradek_path,
                                              secure_layout.certificate_client_settings(files_at))
        print(f"{kafka_path}, {odradek_path}: client settings naming the files in {files_at}", file=out)
    print(f"CA certificate: {directory / 'ca.pem'}", file=out)
    return 0


def odradek_client_settings(cluster: LocalCluster) -> dict[str, str]:
    """The cluster's client settings that Odradek's gRPC clients use (no SASL: they authenticate
    with their certificate)."""
    return secure_layout.grpc_client_settings(cluster.client_settings())


def write_client_configs(cluster: LocalCluster) -> tuple[Path, Path]:
    """`client.properties` (Kafka clients on the Kafka listeners: SASL_SSL with SCRAM) and
    `odradek-client.properties` (Odradek's tools over gRPC: TLS with the admin certificate)."""
    kafka_path, odradek_path = cluster.base_dir / "client.properties", cluster.base_dir / "odradek-client.properties"
    secure_layout.write_client_properties(kafka_path, odradek_path, cluster.client_settings())
    return kafka_path, odradek_path


def print_endpoints(cluster: LocalCluster, out: TextIO) -> None:
    print(f"\nOdradek cluster running in {cluster.base_dir}", file=out)
    print_status(cluster, cluster.status(), out)
    bootstrap = cluster.bootstrap_servers
    first = bootstrap.split(",")[0]
    config = ""
    if cluster.secure:
        kafka_config, odradek_config = write_client_configs(cluster)
        config = f" --command-config {odradek_config}"
        print(f"\nSecured: CA certificate {secure_layout.ca_path(cluster.base_dir)}; every gRPC listener "
              f"takes mutual TLS only, the Kafka listeners SASL_SSL, the ACL authorizer is on.", file=out)
        print(f"Kafka clients (confluent-kafka, kcat -F): {kafka_config} (SCRAM-SHA-512 user "
              f"{secure_layout.ADMIN_USER}, a super user)", file=out)
        print(f"Odradek's tools: --command-config {odradek_config} (the admin certificate)", file=out)
        if cluster.zookeeper_tls:
            print(f"ZooKeeper serves TLS only, with client certificates; tools taking --zookeeper: "
                  f"--zk-tls-config-file {cluster.base_dir / secure_layout.ZOOKEEPER_TLS_CONFIG_NAME}", file=out)
    print(f"\nBootstrap servers: {bootstrap}", file=out)
    if cluster.kafka_bootstrap_servers:
        print(f"Kafka protocol bootstrap servers (Kafka clients): {cluster.kafka_bootstrap_servers}", file=out)
        coordinators = [f"{n} {cluster.host_of(n)}:{cluster.services[n].kafka_port}" for n in cluster.coordinator_names
                        if cluster.services[n].kafka_port >= 0]
        if coordinators:
            print(f"Kafka protocol group and transaction coordinators: {', '.join(coordinators)}", file=out)
    for name in cluster.gateway_names:
        print(f"HTTP gateway ({name}): {cluster.gateway_url(name)}", file=out)
    if cluster.gateway_names:
        print(f"Web console: {cluster.gateway_url(cluster.gateway_names[0])}/ui/", file=out)
    print("\nTry:", file=out)
    print(f"  odradek topics --bootstrap-server {first}{config} --create --topic my-topic --partitions 3 "
          f"--replication-factor {min(3, len(cluster.broker_names))}", file=out)
    print(f"  odradek topics --bootstrap-server {first}{config} --describe --topic my-topic", file=out)
    if cluster.secure and cluster.kafka_bootstrap_servers:
        kafka_first = cluster.kafka_bootstrap_servers.split(",")[0]
        print(f"  kcat -F {cluster.base_dir / 'client.properties'} -X sasl.mechanisms=PLAIN -b {kafka_first} -L",
              file=out)
    print(f"  printf 'hello\\nworld\\n' | odradek produce --bootstrap-server {first}{config} --topic my-topic "
          f"--partition 0", file=out)
    print(f"  odradek fetch --bootstrap-server {first}{config} --topic my-topic --partition 0 --offset earliest",
          file=out)
    if cluster.gateway_names:
        url = cluster.gateway_url(cluster.gateway_names[0])
        curl = f"curl --cacert {secure_layout.ca_path(cluster.base_dir)}" if cluster.secure else "curl"
        print(f"  {curl} {url}/topics", file=out)
        print(f"  {curl} -X POST -H 'Content-Type: application/vnd.kafka.json.v2+json' "
              f"--data '{{\"records\":[{{\"value\":{{\"hello\":\"world\"}}}}]}}' {url}/topics/my-topic", file=out)
    if cluster.coordinator_names:
        consumer_config = config.replace("--command-config", "--consumer.config")
        print(f"  odradek console-consumer --bootstrap-server {first}{consumer_config} --topic my-topic "
              f"--group my-group --from-beginning", file=out)
        print(f"  odradek consumer-groups --bootstrap-server {first}{config} --describe --group my-group", file=out)
    print(f"\nStop it with: odradek dev down --dir {cluster.base_dir}", file=out)


def print_status(cluster: LocalCluster, rows: dict[str, dict[str, object]], out: TextIO) -> bool:
    """Prints ZooKeeper and every service; True when all of them serve."""
    healthy = True
    width = max([len(n) for n in rows] + [len("zookeeper")])
    if cluster.external_zookeeper is None:
        pid = zookeeper_pid(cluster.base_dir / "zookeeper")
        healthy &= pid is not None
        state = "running" if pid is not None else "down"
        print(f"  {'zookeeper':<{width}}  {cluster.zookeeper_connect:<21} pid {_pid(pid):<8} {state}",
              file=out)
    else:
        print(f"  {'zookeeper':<{width}}  {cluster.zookeeper_connect:<21} (external)", file=out)
    for name, row in rows.items():
        serving = bool(row["serving"])
        healthy &= serving
        state = "serving" if serving else f"down (log: {row['log']})"
        metrics = f"  metrics {row['metrics']}" if row.get("metrics") else ""
        print(f"  {name:<{width}}  {row['endpoint']!s:<21} pid {_pid(row['pid']):<8} {state}{metrics}", file=out)
    return healthy


def _pid(pid: object) -> str:
    return "-" if pid is None else str(pid)


def run_down(args: argparse.Namespace, out: TextIO) -> int:
    base = Path(args.dir)
    if not _layout_exists(base):
        print(f"No cluster in {base.resolve()} (no cluster.json); nothing to stop.", file=out)
        return 0
    cluster = LocalCluster.load(base)
    cluster.stop()
    print(f"Stopped the cluster in {cluster.base_dir}.", file=out)
    if cluster.network is not None:
        removed = cluster.network.teardown()
        print(f"Removed network run {cluster.network.run_id}: {len(removed)} namespaces and links.", file=out)
    return 0


def run_status(args: argparse.Namespace, out: TextIO) -> int:
    base = Path(args.dir)
    if not _layout_exists(base):
        print(f"No cluster in {base.resolve()} (no cluster.json).", file=out)
        return 1
    cluster = LocalCluster.load(base)
    print(f"Cluster in {cluster.base_dir}:", file=out)
    return 0 if print_status(cluster, cluster.status(), out) else 1


# ---------------------------------------------------------------------- one service

def _service_cluster(args: argparse.Namespace, out: TextIO) -> LocalCluster | None:
    """The cluster of `--dir` when it has the service named; None (with the reason printed) otherwise."""
    base = Path(args.dir)
    if not _layout_exists(base):
        print(f"No cluster in {base.resolve()} (no cluster.json); start one with `odradek dev up`.", file=out)
        return None
    cluster = LocalCluster.load(base)
    if args.service not in cluster.services:
        print(f"No service {args.service!r} in {cluster.base_dir}; its services are: "
              f"{', '.join(cluster.all_names)}.", file=out)
        return None
    return cluster


def run_start(args: argparse.Namespace, out: TextIO) -> int:
    cluster = _service_cluster(args, out)
    if cluster is None:
        return 1
    pid = cluster.running_pid(args.service)
    if pid is not None:
        print(f"{args.service} is already running (pid {pid}); use `odradek dev restart {args.service}`.",
              file=out)
        return 1
    return _start(cluster, args.service, args.timeout, out)


def _start(cluster: LocalCluster, name: str, timeout_s: float, out: TextIO) -> int:
    print(f"Starting {name} ...", file=out, flush=True)
    started_s = time.monotonic()
    try:
        pid = cluster.start_service(name, timeout_s=timeout_s)
    except (RuntimeError, TimeoutError, OSError) as error:
        print(f"Failed to start {name}: {failure_report(cluster, error)}", file=out)
        return 1
    print(f"Started {name} (pid {pid}); serving at {cluster.endpoint(name)} after "
          f"{time.monotonic() - started_s:.1f} s.", file=out)
    return 0


def _stop(cluster: LocalCluster, name: str, timeout_s: float, out: TextIO) -> bool:
    """SIGTERM and wait; False (printed) when it would not die."""
    pid = cluster.running_pid(name)
    if pid is None:
        print(f"{name} is not running.", file=out)
        return True
    print(f"Stopping {name} (pid {pid}) ...", file=out, flush=True)
    try:
        cluster.stop_service(name, timeout_s)
    except TimeoutError as error:
        print(f"Failed to stop {name}: {error}", file=out)
        return False
    print(f"Stopped {name} (pid {pid}).", file=out)
    return True


def run_add_broker(args: argparse.Namespace, out: TextIO) -> int:
    base = Path(args.dir)
    if not _layout_exists(base):
        print(f"No cluster in {base.resolve()} (no cluster.json); start one with `odradek dev up`.", file=out)
        return 1
    cluster = LocalCluster.load(base)
    name = cluster.add_broker()
    print(f"Added {name} (broker id {cluster.services[name].node_id}) to {cluster.base_dir}.", file=out)
    code = _start(cluster, name, args.timeout, out)
    if code == 0:
        print(f"Bootstrap servers: {cluster.bootstrap_servers}", file=out)
    return code


def run_stop(args: argparse.Namespace, out: TextIO) -> int:
    cluster = _service_cluster(args, out)
    if cluster is None:
        return 1
    return 0 if _stop(cluster, args.service, args.timeout, out) else 1


def run_restart(args: argparse.Namespace, out: TextIO) -> int:
    cluster = _service_cluster(args, out)
    if cluster is None:
        return 1
    if not _stop(cluster, args.service, args.timeout, out):
        return 1
    return _start(cluster, args.service, args.timeout, out)


def run_kill(args: argparse.Namespace, out: TextIO) -> int:
    cluster = _service_cluster(args, out)
    if cluster is None:
        return 1
    try:
        pid = cluster.kill_service(args.service)
    except (RuntimeError, TimeoutError) as error:
        print(f"Failed to kill {args.service}: {error}.", file=out)
        return 1
    print(f"Killed {args.service} (pid {pid}) with SIGKILL.", file=out)
    return 0


def run_nemesis(args: argparse.Namespace, out: TextIO) -> int:
    base = Path(args.dir)
    if not _layout_exists(base):
        print(f"No cluster in {base.resolve()} (no cluster.json); start one with `odradek dev up --hosts`.",
              file=out)
        return 1
    cluster = LocalCluster.load(base)
    nemesis = Nemesis(cluster)
    if args.replay:
        schedule = Schedule.parse(args.replay)
    else:
        kinds = tuple(args.kinds.split(",")) if args.kinds else available_kinds(nemesis)
        hosts = cluster.network.hosts if cluster.network is not None else cluster.all_names
        seed = args.seed if args.seed is not None else random.randrange(2**31)
        try:
            schedule = Schedule.generate(seed, hosts, args.duration, kinds)
        except ValueError as error:
            print(f"Cannot make a schedule: {error}", file=out)
            return 1
    print(f"Schedule ({len(schedule)} steps; replay with --replay):\n{schedule}", file=out, flush=True)
    if args.dry_run:
        return 0
    failed = 0

    def show(record) -> None:
        nonlocal failed
        failed += not record.ok
        print(f"  {record}", file=out, flush=True)

    try:
        run_schedule(nemesis, schedule, on_record=show)
    except KeyboardInterrupt:
        print("Interrupted; healed.", file=out)
        return 130
    print(f"Done: {len(schedule)} steps, {failed} failed; every fault healed.", file=out)
    return 0 if failed == 0 else 1
