"""Apache Kafka as a peer on this machine: its jars from Maven Central, KRaft brokers, its Java tools.

- `fetch_jars()`: resolves `kafka_2.13`, `kafka-tools` and `kafka-clients` of `KAFKA_VERSION` (plus
  the log4j binding for SLF4J, so the servers log) with `mvn dependency:copy-dependencies` over a
  generated pom, once, into `~/.cache/odradek/kafka-<version>/libs` (`ODRADEK_KAFKA_CACHE` moves
  the cache). Raises `KafkaJarsUnavailable` when there is no mvn or Maven cannot resolve them.
- `fetch_spark_kafka_jars()`: the same for Spark's own Kafka connector (`spark-sql-kafka-0-10`)
  of the installed PySpark's version and Scala, with the jars it needs that PySpark does not ship
  (Spark's Kafka token provider, kafka-clients, commons-pool2), into
  `~/.cache/odradek/spark-sql-kafka-<scala>-<spark>/libs`. `maven_jars()` is the one Maven
  fetch both use.
- `KafkaPeer`: N (default 3) KRaft brokers in combined mode (each node both broker and controller,
  a static quorum of all of them), each with its own two ports and log dir under a base directory,
  storage formatted by `kafka.tools.StorageTool`; a context manager that starts them, waits for every
  one with a deadline, and stops them with SIGTERM, then SIGKILL for any still running.
- `run_tool()`: any Kafka Java main class (`TOOLS` names the usual ones) on the cached classpath,
  returning its exit status and output.

Both the benchmarks and the tests use it; it needs only Java and, the first time, mvn.

    python bench/kafka_peer.py fetch
    python bench/kafka_peer.py fetch-spark-kafka [--comma]
    python bench/kafka_peer.py up --dir var/kafka [--brokers 3]
    python bench/kafka_peer.py tool topics -- --bootstrap-server 127.0.0.1:PORT --list
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from services.devcluster.proc import free_port, log_tail, start_process, stop_process, wait_until  # noqa: E402

KAFKA_VERSION = "4.4.0"
# The SLF4J 1.x binding of log4j 2 (Kafka's servers log through SLF4J 1.7; its pom names no binding)
LOG4J_SLF4J_VERSION = "2.25.5"
CACHE_ENV = "ODRADEK_KAFKA_CACHE"
JARS_COMPLETE = ".complete"
MVN_TIMEOUT_S = 600

KAFKA_SERVER = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
TOOLS = {
    "console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "topics": "org.apache.kafka.tools.TopicCommand",
    "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "storage": STORAGE_TOOL,
}

BROKER_HEAP = "512m"
TOOL_HEAP = "256m"
# kafka-run-class.sh's default collector settings for the servers
SERVER_JVM_OPTIONS = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                      "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"]
SERVER_STARTED = "Kafka Server started"

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>odradek.peers</groupId>
  <artifactId>apache-kafka-jars</artifactId>
  <version>{version}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{version}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId>
      <version>{version}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId>
      <version>{version}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>{log4j_slf4j}</version></dependency>
  </dependencies>
</project>
"""

# The servers log INFO to their output (their log file); the tools only warnings, to stderr, so their
# stdout is what they print for the user, as with Kafka's own tools-log4j2 settings.
LOG4J_SERVER = """status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.state.name = state.change.logger
logger.state.level = WARN
"""
LOG4J_TOOLS = """status = warn
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
"""


# Spark's Kafka connector and what it needs beyond PySpark's own jars (Scala, Hadoop, lz4, snappy)
SPARK_KAFKA_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>odradek.peers</groupId>
  <artifactId>spark-kafka-connector-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_{scala}</artifactId>
      <version>{versions}</version></dependency>
  </dependencies>
</project>
"""
SPARK_KAFKA_ARTIFACTS = [f"{name}_{scala}" for name in ("spark-sql-kafka-0-10", "spark-token-provider-kafka-0-10")
                         for scala in ("2.12", "2.13")] + ["kafka-clients", "commons-pool2"]


class KafkaJarsUnavailable(RuntimeError):
    """Apache Kafka's jars are not cached and cannot be fetched here (no mvn, or Maven failed)."""


# --------------------------------------------------------------------------------------------- jars

def cache_root() -> Path:
    base = os.environ.get(CACHE_ENV)
    return Path(base) if base else Path.home() / ".cache" / "odradek"


def cache_dir(version: str = KAFKA_VERSION) -> Path:
    return cache_root() / f"kafka-{version}"


def jars_cached(version: str = KAFKA_VERSION) -> bool:
    return (cache_dir(version) / "libs" / JARS_COMPLETE).exists()


def maven_jars(home: Path, pom: str, wanted_jar: str, *, include_artifact_ids: list[str] | None = None,
               what: str) -> Path:
    """`home`/libs: the runtime jars of `pom`'s dependencies (only `include_artifact_ids`, when given),
    copied by `mvn dependency:copy-dependencies` the first time; `wanted_jar` is a glob that must
    match one of them. The directory appears whole or not at all."""
    libs = home / "libs"
    if (libs / JARS_COMPLETE).exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaJarsUnavailable(f"mvn is not installed: {what} comes from Maven Central")
    home.mkdir(parents=True, exist_ok=True)
    (home / "pom.xml").write_text(pom)
    staging = Path(tempfile.mkdtemp(prefix="libs-", dir=home))
    argv = [mvn, "-B", "-q", "-f", str(home / "pom.xml"), "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
    if include_artifact_ids:
        argv.append("-DincludeArtifactIds=" + ",".join(include_artifact_ids))
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=MVN_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise KafkaJarsUnavailable(f"mvn did not resolve {what} in {MVN_TIMEOUT_S} s") from exc
    if done.returncode != 0 or not any(staging.glob(wanted_jar)):
        shutil.rmtree(staging, ignore_errors=True)
        raise KafkaJarsUnavailable(f"mvn could not fetch {what}: {(done.stdout + done.stderr)[-2000:]}")
    (staging / JARS_COMPLETE).write_text(f"{what}\n")
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    return libs


def fetch_jars(version: str = KAFKA_VERSION) -> Path:
    """The directory of Kafka `version`'s jars, fetched with mvn the first time."""
    home = cache_dir(version)
    libs = maven_jars(home, POM.format(version=version, log4j_slf4j=LOG4J_SLF4J_VERSION),
                      f"kafka_2.13-{version}.jar", what=f"Apache Kafka {version}")
    (home / "log4j2-server.properties").write_text(LOG4J_SERVER)
    (home / "log4j2-tools.properties").write_text(LOG4J_TOOLS)
    return libs


def installed_spark() -> tuple[str, str]:
    """The installed PySpark's version and the Scala binary version of its jars (`2.13`)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    found = next(jars.glob("spark-core_*.jar"), None)
    if found is None:
        raise KafkaJarsUnavailable(f"no spark-core jar in {jars}")
    return pyspark.__version__, found.name.removeprefix("spark-core_").split("-", 1)[0]


def spark_kafka_connector_cache(spark_version: str, scala_version: str) -> Path:
    return cache_root() / f"spark-sql-kafka-{scala_version}-{spark_version}"


def spark_connector_versions(spark_version: str) -> list[str]:
    """What Maven is asked for, in order: Spark's own version, then the first release of the previous
    minor version (for a PySpark newer than Maven Central's connector; Spark keeps its data source
    API within a major version)."""
    major, minor = (int(part) for part in spark_version.split(".")[:2])
    return [spark_version] + ([f"{major}.{minor - 1}.0"] if minor > 0 else [])


def fetch_spark_kafka_jars(spark_version: str | None = None, scala_version: str | None = None) -> Path:
    """The directory of Spark's Kafka connector (`spark-sql-kafka-0-10`) for the installed PySpark
    (or `spark_version`/`scala_version`) with the runtime jars PySpark does not ship: Spark's Kafka
    token provider, kafka-clients and commons-pool2 (`spark_connector_versions` says which release)."""
    if spark_version is None or scala_version is None:
        installed, scala = installed_spark()
        spark_version, scala_version = spark_version or installed, scala_version or scala
    failures = []
    for versions in spark_connector_versions(spark_version):
        pom = SPARK_KAFKA_POM.format(scala=scala_version, versions=versions)
        try:
            return maven_jars(spark_kafka_connector_cache(spark_version, scala_version), pom,
                              f"spark-sql-kafka-0-10_{scala_version}-*.jar",
                              include_artifact_ids=SPARK_KAFKA_ARTIFACTS,
                              what=f"Spark's Kafka connector {versions} (Scala {scala_version})")
        except KafkaJarsUnavailable as exc:
            failures.append(str(exc))
    raise KafkaJarsUnavailable("\n".join(failures))


def spark_connector_version(libs: Path) -> str:
    """The connector's version in a `fetch_spark_kafka_jars` directory."""
    jar = next(libs.glob("spark-sql-kafka-0-10_*.jar"))
    return jar.stem.split("_", 1)[1].split("-", 1)[1]


def spark_kafka_jar_paths(libs: Path) -> list[str]:
    """The jars of `fetch_spark_kafka_jars`'s directory, as `spark.jars` (comma-joined) takes them."""
    return sorted(str(jar) for jar in libs.glob("*.jar"))


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise KafkaJarsUnavailable("no java on PATH: Apache Kafka 4 needs Java 17 or newer")
    return found


def java_argv(main_class: str, args: list[str], *, version: str = KAFKA_VERSION, heap: str = TOOL_HEAP,
              server: bool = False, jvm_options: list[str] | None = None) -> list[str]:
    """The command line that runs `main_class` of Kafka `version` (its jars fetched first)."""
    libs = fetch_jars(version)
    log_config = libs.parent / ("log4j2-server.properties" if server else "log4j2-tools.properties")
    return [java_binary(), f"-Xmx{heap}", *(SERVER_JVM_OPTIONS if server else []), *(jvm_options or []),
            f"-Dlog4j2.configurationFile={log_config}", "-cp", str(libs / "*"), main_class, *args]


# --------------------------------------------------------------------------------------------- tools

@dataclass(frozen=True)
class ToolResult:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def check(self) -> ToolResult:
        if self.returncode != 0:
            raise RuntimeError(f"{self.argv[-1] if self.argv else 'tool'} exited {self.returncode}:\n"
                               f"{self.stdout[-2000:]}\n{self.stderr[-3000:]}")
        return self


def run_tool(tool: str, args: list[str], *, input_text: str | None = None, timeout_s: float = 120.0,
             version: str = KAFKA_VERSION, heap: str = TOOL_HEAP) -> ToolResult:
    """Runs Kafka's `tool` (a name of `TOOLS` or a main class) with `args` and returns its output.
    `input_text` is its standard input (closed at once when None)."""
    argv = java_argv(TOOLS.get(tool, tool), args, version=version, heap=heap)
    done = subprocess.run(argv, input=input_text if input_text is not None else "", capture_output=True,
                          text=True, timeout=timeout_s)
    return ToolResult(argv, done.returncode, done.stdout, done.stderr)


# --------------------------------------------------------------------------------------------- brokers

def random_cluster_id() -> str:
    """A cluster id as Kafka writes one: 16 random bytes in URL-safe base64 without padding, never
    starting with '-' (a command line would take it for an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass
class KafkaNode:
    node_id: int
    broker_port: int
    controller_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"


class KafkaPeer:
    """`brokers` Apache Kafka nodes in KRaft combined mode on `host`, under `base_dir`."""

    def __init__(self, base_dir: Path | str, *, brokers: int = 3, version: str = KAFKA_VERSION,
                 host: str = "127.0.0.1", heap: str = BROKER_HEAP, config: dict[str, object] | None = None):
        self.base_dir = Path(base_dir).resolve()
        self.version = version
        self.host = host
        self.heap = heap
        self.config = {str(key): str(value) for key, value in (config or {}).items()}
        self.nodes = [KafkaNode(index + 1, free_port(host), free_port(host), self.base_dir / f"kafka-{index + 1}")
                      for index in range(brokers)]
        self.cluster_id = random_cluster_id()

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{node.broker_port}" for node in self.nodes)

    def node_config(self, node: KafkaNode) -> dict[str, str]:
        replication = min(3, len(self.nodes))
        voters = ",".join(f"{other.node_id}@{self.host}:{other.controller_port}" for other in self.nodes)
        return {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{self.host}:{node.broker_port},CONTROLLER://{self.host}:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{node.broker_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.data_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": str(replication),
            "transaction.state.log.replication.factor": str(replication),
            "transaction.state.log.min.isr": str(min(2, replication)),
            "share.coordinator.state.topic.replication.factor": str(replication),
            "share.coordinator.state.topic.min.isr": str(min(2, replication)),
            "group.initial.rebalance.delay.ms": "0",
            **self.config,
        }

    def write_configs(self) -> None:
        for node in self.nodes:
            node.directory.mkdir(parents=True, exist_ok=True)
            node.config_path.write_text("".join(f"{key}={value}\n" for key, value in self.node_config(node).items()))

    def format_storage(self, timeout_s: float = 120.0) -> None:
        """`StorageTool format` of every node's log dir with the cluster id, the formats in parallel."""
        formats = [subprocess.Popen(java_argv(STORAGE_TOOL, ["format", "--cluster-id", self.cluster_id, "--config",
                                                             str(node.config_path), "--ignore-formatted"],
                                              version=self.version),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True)
                   for node in self.nodes]
        failures = []
        for node, process in zip(self.nodes, formats, strict=True):
            try:
                output, _ = process.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                output, _ = process.communicate()
            if process.returncode != 0:
                failures.append(f"node {node.node_id}: exit {process.returncode}\n{output[-2000:]}")
        if failures:
            raise RuntimeError("formatting Kafka's storage failed:\n" + "\n".join(failures))

    def start(self, timeout_s: float = 120.0) -> KafkaPeer:
        """Formats, starts every node and waits until each says it started and takes connections."""
        try:
            self.write_configs()
            self.format_storage(timeout_s)
            for node in self.nodes:
                argv = java_argv(KAFKA_SERVER, [str(node.config_path)], version=self.version, heap=self.heap,
                                 server=True, jvm_options=[f"-Xms{self.heap}"])
                node.process = start_process(argv, node.log_path)
            for node in self.nodes:
                wait_until(lambda node=node: self._started(node), timeout_s, 0.2,
                           message=lambda node=node: f"Kafka node {node.node_id} to start; its log:\n"
                                                     f"{log_tail(node.log_path, 40)}")
        except BaseException:
            self.stop(timeout_s=0)
            raise
        return self

    def _started(self, node: KafkaNode) -> bool:
        if node.process is not None and node.process.poll() is not None:
            raise RuntimeError(f"Kafka node {node.node_id} exited {node.process.returncode}:\n"
                               f"{log_tail(node.log_path, 60)}")
        if SERVER_STARTED not in node.log_path.read_text(errors="replace"):
            return False
        with socket.socket() as sock:
            sock.settimeout(1.0)
            return sock.connect_ex((self.host, node.broker_port)) == 0

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM to every node at once (in KRaft the last ones cannot shut down cleanly while the
        quorum is going away one by one), then SIGKILL to any still running after `timeout_s`."""
        running = [node.process for node in self.nodes if node.process is not None and node.process.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for process in running:
            stop_process(process, timeout_s=max(0.0, deadline - time.monotonic()))

    def dump_logs(self, lines: int = 40) -> str:
        return "\n".join(f"----- kafka-{node.node_id} ({node.log_path})\n{log_tail(node.log_path, lines)}"
                         for node in self.nodes)

    def __enter__(self) -> KafkaPeer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------- command line

def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default=KAFKA_VERSION, help="Apache Kafka's version (default %(default)s)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="fetch the jars into the cache and print their directory")
    spark_jars = commands.add_parser("fetch-spark-kafka",
                                     help="fetch Spark's Kafka connector for the installed PySpark and print its jars")
    spark_jars.add_argument("--comma", action="store_true", help="print them comma-joined, as --jars takes them")
    up = commands.add_parser("up", help="run KRaft brokers until interrupted")
    up.add_argument("--dir", required=True, type=Path)
    up.add_argument("--brokers", type=int, default=3)
    tool = commands.add_parser("tool", help="run a Kafka tool: " + ", ".join(TOOLS) + ", or a main class")
    tool.add_argument("tool")
    tool.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            print(fetch_jars(args.version))
        elif args.command == "fetch-spark-kafka":
            jars = spark_kafka_jar_paths(fetch_spark_kafka_jars())
            print(",".join(jars) if args.comma else "\n".join(jars))
        elif args.command == "up":
            signal.signal(signal.SIGTERM, _interrupt)
            with KafkaPeer(args.dir, brokers=args.brokers, version=args.version) as peer:
                print(f"Apache Kafka {args.version}: {len(peer.nodes)} KRaft nodes, bootstrap {peer.bootstrap_servers}",
                      flush=True)
                try:
                    signal.pause()
                except KeyboardInterrupt:
                    pass
        else:
            tool_args = args.args[1:] if args.args[:1] == ["--"] else args.args
            argv = java_argv(TOOLS.get(args.tool, args.tool), tool_args, version=args.version)
            return subprocess.run(argv).returncode
    except KafkaJarsUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
