"""(to be built)"""

from fastapi import APIRouter

router = APIRouter()
