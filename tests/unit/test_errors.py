"""Kafka error codes: names, numbers and flags."""

import pytest

from services.common.errors import (
    ERRORS_BY_CODE,
    ERRORS_BY_NAME,
    Errors,
    KafkaError,
    error_for_code,
    raise_for_code,
)


@pytest.mark.parametrize(
    "name, code, retriable, invalid_metadata",
    [
        ("UNKNOWN_SERVER_ERROR", -1, False, False),
        ("OFFSET_OUT_OF_RANGE", 1, False, False),
        ("CORRUPT_MESSAGE", 2, True, False),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3, True, True),
        ("NOT_LEADER_OR_FOLLOWER", 6, True, True),
        ("MESSAGE_TOO_LARGE", 10, False, False),
        ("STALE_CONTROLLER_EPOCH", 11, False, False),
        ("NOT_COORDINATOR", 16, True, False),
        ("NOT_ENOUGH_REPLICAS", 19, True, False),
        ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", 20, True, False),
        ("INVALID_REQUIRED_ACKS", 21, False, False),
        ("ILLEGAL_GENERATION", 22, False, False),
        ("REBALANCE_IN_PROGRESS", 27, False, False),
        ("TOPIC_ALREADY_EXISTS", 36, False, False),
        ("DUPLICATE_SEQUENCE_NUMBER", 46, False, False),
        ("KAFKA_STORAGE_ERROR", 56, True, True),
        ("FENCED_LEADER_EPOCH", 74, True, True),
        ("MEMBER_ID_REQUIRED", 79, False, False),
        ("FENCED_INSTANCE_ID", 82, False, False),
        ("INVALID_RECORD", 87, False, False),
        ("PRODUCER_FENCED", 90, False, False),
    ],
)
def test_known_codes(name, code, retriable, invalid_metadata):
    spec = ERRORS_BY_NAME[name]
    assert (spec.code, spec.retriable, spec.invalid_metadata) == (code, retriable, invalid_metadata)
    assert error_for_code(code) is spec
    assert Errors[name] == code and Errors(code).name == name


def test_table_is_consistent():
    assert len(ERRORS_BY_CODE) == len(ERRORS_BY_NAME) == len(Errors)
    assert sorted(ERRORS_BY_CODE) == list(range(-1, max(ERRORS_BY_CODE) + 1))
    assert all(spec.retriable for spec in ERRORS_BY_CODE.values() if spec.invalid_metadata)


def test_exceptions_carry_their_code():
    err = KafkaError("partition 3 moved", error=Errors.NOT_LEADER_OR_FOLLOWER)
    assert (err.code, err.retriable, err.invalid_metadata) == (6, True, True)
    assert "NOT_LEADER_OR_FOLLOWER (6): partition 3 moved" == str(err)
    with pytest.raises(KafkaError) as caught:
        raise_for_code(1)
    assert caught.value.error_name == "OFFSET_OUT_OF_RANGE"
    raise_for_code(0)
    assert error_for_code(9999).name == "UNKNOWN_ERROR_CODE_9999"
    assert KafkaError.from_code(9999).code == -1
    with pytest.raises(ValueError):
        KafkaError("x", error=9999)  # a code outside Kafka's table
    assert KafkaError("x", error=Errors.NOT_COORDINATOR).error_name == "NOT_COORDINATOR"
