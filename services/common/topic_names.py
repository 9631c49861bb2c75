"""Topic names: Kafka's rules for a legal name (`validate_topic_name`, INVALID_TOPIC_EXCEPTION) and the
internal topics' names, shared by the controller, the coordinator, the brokers, the clients and the
gateway."""

from __future__ import annotations

import re

from services.common.errors import Errors, KafkaError

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC})
MAX_NAME_LENGTH = 249
LEGAL_CHARS = "[a-zA-Z0-9._-]"
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def invalid_topic(message: str) -> KafkaError:
    return KafkaError(message, error=Errors.INVALID_TOPIC_EXCEPTION)


def validate_topic_name(topic: str) -> None:
    """Raise INVALID_TOPIC_EXCEPTION unless `topic` is a legal topic name."""
    if not topic:
        raise invalid_topic("Topic name is illegal, it can't be empty")
    if topic in (".", ".."):
        raise invalid_topic('Topic name cannot be "." or ".."')
    if len(topic) > MAX_NAME_LENGTH:
        raise invalid_topic(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {topic}"
        )
    if not _LEGAL_NAME.fullmatch(topic):
        raise invalid_topic(
            f'Topic name "{topic}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )

