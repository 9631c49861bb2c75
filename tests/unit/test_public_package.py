"""The public package `odradek`: its names are the clients' (`services.clients.api`), imported on
first use, so `import odradek` imports neither the clients nor PySpark; `odradek.errors` holds every
exception the clients export; `odradek.legacy` the 0.8 consumer's names; `odradek.spark` the data
source and its registration."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import odradek
import odradek.errors
import odradek.legacy
from services.clients import api, consumer, producer, zk_consumer
from services.common.errors import KafkaError
from tests.deploy_support import REPO_ROOT


def test_import_odradek_imports_neither_the_clients_nor_pyspark():
    script = ("import json, sys, odradek; before = sorted(sys.modules); from odradek import Producer; "
              "print(json.dumps([before, sorted(sys.modules)]))")
    before, after = json.loads(subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, check=True,
                                              capture_output=True, text=True).stdout)
    assert not [name for name in before if name.startswith(("services", "pyspark", "grpc"))]
    assert "services.clients.producer" in after and not [name for name in after if name.startswith("pyspark")]


def test_every_client_name_is_odradeks():
    assert odradek.__all__ == api.__all__
    for name in api.__all__:
        assert getattr(odradek, name) is getattr(api, name)
    namespace: dict = {}
    exec("from odradek import *", namespace)
    assert {name for name in namespace if name != "__builtins__"} == set(api.__all__)
    assert set(api.__all__) <= set(dir(odradek))
    with pytest.raises(AttributeError, match="no attribute 'ZookeeperConsumerConnector'"):
        odradek.ZookeeperConsumerConnector  # noqa: B018


def test_odradek_errors_holds_every_exception_the_clients_export_or_define():
    exported = {getattr(module, name) for module in (consumer, producer) for name in module.__all__}
    defined = {item for module in (consumer.errors, producer.errors) for item in vars(module).values()
               if isinstance(item, type) and item.__module__ == module.__name__}
    exceptions = {item for item in exported | defined if isinstance(item, type) and issubclass(item, Exception)}
    assert exceptions <= {getattr(odradek.errors, name) for name in odradek.errors.__all__}
    assert odradek.errors.Errors.UNKNOWN_TOPIC_OR_PARTITION == 3 and odradek.errors.KafkaError is KafkaError


def test_odradek_legacy_is_the_zookeeper_consumer():
    assert odradek.legacy.__all__ == zk_consumer.__all__
    assert all(getattr(odradek.legacy, name) is getattr(zk_consumer, name) for name in zk_consumer.__all__)


def test_odradek_spark_is_the_data_source_and_its_registration():
    pytest.importorskip("pyspark")
    import odradek.spark

    assert odradek.spark.FORMAT == odradek.spark.OdradekDataSource.name() == "odradek"

    class Session:
        registered: list = []

        class sparkContext:  # noqa: N801 - SparkSession's attribute
            defaultParallelism = 3

        class dataSource:  # noqa: N801 - SparkSession's attribute
            @staticmethod
            def register(source):
                Session.registered.append(source)

    odradek.spark.register(Session)
    [source] = Session.registered
    assert issubclass(source, odradek.spark.OdradekDataSource) and source.default_parallelism == 3
