"""`odradek dev up` starts HTTP gateways (one by default, on 8080, 8180, ...) and prints their URLs."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from services.clients import cli
from services.devcluster.cli import print_endpoints
from services.devcluster.launcher import LocalCluster


def test_one_gateway_by_default_and_as_many_as_asked():
    assert cli.build_parser().parse_args(["dev", "up"]).gateways == 1
    assert cli.build_parser().parse_args(["dev", "up", "--gateways", "0"]).gateways == 0
    assert cli.build_parser().parse_args(["dev", "up", "--gateways", "3"]).gateways == 3


def test_a_negative_count_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as raised:
        cli.main(["dev", "up", "--gateways", "-1"])
    assert raised.value.code == 2 and "must be at least 0" in capsys.readouterr().err


def test_the_endpoints_name_each_gateways_url_and_a_curl_to_try(tmp_path: Path):
    cluster = LocalCluster(tmp_path, brokers=1, controllers=1, gateways=2)
    cluster.status = lambda: {name: {"pid": None, "serving": False, "log": "-", "endpoint": cluster.endpoint(name)}
                              for name in cluster.all_names}
    out = io.StringIO()
    print_endpoints(cluster, out)
    text = out.getvalue()
    assert "HTTP gateway (gateway-1): http://127.0.0.1:8080\n" in text
    assert "HTTP gateway (gateway-2): http://127.0.0.1:8180\n" in text
    assert "Web console: http://127.0.0.1:8080/ui/\n" in text
    assert "curl http://127.0.0.1:8080/topics\n" in text
