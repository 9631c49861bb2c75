"""Spark tests: one local[2] SparkSession per test module (starting the JVM is what costs), against a
real cluster with a real uvicorn gateway (`tests.integration.conftest.gateway_module_cluster`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.spark import register
from services.clients.spark.session import local_session


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = local_session("odradek-tests", conf={"spark.sql.warehouse.dir": str(warehouse),
                                                   "spark.sql.shuffle.partitions": "2"})
    register(session)
    try:
        yield session
    finally:
        session.stop()
