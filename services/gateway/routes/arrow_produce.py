"""`POST /v3/clusters/{cluster_id}/records` with an Arrow IPC stream body: produce of many records at once."""

from fastapi import APIRouter

router = APIRouter(tags=["v3"])
