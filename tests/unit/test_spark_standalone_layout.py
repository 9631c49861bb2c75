"""The Spark standalone launcher's layout and commands, and `odradek dev spark` without a cluster
(pure: no JVM is started)."""

from __future__ import annotations

import io
import json
from argparse import Namespace

from services.clients.spark.session import cluster_conf, is_local_master, package_zip
from services.devcluster import spark_cli
from services.devcluster.spark_standalone import (
    MASTER_CLASS,
    WORKER_CLASS,
    SparkStandalone,
    running_pids,
    spark_home,
    stop_detached,
)


def test_a_master_and_workers_on_loopback_with_their_own_ports_and_directories(tmp_path) -> None:
    cluster = SparkStandalone(tmp_path, workers=2, worker_cores=1, worker_memory="1g")
    assert cluster.master_url == f"spark://127.0.0.1:{cluster.master_port}"
    assert cluster.master_port != cluster.web_ui_port
    home = spark_home()
    master = cluster._command(home, cluster.master)
    assert master[:2] == [str(home / "bin" / "spark-class"), MASTER_CLASS]
    assert master[master.index("--host") + 1] == "127.0.0.1"
    worker = cluster._command(home, cluster.workers[1])
    assert worker[1] == WORKER_CLASS and worker[-1] == cluster.master_url
    assert worker[worker.index("--cores") + 1] == "1" and worker[worker.index("--memory") + 1] == "1g"
    assert worker[worker.index("--work-dir") + 1] == str(tmp_path.resolve() / "worker-2" / "work")
    env = cluster._env(home, cluster.workers[0])
    assert env["SPARK_LOG_DIR"] == str(tmp_path.resolve() / "worker-1")
    assert env["SPARK_CONF_DIR"] == str(tmp_path.resolve() / "conf")


def test_nothing_recorded_is_nothing_to_stop(tmp_path) -> None:
    assert running_pids(tmp_path) == {}
    (tmp_path / "spark.json").write_text(json.dumps({"pids": {"master": 1}}))  # pid 1 runs no Spark class
    assert running_pids(tmp_path) == {}
    assert stop_detached(tmp_path) == []
    out = io.StringIO()
    assert spark_cli.run_status(Namespace(dir=str(tmp_path)), out) == 1
    assert spark_cli.run_down(Namespace(dir=str(tmp_path)), out) == 0
    assert "No Spark cluster was running." in out.getvalue()


def test_a_cluster_session_ships_odradek_and_answers_from_loopback(tmp_path) -> None:
    assert is_local_master("local[2]") and is_local_master("local") and not is_local_master("spark://h:7077")
    assert cluster_conf("spark://127.0.0.1:7077")["spark.driver.host"] == "127.0.0.1"
    assert "spark.driver.host" not in cluster_conf("spark://spark-master:7077")
    # a cluster on loopback shares the driver's cores: its executors and timeouts are set for that
    assert cluster_conf("spark://127.0.0.1:7077")["spark.network.timeout"] == "600s"
    assert cluster_conf("spark://spark-master:7077") == {"spark.executor.extraJavaOptions": ""}
    import zipfile

    names = zipfile.ZipFile(package_zip(directory=tmp_path)).namelist()
    assert "services/clients/spark/source.py" in names and "odradek/spark.py" in names
    assert not any("__pycache__" in name for name in names)
