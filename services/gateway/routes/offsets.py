"""`GET /v3/clusters/{cluster_id}/topics/{topic_name}/offsets`: every partition's offsets in one answer."""

from fastapi import APIRouter

router = APIRouter(tags=["v3"])
