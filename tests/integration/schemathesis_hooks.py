"""Schemathesis hooks of the gateway's fuzzing: Arrow IPC bodies are generated as bytes."""

import schemathesis

schemathesis.serializer.alias("application/vnd.apache.arrow.stream", "application/octet-stream")
