"""Log dir event notifications: `/log_dir_event_notification/log_dir_event_<seq>` (persistent
sequential).

A broker whose log directory went offline creates one naming itself; the controller reads them,
asks each named broker (by LeaderAndIsr) which of its replicas are offline, and deletes the
notifications (fenced). Version 1, event 1 (the only event: a log dir failed):

    {"version":1,"broker":3,"event":1}

`<seq>` is ZooKeeper's 10-digit sequence number; readers refer to a notification by it.
"""

from __future__ import annotations

from services.common.zk.codec import dumps, loads_object
from services.common.zk.codec import field as required
from services.common.zk.errors import ZnodeFormatError

LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
SEQUENCE_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1


def log_dir_event_path(sequence_number: str = "") -> str:
    """The notification with this sequence number; with none, the prefix to create sequentially."""
    return f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{SEQUENCE_PREFIX}{sequence_number}"


def sequence_number(name_or_path: str) -> str:
    return name_or_path[name_or_path.rindex(SEQUENCE_PREFIX) + len(SEQUENCE_PREFIX) :]


def encode_log_dir_event(broker_id: int, event: int = LOG_DIR_FAILURE_EVENT) -> bytes:
    return dumps({"version": 1, "broker": broker_id, "event": event})


def decode_log_dir_event(data: bytes | None) -> int:
    """The id of the broker whose log dir failed."""
    what = LOG_DIR_EVENT_NOTIFICATION_PATH
    obj = loads_object(data, what)
    broker_id = required(obj, "broker", what)
    if not isinstance(broker_id, int) or isinstance(broker_id, bool):
        raise ZnodeFormatError(f"{what}: broker {broker_id!r} is not an integer")
    event = obj.get("event", LOG_DIR_FAILURE_EVENT)
    if event != LOG_DIR_FAILURE_EVENT:
        raise ZnodeFormatError(f"{what}: unknown event {event!r}")
    return broker_id
