"""The clickstream jobs' `--connector`: which format and options each connector sets on a Spark
reader or writer, and the command line that picks one."""

from __future__ import annotations

import pytest

from jobs.clickstream.__main__ import build_parser, connector_of
from jobs.clickstream.connector import DEFAULT_BOOTSTRAP_SERVERS, Connector


class RecordingReader:
    """Stands for a DataFrame(Stream)Reader or Writer: records format() and option() calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def format(self, name: str) -> RecordingReader:
        self.calls.append(("format", name))
        return self

    def option(self, key: str, value: str) -> RecordingReader:
        self.calls.append(("option", key, value))
        return self


def test_each_connector_sets_its_format_and_where_the_cluster_is():
    assert Connector.odradek("http://gw:8080").apply(RecordingReader()).calls == [
        ("format", "odradek"), ("option", "gateway", "http://gw:8080")]
    assert Connector.kafka("h:1,h:2").apply(RecordingReader()).calls == [
        ("format", "kafka"), ("option", "kafka.bootstrap.servers", "h:1,h:2")]
    with pytest.raises(ValueError, match="no connector 'pulsar'"):
        Connector.named("pulsar", gateway="http://gw:8080")


@pytest.mark.parametrize("command", ["run", "stream", "backfill"])
def test_the_flag_picks_the_connector(command: str):
    parser = build_parser()
    assert connector_of(parser.parse_args([command])) == Connector.odradek("http://127.0.0.1:8080")
    assert connector_of(parser.parse_args([command, "--connector", "kafka"])) == \
        Connector.kafka(DEFAULT_BOOTSTRAP_SERVERS)
    args = parser.parse_args([command, "--connector", "kafka", "--bootstrap-servers", "b:9", "--jars", "a.jar"])
    assert connector_of(args) == Connector.kafka("b:9") and args.jars == "a.jar"
