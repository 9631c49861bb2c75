"""`odradek consumer-groups`' reset inputs (datetimes, ISO-8601 durations and the CSV reset plan
that `--export` prints and `--from-file` reads) and `--delete-offsets`' report."""

from __future__ import annotations

import argparse
import io
from types import SimpleNamespace

import pytest

from services.clients.cli_groups import (
    GroupCommandError,
    add_parser,
    export_reset_plan,
    parse_datetime_ms,
    parse_duration_ms,
    parse_reset_plan,
    run_delete_offsets,
)
from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.mark.parametrize(("text", "expected_ms"), [
    ("2021-01-01T00:00:00.000", 1609459200000),            # no zone: UTC
    ("2021-01-01T00:00:00.000Z", 1609459200000),
    ("2021-01-01T00:00:00.123Z", 1609459200123),
    ("2021-01-01T02:00:00.000+02:00", 1609459200000),
    ("2021-01-01T02:00:00.000+0200", 1609459200000),
    ("2021-01-01T02:00:00.000+02", 1609459200000),
    ("2020-12-31T19:30:00.000-04:30", 1609459200000),
    ("2024-02-29T12:34:56.789Z", 1709210096789),
])
def test_datetimes_in_every_zone_form(text, expected_ms):
    assert parse_datetime_ms(text) == expected_ms


@pytest.mark.parametrize(("text", "message"), [
    ("2021-01-01", "does not contain a 'T'"),
    ("2021-01-01T00:00:00", "Unparseable date"),          # the milliseconds are required
    ("2021-01-01T00:00:00.00Z", "Unparseable date"),
    ("2021-02-30T00:00:00.000", "Unparseable date"),      # no such day
    ("2021-01-01T24:00:00.000", "Unparseable date"),
    ("2021-01-01T00:00:00.000 UTC", "Unparseable date"),
])
def test_malformed_datetimes(text, message):
    with pytest.raises(ValueError, match=message):
        parse_datetime_ms(text)


@pytest.mark.parametrize(("text", "expected_ms"), [
    ("PT0S", 0),
    ("PT1S", 1000),
    ("PT1.5S", 1500),
    ("PT0,25S", 250),
    ("PT-1.5S", -1500),
    ("PT15M", 900_000),
    ("PT2H", 7_200_000),
    ("P1D", 86_400_000),
    ("P1DT2H3M4.005S", 86_400_000 + 7_200_000 + 180_000 + 4005),
    ("p2dt1h", 2 * 86_400_000 + 3_600_000),
    ("-PT10M", -600_000),
    ("-P-1DT1H", 86_400_000 - 3_600_000),
])
def test_iso8601_durations(text, expected_ms):
    assert parse_duration_ms(text) == expected_ms


@pytest.mark.parametrize("text", ["", "P", "PT", "P1DT", "1H", "PT1H30", "P1W", "P1Y", "P1M", "PT1.S5", "PT1H2H"])
def test_malformed_durations(text):
    with pytest.raises(ValueError, match="Text cannot be parsed to a Duration"):
        parse_duration_ms(text)


def test_a_plan_for_one_group_has_three_columns_and_for_many_four():
    assert parse_reset_plan("t,0,5\nt,1,7\n", ["g"]) == {"g": {T0: 5, T1: 7}}
    assert parse_reset_plan("g,t,0,5\nh,t,1,7\n\n", ["g", "h"]) == {"g": {T0: 5}, "h": {T1: 7}}
    assert parse_reset_plan("g,t,0,5\n", ["g"]) == {"g": {T0: 5}}


@pytest.mark.parametrize(("text", "groups", "message"), [
    ("t,0,5\n", ["g", "h"], "Line 1"),       # three columns name no group when there are two
    ("t,0\n", ["g"], "Line 1"),
    ("t,0,5\nt,x,5\n", ["g"], "Line 2 .* not a number"),
    ("t,0,five\n", ["g"], "not a number"),
])
def test_malformed_plans(text, groups, message):
    with pytest.raises(GroupCommandError, match=message):
        parse_reset_plan(text, groups)


def test_the_exported_plan_reads_back():
    plan = {"g": {T1: 7, T0: 5}}
    assert export_reset_plan(plan, with_group=False) == "t,0,5\nt,1,7\n"
    assert parse_reset_plan(export_reset_plan(plan, with_group=False), ["g"]) == plan
    plans = {"g": {T0: 5}, "h": {T1: 7}}
    assert export_reset_plan(plans, with_group=True) == "g,t,0,5\nh,t,1,7\n"
    assert parse_reset_plan(export_reset_plan(plans, with_group=True), ["g", "h"]) == plans


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return parser.parse_args(["consumer-groups", "--bootstrap-server", "h:1", *argv])


def test_the_new_scenarios_are_options_of_reset_offsets():
    assert parse("--reset-offsets", "--to-datetime", "2021-01-01T00:00:00.000").reset == (
        "to-datetime", "2021-01-01T00:00:00.000")
    assert parse("--reset-offsets", "--by-duration", "PT1H").reset == ("by-duration", "PT1H")
    assert parse("--delete-offsets", "--group", "g", "--topic", "t:0").action == "delete-offsets"
    args = parse("--reset-offsets", "--from-file", "plan.csv", "--export")
    assert args.reset == ("from-file", "plan.csv") and args.export
    with pytest.raises(SystemExit):
        parse("--reset-offsets", "--to-earliest", "--by-duration", "PT1H")


class OffsetDeletingAdmin:
    """An Admin's topic description and OffsetDelete, answered from fixed tables."""

    def __init__(self, group_error: Errors | None = None) -> None:
        self.group_error = group_error
        self.asked: list[TopicPartition] = []

    def describe_topics(self, names, *, raise_errors=True):
        known = {"t": SimpleNamespace(partitions=[SimpleNamespace(partition=0), SimpleNamespace(partition=1)])}
        return {name: known.get(name, KafkaError(error=Errors.UNKNOWN_TOPIC_OR_PARTITION)) for name in names}

    def delete_consumer_group_offsets(self, group_id, partitions, *, raise_errors=True):
        self.asked = sorted(partitions)
        if self.group_error is not None:
            raise KafkaError(error=self.group_error)
        return {tp: KafkaError(error=Errors.GROUP_SUBSCRIBED_TO_TOPIC) if tp.topic == "s" else None
                for tp in partitions}


def delete_offsets(admin, *topics: str) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = run_delete_offsets(admin, parse("--delete-offsets", "--group", "g", *topics), out)
    return code, [line.rstrip() for line in out.getvalue().splitlines()]


def test_delete_offsets_prints_a_status_per_partition():
    admin = OffsetDeletingAdmin()
    code, lines = delete_offsets(admin, "--topic", "t", "--topic", "u:2")
    assert code == 0 and admin.asked == [T0, T1, TopicPartition("u", 2)]
    assert lines[0] == "Request succeed for deleting offsets with topic t, u:2 group g"
    assert lines[1] == ""
    assert [line.split(None, 2) for line in lines[2:]] == [
        ["TOPIC", "PARTITION", "STATUS"], ["t", "0", "Successful"], ["t", "1", "Successful"],
        ["u", "2", "Successful"]]
    assert lines[2].index("PARTITION") == 31 and lines[2].index("STATUS") == 47   # Kafka's widths


def test_delete_offsets_reports_partition_and_group_errors():
    code, lines = delete_offsets(OffsetDeletingAdmin(), "--topic", "s:0", "--topic", "gone")
    assert code == 1
    assert lines[0] == "Error: Encounter some partition level error, see the follow-up details:"
    gone, subscribed = lines[3:]
    assert gone.split()[:3] == ["gone", "Not", "Provided"] and "does not host this topic-partition" in gone
    assert subscribed.split()[:2] == ["s", "0"] and "actively subscribed" in subscribed
    code, lines = delete_offsets(OffsetDeletingAdmin(Errors.GROUP_ID_NOT_FOUND), "--topic", "t:0")
    assert code == 1 and lines[0] == "Error: 'g' does not exist."
    assert lines[-1].split()[:3] == ["t", "0", "Error:"]
    code, lines = delete_offsets(OffsetDeletingAdmin(Errors.NON_EMPTY_GROUP), "--topic", "t:0")
    assert lines[0] == "Error: Deleting offsets of a consumer group 'g' is forbidden if the group is not empty."
