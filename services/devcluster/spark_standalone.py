"""A Spark standalone cluster on loopback, run from the installed PySpark: one master and its
workers, each a JVM of its own (`bin/spark-class org.apache.spark.deploy.master.Master` and
`...deploy.worker.Worker`), for `odradek dev spark up` and the tests.

`SparkStandalone(base_dir, workers=2)` lays out under `base_dir`:

    spark.json          the master URL, its web UI and every JVM's pid (what `down` stops)
    master/master.log   the master's output
    worker-N/worker.log a worker's output; worker-N/work is its work dir (executors' logs and files)
    local/              Spark's scratch space (`SPARK_LOCAL_DIRS`)
    conf/               `SPARK_CONF_DIR`: spark-defaults.conf (`DAEMON_DEFAULTS`: no REST
                        submission server, which would take the fixed port 6066)

`start()` returns once the master's JSON status (`<web UI>/json/`) lists every worker ALIVE;
`stop()` stops every JVM by its pid (SIGTERM, then SIGKILL). A cluster left running is stopped
later through its `spark.json` with `stop_detached(base_dir)`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from services.devcluster.proc import (
    free_port,
    log_tail,
    pid_alive,
    process_cmdline,
    start_process,
    stop_pid,
    stop_process,
    wait_until,
)

if TYPE_CHECKING:
    from subprocess import Popen

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
STATE_NAME = "spark.json"
# no REST submission server; a worker is lost after 2 minutes without a heartbeat, not Spark's 60 s,
# which a worker's JVM waiting for a core on a busy machine can miss
DAEMON_DEFAULTS = {"spark.master.rest.enabled": "false", "spark.worker.cleanup.enabled": "false",
                   "spark.worker.timeout": "120"}
# the master and workers are small JVMs that mostly wait: C1 only and the serial collector take the
# least CPU while they start
DAEMON_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
ALIVE = "ALIVE"
HOST = "127.0.0.1"


class SparkNotInstalledError(RuntimeError):
    """PySpark (with its `bin/spark-class`) or Java is missing."""


class SparkStartError(RuntimeError):
    """A JVM exited or the workers never registered; the message carries the logs' tails."""


def spark_home() -> Path:
    """The installed PySpark's directory, which is a Spark distribution (`bin/`, `jars/`)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SparkNotInstalledError("PySpark is not installed: pip install 'odradek[spark]'")
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-class").is_file() or not (home / "jars").is_dir():
        raise SparkNotInstalledError(f"{home} has no bin/spark-class and jars/: reinstall PySpark")
    return home


@dataclass
class SparkProcess:
    """One JVM of the cluster: its name (`master`, `worker-1`, ...), directory and process."""

    name: str
    directory: Path
    process: Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.directory / f"{self.name.split('-')[0]}.log"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid


class SparkStandalone:
    """A master and `workers` workers, each with `worker_cores` cores and `worker_memory` memory."""

    def __init__(self, base_dir: Path, workers: int = 2, worker_cores: int = 1, worker_memory: str = "1g",
                 master_port: int | None = None, web_ui_port: int | None = None) -> None:
        self.base_dir = Path(base_dir).resolve()
        self.master_port = master_port or free_port(HOST)
        self.web_ui_port = web_ui_port or free_port(HOST)
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.master = SparkProcess("master", self.base_dir / "master")
        self.workers = [SparkProcess(f"worker-{n}", self.base_dir / f"worker-{n}") for n in range(1, workers + 1)]

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def web_ui_url(self) -> str:
        return f"http://{HOST}:{self.web_ui_port}"

    def processes(self) -> list[SparkProcess]:
        return [self.master, *self.workers]

    def _env(self, home: Path, process: SparkProcess) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "SPARK_HOME": str(home),
            "SPARK_LOG_DIR": str(process.directory),
            "SPARK_LOCAL_DIRS": str(self.base_dir / "local"),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_NO_DAEMONIZE": "1",
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_DAEMON_JAVA_OPTS": DAEMON_JAVA_OPTIONS,
            "SPARK_CONF_DIR": str(self.base_dir / "conf"),
        })
        return env

    def _command(self, home: Path, process: SparkProcess) -> list[str]:
        spark_class = str(home / "bin" / "spark-class")
        if process is self.master:
            return [spark_class, MASTER_CLASS, "--host", HOST, "--port", str(self.master_port),
                    "--webui-port", str(self.web_ui_port)]
        return [spark_class, WORKER_CLASS, "--host", HOST, "--webui-port", "0", "--cores", str(self.worker_cores),
                "--memory", self.worker_memory, "--work-dir", str(process.directory / "work"), self.master_url]

    def master_status(self) -> dict[str, Any] | None:
        """The master's JSON status (workers, applications), None when it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.web_ui_url}/json/", timeout=2) as answer:
                return json.load(answer)
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def alive_workers(self) -> int:
        status = self.master_status() or {}
        return sum(1 for worker in status.get("workers", []) if worker.get("state") == ALIVE)

    def start(self, timeout_s: float = 60.0) -> Self:
        """Starts the master, then the workers, and waits until the master lists them all ALIVE."""
        home = spark_home()
        (self.base_dir / "conf").mkdir(parents=True, exist_ok=True)
        (self.base_dir / "conf" / "spark-defaults.conf").write_text(
            "".join(f"{key} {value}\n" for key, value in DAEMON_DEFAULTS.items()))
        (self.base_dir / "local").mkdir(parents=True, exist_ok=True)
        try:
            self._start_process(home, self.master)
            wait_until(lambda: self._check_running() and self.master_status() is not None, timeout_s,
                       interval_s=0.2, message=lambda: f"the Spark master at {self.web_ui_url}\n{self.logs()}")
            for worker in self.workers:
                self._start_process(home, worker)
            self.wait_for_workers(len(self.workers), timeout_s)
        except BaseException as error:
            self.stop()
            if isinstance(error, TimeoutError):
                raise SparkStartError(str(error)) from None
            raise
        return self

    def start_worker(self, worker: SparkProcess, timeout_s: float = 60.0) -> None:
        """Starts `worker` again (after it was stopped or killed) and waits until it is ALIVE."""
        self._start_process(spark_home(), worker)
        self.wait_for_workers(len(self.workers), timeout_s)

    def wait_for_workers(self, count: int, timeout_s: float) -> None:
        wait_until(lambda: self._check_running() and self.alive_workers() >= count, timeout_s, interval_s=0.2,
                   message=lambda: f"{count} ALIVE worker(s) at {self.web_ui_url}\n{self.logs()}")

    def _start_process(self, home: Path, process: SparkProcess) -> None:
        process.directory.mkdir(parents=True, exist_ok=True)
        process.process = start_process(self._command(home, process), process.log_path,
                                        env=self._env(home, process), cwd=process.directory)
        self.write_state()

    def _check_running(self) -> bool:
        for process in self.processes():
            if process.process is not None and process.process.poll() is not None:
                raise SparkStartError(f"Spark {process.name} (pid {process.pid}) exited with "
                                      f"{process.process.returncode}:\n{log_tail(process.log_path, 40)}")
        return True

    def write_state(self) -> None:
        state = {"master_url": self.master_url, "web_ui_url": self.web_ui_url,
                 "pids": {process.name: process.pid for process in self.processes() if process.pid is not None}}
        path = self.base_dir / STATE_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_name(STATE_NAME + ".tmp").write_text(json.dumps(state, indent=2) + "\n")
        path.with_name(STATE_NAME + ".tmp").replace(path)

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stops the workers (their executors with them), then the master."""
        for process in [*self.workers, self.master]:
            if process.process is not None:
                stop_process(process.process, timeout_s)
                process.process = None
        (self.base_dir / STATE_NAME).unlink(missing_ok=True)

    def logs(self, lines: int = 40) -> str:
        """The tail of every JVM's log and of every executor's stderr, for failure reports."""
        parts = [f"--- {process.name} ({process.log_path}):\n{log_tail(process.log_path, lines)}"
                 for process in self.processes()]
        for worker in self.workers:
            for stderr in sorted((worker.directory / "work").glob("*/*/stderr")):
                parts.append(f"--- executor {stderr.parent.parent.name}/{stderr.parent.name} on {worker.name} "
                             f"({stderr}):\n{log_tail(stderr, lines)}")
        return "\n".join(parts)

    def executor_pids(self, worker: SparkProcess | None = None) -> list[int]:
        """The pids of the executor JVMs the workers (or `worker`) run now: their children."""
        workers = {process.pid for process in ([worker] if worker else self.workers) if process.pid is not None}
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            argv = process_cmdline(int(entry.name)) or []
            if parent in workers and any("CoarseGrainedExecutorBackend" in arg for arg in argv):
                pids.append(int(entry.name))
        return sorted(pids)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def read_state(base_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((Path(base_dir) / STATE_NAME).read_text())
    except (OSError, ValueError):
        return None


def running_pids(base_dir: Path) -> dict[str, int]:
    """The JVMs recorded in `base_dir`'s state that still run a Spark daemon class."""
    state = read_state(base_dir) or {}
    running = {}
    for name, pid in state.get("pids", {}).items():
        argv = process_cmdline(pid) or []
        if pid_alive(pid) and any(arg in (MASTER_CLASS, WORKER_CLASS) for arg in argv):
            running[name] = pid
    return running


def stop_detached(base_dir: Path, timeout_s: float = 15.0) -> list[str]:
    """Stops the JVMs a cluster started from `base_dir` recorded (workers first); their names."""
    pids = running_pids(base_dir)
    order = sorted(pids, key=lambda name: name == "master")
    for name in order:
        stop_pid(pids[name], timeout_s)
    (Path(base_dir) / STATE_NAME).unlink(missing_ok=True)
    return order
