"""`meta.properties`: which broker and cluster a log directory belongs to; only this module touches it.

Layout (Java properties text, as Kafka's BrokerMetadataCheckpoint writes it):

    #
    #<date written>
    version=0
    broker.id=<int>
    cluster.id=<string>        (absent until the cluster id is known)

Written atomically (tmp file, fsync, rename, fsync dir). `check_and_write_meta_properties`, run
by the broker at start-up with the cluster id of ZooKeeper's `/cluster/id` before any log is
loaded, refuses to start a broker whose directories belong to another broker id or another
cluster, or disagree with each other (as Kafka's InconsistentBrokerIdException and
InconsistentClusterIdException do), and writes the file into every directory that lacks it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from services.broker.log.files import META_PROPERTIES_FILE, atomic_write
from services.common.config import parse_properties
from services.common.errors import Errors, StartupRefusedError


class InconsistentBrokerMetadataError(StartupRefusedError):
    """Log directories that belong to another broker id or cluster."""


@dataclass(frozen=True)
class MetaProperties:
    broker_id: int | None
    cluster_id: str | None = None
    version: int = 0


def meta_properties_path(log_dir: str) -> str:
    return os.path.join(log_dir, META_PROPERTIES_FILE)


def read_meta_properties(log_dir: str) -> MetaProperties | None:
    """The directory's meta.properties, or None if it has none."""
    try:
        with open(meta_properties_path(log_dir), encoding="utf-8") as f:
            props = parse_properties(f.read(), source=meta_properties_path(log_dir))
    except FileNotFoundError:
        return None
    version = int(props.get("version", "0"))
    if version != 0:
        raise InconsistentBrokerMetadataError(
            f"unsupported meta.properties version {version} in {log_dir}", error=Errors.UNKNOWN_SERVER_ERROR)
    broker_id = props.get("broker.id")
    return MetaProperties(int(broker_id) if broker_id is not None else None, props.get("cluster.id"), version)


def write_meta_properties(log_dir: str, meta: MetaProperties) -> None:
    lines = ["#", "#" + time.strftime("%a %b %d %H:%M:%S %Z %Y"), f"version={meta.version}"]
    if meta.broker_id is not None:
        lines.append(f"broker.id={meta.broker_id}")
    if meta.cluster_id is not None:
        lines.append(f"cluster.id={meta.cluster_id}")
    atomic_write(meta_properties_path(log_dir), ("\n".join(lines) + "\n").encode())


def check_and_write_meta_properties(log_dirs, broker_id: int,
                                    cluster_id: str | None = None) -> MetaProperties:
    """Checks every dir's meta.properties against `broker_id` / `cluster_id` and writes missing ones."""
    found = {d: read_meta_properties(d) for d in log_dirs}
    for log_dir, meta in found.items():
        if meta is None:
            continue
        if meta.broker_id is not None and meta.broker_id != broker_id:
            raise InconsistentBrokerMetadataError(
                f"Configured broker.id {broker_id} does not match broker.id {meta.broker_id} stored in "
                f"{meta_properties_path(log_dir)}. If this data was moved from broker {meta.broker_id}, "
                f"configure broker.id={meta.broker_id}; a new broker needs empty log.dirs.")
        if meta.cluster_id is not None and cluster_id is not None and meta.cluster_id != cluster_id:
            raise InconsistentBrokerMetadataError(
                f"The cluster id {cluster_id} in ZooKeeper does not match cluster.id {meta.cluster_id} "
                f"stored in {meta_properties_path(log_dir)}. The broker is joining the wrong cluster "
                "(check zookeeper.connect), or the log dir belongs to another cluster.",
                error=Errors.INCONSISTENT_CLUSTER_ID)
    stored_cluster_ids = {m.cluster_id for m in found.values() if m is not None and m.cluster_id}
    if len(stored_cluster_ids) > 1:
        raise InconsistentBrokerMetadataError(
            f"The log dirs {sorted(log_dirs)} belong to different clusters {sorted(stored_cluster_ids)}: "
            "they were shared by brokers of several clusters or copied from them in part.",
            error=Errors.INCONSISTENT_CLUSTER_ID)
    effective = MetaProperties(broker_id, cluster_id or next(iter(stored_cluster_ids), None))
    for log_dir, meta in found.items():
        if meta != effective:
            write_meta_properties(log_dir, effective)
    return effective
