"""`/log_dir_event_notification` znodes: Kafka's JSON, paths and sequence numbers."""

from __future__ import annotations

import pytest

from services.common.zk.errors import ZnodeFormatError
from services.common.zk.log_dir_event import (
    decode_log_dir_event,
    encode_log_dir_event,
    log_dir_event_path,
    sequence_number,
)


def test_kafkas_json_round_trips():
    assert encode_log_dir_event(3) == b'{"version":1,"broker":3,"event":1}'
    assert decode_log_dir_event(b'{"version":1,"broker":3,"event":1}') == 3


def test_paths_and_sequence_numbers():
    assert log_dir_event_path() == "/log_dir_event_notification/log_dir_event_"
    assert sequence_number("/log_dir_event_notification/log_dir_event_0000000007") == "0000000007"


@pytest.mark.parametrize("data", [b"", b"{}", b'{"version":1,"broker":"x","event":1}',
                                  b'{"version":1,"broker":1,"event":2}'])
def test_malformed_notifications_are_refused(data):
    with pytest.raises(ZnodeFormatError):
        decode_log_dir_event(data)
