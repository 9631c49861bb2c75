"""SparkSessions for Odradek's jobs, tools and tests: `local_session()` builds one whose Python
workers run the driver's interpreter (`PYSPARK_PYTHON`) and talk to the JVM over Unix domain
sockets (a Python data source query starts its tasks about 50 ms sooner than over loopback TCP)
and whose own logs are quiet (errors only, through `log4j2.properties` beside this module); its
JVM runs from `driver_spark_home()`, so the driver's own Python workers import the installed
PySpark. Its callers register the `odradek` format (`odradek.spark.register`).

`job_session(app_name, master)` is `local_session` for a `local[...]` master; for a cluster's
(`spark://host:port`) it also ships Odradek's Python packages to the executors: a zip of
`odradek` and `services` (`package_zip`, built from the modules this driver imports) added with
`SparkContext.addPyFile`, so the executors' Python workers import the data source and the sinks
from it whatever the machine they run on. Their interpreter is the driver's (`PYSPARK_PYTHON`,
which the driver sends with every task), so that Python and its dependencies (pyarrow, grpcio,
httpx, ...) must be at the same path on every worker: a shared install or the same image. A
cluster on loopback gets the settings of `LOOPBACK_CLUSTER_CONF`."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")
QUIET_JAVA_OPTIONS = f"-Dlog4j2.configurationFile=file:{LOG4J2_PROPERTIES}"
DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": QUIET_JAVA_OPTIONS,
    "spark.executor.extraJavaOptions": QUIET_JAVA_OPTIONS,
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.python.unix.domain.socket.enabled": "true",
}
SHIPPED_PACKAGES = ("odradek", "services")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
# A cluster on loopback runs its master, workers, executors and their Python workers on the
# driver's machine, a few cores for them all: executors of 512 MiB whose JVMs compile with C1 only
# and collect with the serial collector (less CPU while they start, which is most of a small job's
# time), and heartbeats and RPCs that may wait for a busy machine (Spark's defaults, 10 s and
# 120 s, take an executor for lost when its JVM only waited for a core).
LOOPBACK_CLUSTER_CONF = {
    "spark.executor.memory": "512m",
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.executor.heartbeatInterval": "30s",
    "spark.network.timeout": "600s",
}


def driver_spark_home() -> Path:
    """A Spark home for the driver's JVM: the installed PySpark's `bin/` and `jars/`, linked from a
    directory of their own, without its `python/lib/pyspark.zip`. Spark puts that zip first on its
    Python workers' path, and a worker importing PySpark from it compiles every module it imports
    (the zip holds no bytecode): three times as long as from the installed package, seconds on a
    busy machine, where the driver's own Python workers (a Python data source's planning, its
    streaming source, a sink's commit) must connect back to the JVM within the 10 s Spark allows.
    Without the zip they import the installed PySpark."""
    import pyspark

    pyspark_dir = Path(pyspark.__file__).resolve().parent
    digest = hashlib.sha256(str(pyspark_dir).encode()).hexdigest()[:12]
    home = Path(tempfile.gettempdir()) / f"odradek-spark-home-{pyspark.__version__}-{digest}"
    if not home.is_dir():
        staging = Path(tempfile.mkdtemp(prefix=home.name + ".", dir=home.parent))
        for name in ("bin", "jars"):
            (staging / name).symlink_to(pyspark_dir / name, target_is_directory=True)
        try:
            staging.rename(home)
        except OSError:  # made meanwhile by another driver
            shutil.rmtree(staging, ignore_errors=True)
    return home


def local_session(app_name: str = "odradek", master: str = "local[2]", conf: dict[str, str] | None = None) -> Any:
    """A SparkSession (`getOrCreate`) with the settings above, `conf` taking precedence; its JVM
    runs from `driver_spark_home()` unless SPARK_HOME names another Spark."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_HOME", str(driver_spark_home()))
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def package_zip(packages: tuple[str, ...] = SHIPPED_PACKAGES, directory: Path | None = None) -> Path:
    """A zip of the Python sources of `packages` (top-level package names, found where this
    interpreter imports them from), for `addPyFile`."""
    directory = Path(directory or tempfile.mkdtemp(prefix="odradek-pyfiles-"))
    target = directory / "odradek-packages.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in packages:
            spec = importlib.util.find_spec(package)
            if spec is None or not spec.submodule_search_locations:
                raise ModuleNotFoundError(f"no package {package!r} to ship to the executors", name=package)
            root = Path(next(iter(spec.submodule_search_locations)))
            for source in sorted(root.rglob("*.py*")):
                if source.suffix in (".py", ".pyi") and "__pycache__" not in source.parts:
                    archive.write(source, Path(package) / source.relative_to(root))
    return target


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def cluster_conf(master: str) -> dict[str, str]:
    """What a driver on a cluster's master sets: the executors log at Spark's default level into
    their workers' directories. A master on loopback is answered from loopback (the driver
    otherwise advertises the machine's first address), and is a cluster sharing this machine's
    cores with its driver (`LOOPBACK_CLUSTER_CONF`)."""
    conf = {"spark.executor.extraJavaOptions": ""}
    host = urlparse(master).hostname or ""
    if host in LOOPBACK_HOSTS:
        conf.update({"spark.driver.host": host, "spark.driver.bindAddress": host, **LOOPBACK_CLUSTER_CONF})
    return conf


def job_session(app_name: str, master: str = "local[2]", conf: dict[str, str] | None = None) -> Any:
    """`local_session`, and on a cluster's master Odradek's packages shipped to its executors."""
    if is_local_master(master):
        return local_session(app_name, master=master, conf=conf)
    spark = local_session(app_name, master=master, conf={**cluster_conf(master), **(conf or {})})
    spark.sparkContext.addPyFile(str(package_zip()))
    return spark
