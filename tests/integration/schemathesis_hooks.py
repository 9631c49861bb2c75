"""Schemathesis hooks of the gateway's fuzzing: Arrow IPC bodies are generated as bytes, and a
generated topic creation or partition count is kept small, since it creates real partitions on the
test's one broker."""

from typing import Any

import schemathesis

schemathesis.serializer.alias("application/vnd.apache.arrow.stream", "application/octet-stream")

# A count above these is still generated; only those the cluster would create are lowered to them.
# Counts past the controller's limit of new partitions in a request (POLICY_VIOLATION) or outside
# the schema are sent as generated, so the refusals are still tested.
CREATED_TOPIC_LIMITS = {"partitions_count": 4, "replication_factor": 1}
CREATED_TOPIC_UNTOUCHED_ABOVE = 10_000


def keep_created_topics_small(body: Any) -> None:
    """Lowers a body's schema-valid counts (integers, 3.0 included) that would create a big topic."""
    if not isinstance(body, dict):
        return
    for key, most in CREATED_TOPIC_LIMITS.items():
        count = body.get(key)
        if isinstance(count, bool) or not isinstance(count, int | float) or count != int(count):
            continue
        if most < count <= CREATED_TOPIC_UNTOUCHED_ABOVE:
            body[key] = most


@schemathesis.hook
def before_call(ctx: Any, case: Any, **kwargs: Any) -> None:
    if (case.method.upper(), case.path.rsplit("/", 1)[-1]) in (("POST", "topics"), ("PATCH", "{topic_name}")):
        keep_created_topics_small(case.body)
