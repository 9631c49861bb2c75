"""ISR change notifications: `/isr_change_notification/isr_change_<seq>` (persistent sequential).

A partition leader that changed ISRs creates one, listing the partitions; the controller reads
them, refreshes those partitions' state and deletes the notifications (fenced). Version 1:

    {"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":1}]}

`<seq>` is ZooKeeper's 10-digit sequence number; readers refer to a notification by it. A
change of more partitions than one znode should hold is announced in several notifications
(`split_partitions`).
"""

from __future__ import annotations

from collections.abc import Iterable

from services.common.topic_partition import TopicPartition
from services.common.zk import bounded
from services.common.zk.codec import decode_partition_list, dumps, encode_partition_list, loads_object
from services.common.zk.codec import field as required

ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
SEQUENCE_PREFIX = "isr_change_"


def isr_change_path(sequence_number: str = "") -> str:
    """The notification with this sequence number; with none, the prefix to create sequentially."""
    return f"{ISR_CHANGE_NOTIFICATION_PATH}/{SEQUENCE_PREFIX}{sequence_number}"


def sequence_number(name_or_path: str) -> str:
    return name_or_path[name_or_path.rindex(SEQUENCE_PREFIX) + len(SEQUENCE_PREFIX) :]


def encode_isr_change(partitions: Iterable[TopicPartition]) -> bytes:
    return dumps({"version": 1, "partitions": encode_partition_list(partitions)})


def decode_isr_change(data: bytes | None) -> set[TopicPartition]:
    what = ISR_CHANGE_NOTIFICATION_PATH
    return set(decode_partition_list(required(loads_object(data, what), "partitions", what), what))


def split_partitions(partitions: Iterable[TopicPartition], max_bytes: int) -> list[list[TopicPartition]]:
    """The partitions (sorted, without repeats) in consecutive lists whose notifications each
    encode to about `max_bytes` or less; one empty list for none."""
    groups = [
        bounded.Group(tp, 1, len(dumps(encode_partition_list([tp])))) for tp in sorted(set(partitions))
    ]
    return bounded.pack(groups, reserved_ops=0, reserved_bytes=0, max_ops=len(groups) + 1, max_bytes=max_bytes) or [[]]
