"""The Kafka error of a whole failed gRPC call: an `ErrorDetail` (code, Kafka's name, message)
serialized into the call's trailing metadata under `odradek-error-bin`. Servers write it with
`error_detail_metadata`; the clients' transport reads it back as the same `KafkaError`."""

from __future__ import annotations

from services.common.errors import Errors
from services.common.pb.odradek.common.v1 import common_pb2

ERROR_DETAIL_KEY = "odradek-error-bin"


def error_detail_metadata(error: Errors, message: str) -> tuple[tuple[str, bytes], ...]:
    """Trailing metadata carrying `error` and `message` for a call that fails as a whole."""
    detail = common_pb2.ErrorDetail(error_code=int(error), error_name=error.name, error_message=message)
    return ((ERROR_DETAIL_KEY, detail.SerializeToString()),)
