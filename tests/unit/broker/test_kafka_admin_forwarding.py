"""The broker's forwarding of Kafka admin requests to the controller (`ControllerForwarder`) with a
scripted controller: a standby's NOT_CONTROLLER is sent again, to the controller the metadata then
names, for the keys it was answered for; other answers and final errors come back per key; the
controller id Kafka clients are told of."""

from __future__ import annotations

from services.broker.kafka_api.admin import ControllerForwarder, controller_id
from services.broker.metadata_cache import BrokerNode, MetadataCache
from services.clients.admin_requests import delete_topics_request, parse_delete_topics
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.controller.v1 import controller_pb2 as pb

BROKER = BrokerNode(1, "127.0.0.1", 9092, kafka_host="127.0.0.1", kafka_port=19092)


def metadata(controller_port: int | None) -> MetadataCache:
    cache = MetadataCache()
    controller = None if controller_port is None else BrokerNode(1001, "127.0.0.1", controller_port)
    cache.update(controller_id=1001, controller_epoch=1, live_brokers=[BROKER], partition_states=[],
                 controller=controller)
    return cache


class ScriptedPool:
    """Answers each call with the next scripted answer (a response, or a KafkaError to raise)."""

    def __init__(self, answers: list) -> None:
        self.answers = answers
        self.calls: list[tuple[str, str, list[str], int]] = []

    def call(self, target, service, method, request, timeout_ms=None):
        self.calls.append((target, method, list(request.topic_names), request.timeout_ms))
        answer = self.answers.pop(0)
        if isinstance(answer, KafkaError):
            raise answer
        return answer


def deleted(*results: tuple[str, int]) -> pb.DeleteTopicsResponse:
    return pb.DeleteTopicsResponse(responses=[
        pb.DeleteTopicsResponse.DeletableTopicResult(name=name, error_code=code, error_message=f"{name}: {code}")
        for name, code in results])


def forward(forwarder: ControllerForwarder, names: list[str], timeout_ms: int = 5000) -> dict:
    return forwarder.forward("DeleteTopics", names, delete_topics_request, parse_delete_topics, timeout_ms)


def test_keys_a_standby_answered_are_sent_again_and_the_others_come_back():
    pool = ScriptedPool([
        deleted(("a", Errors.NONE), ("b", Errors.NOT_CONTROLLER), ("c", Errors.UNKNOWN_TOPIC_OR_PARTITION)),
        KafkaError("unreachable", error=Errors.NETWORK_EXCEPTION),
        deleted(("b", Errors.NONE))])
    outcomes = forward(ControllerForwarder(metadata(9093), pool, 5000), ["a", "b", "c"])
    assert {name: code for name, (code, _, _) in outcomes.items()} == {
        "a": Errors.NONE, "b": Errors.NONE, "c": Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert outcomes["c"][1] == f"c: {int(Errors.UNKNOWN_TOPIC_OR_PARTITION)}"
    assert [names for _, _, names, _ in pool.calls] == [["a", "b", "c"], ["b"], ["b"]]
    assert all(target == "127.0.0.1:9093" and 0 < timeout <= 5000 for target, _, _, timeout in pool.calls)


def test_a_request_without_a_timeout_lets_the_controller_use_its_default():
    pool = ScriptedPool([deleted(("a", Errors.NONE))])
    forward(ControllerForwarder(metadata(9093), pool, 5000), ["a"], timeout_ms=0)
    assert pool.calls[0][3] == 0


def test_a_final_error_answers_every_key_and_a_missing_controller_times_out():
    pool = ScriptedPool([KafkaError("no such call", error=Errors.UNSUPPORTED_VERSION)])
    outcomes = forward(ControllerForwarder(metadata(9093), pool, 5000), ["a", "b"])
    assert [code for code, _, _ in outcomes.values()] == [Errors.UNSUPPORTED_VERSION] * 2
    outcomes = forward(ControllerForwarder(metadata(None), ScriptedPool([]), 300), ["a"], timeout_ms=300)
    assert outcomes["a"][0] == Errors.REQUEST_TIMED_OUT and "no active controller" in outcomes["a"][1]


def test_kafka_clients_are_told_of_this_broker_as_controller_once_it_is_known():
    assert controller_id(1, metadata(9093).snapshot()) == 1
    assert controller_id(1, metadata(None).snapshot()) == -1
    assert controller_id(2, metadata(9093).snapshot()) == -1  # its own registration not seen yet
