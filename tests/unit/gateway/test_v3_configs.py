"""REST Proxy v3's config resources without a cluster: the shapes of topic and broker configs, the
bodies of a change, and the Allow of a 405 among routers the app includes."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest

from services.clients.admin_types import ConfigEntry, ConfigSynonym
from services.gateway.app import create_app
from services.gateway.config import GatewayConfig
from services.gateway.errors import RestError
from services.gateway.routes.v3_configs import _alterations, _update_value, topic_resource
from services.gateway.routes.v3_resources import Links

AT = Links(SimpleNamespace(base_url="http://gw:8080"), "c-1")


def test_a_topic_config_is_shaped_as_rest_proxy_shapes_it_and_a_secret_stays_hidden():
    entry = ConfigEntry("retention.ms", "1000", 1, synonyms=(ConfigSynonym("retention.ms", "1000", 1),
                                                            ConfigSynonym("log.retention.ms", "5", 5)))
    data = topic_resource("t").config_data(AT, entry)
    assert data == {
        "kind": "KafkaTopicConfig",
        "metadata": {"self": "http://gw:8080/v3/clusters/c-1/topics/t/configs/retention.ms",
                     "resource_name": "crn:///kafka=c-1/topic=t/config=retention.ms"},
        "cluster_id": "c-1", "topic_name": "t", "name": "retention.ms", "value": "1000", "is_default": False,
        "is_read_only": False, "is_sensitive": False, "source": "DYNAMIC_TOPIC_CONFIG",
        "synonyms": [{"name": "retention.ms", "value": "1000", "source": "DYNAMIC_TOPIC_CONFIG"},
                     {"name": "log.retention.ms", "value": "5", "source": "DEFAULT_CONFIG"}]}
    secret = ConfigEntry("ssl.key.password", "hunter2", 4, is_sensitive=True,
                         synonyms=(ConfigSynonym("ssl.key.password", "hunter2", 4),))
    hidden = topic_resource("t").config_data(AT, secret)
    assert hidden["value"] is None and hidden["synonyms"][0]["value"] is None


def test_a_batch_of_changes_sets_and_resets():
    body = {"data": [{"name": "a", "value": "1"}, {"name": "b", "value": "2", "operation": "SET"},
                     {"name": "c", "operation": "DELETE"}, {"name": "d", "value": "ignored", "operation": "DELETE"}],
            "validate_only": True}
    assert _alterations(body) == ({"a": "1", "b": "2", "c": None, "d": None}, True)
    assert _alterations({"data": []}) == ({}, False)
    assert _update_value({"value": "7"}) == "7" and _update_value({"value": None}) is None


@pytest.mark.parametrize("body", [[], {"data": {}}, {"data": [1]}, {"data": [{"value": "1"}]},
                                  {"data": [{"name": "a", "value": 1}]}, {"data": [{"name": "a", "operation": "SET"}]},
                                  {"data": [{"name": "a", "value": "1", "operation": "set"}]},
                                  {"data": [{"name": "a", "value": "1"}, {"name": "a", "operation": "DELETE"}]},
                                  {"data": [], "validate_only": 1}])
def test_a_bad_batch_is_400(body):
    with pytest.raises(RestError) as refused:
        _alterations(body)
    assert (refused.value.status, refused.value.error_code) == (400, 400)


def test_a_405_names_every_method_of_the_path_across_included_routers():
    from starlette.testclient import TestClient  # its import warns of httpx; the test needs only one call

    app = create_app(GatewayConfig.load({"bootstrap.servers": "127.0.0.1:1"}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        client = TestClient(app)
    answers = {path: client.request("PUT", path) for path in (
        "/v3/clusters/c/topics", "/v3/clusters/c/topics/t", "/v3/clusters/c/topics/t/configs:alter")}
    assert {path: (a.status_code, a.headers["allow"], a.json()["error_code"]) for path, a in answers.items()} == {
        "/v3/clusters/c/topics": (405, "GET, POST", 405),
        "/v3/clusters/c/topics/t": (405, "DELETE, GET, PATCH", 405),
        "/v3/clusters/c/topics/t/configs:alter": (405, "POST", 405)}
