"""`odradek jobs run JOB ...` hands the job's own options to `python -m jobs.<job> run`."""

from __future__ import annotations

import io

import pytest

from jobs.clickstream import __main__ as clickstream
from services.clients import cli


def test_jobs_run_passes_the_options_after_the_job_name(monkeypatch: pytest.MonkeyPatch):
    calls = []
    monkeypatch.setattr(clickstream, "main", lambda argv: calls.append(argv) or 0)
    args = cli.build_parser().parse_args(["jobs", "run", "clickstream", "--events", "50", "--seed", "3"])
    assert args.run(args, io.StringIO()) == 0
    assert calls == [["run", "--events", "50", "--seed", "3"]]


def test_an_unknown_job_is_refused(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["jobs", "run", "sessions"])
    assert "invalid choice: 'sessions'" in capsys.readouterr().err


def test_the_clickstream_steps_parse_their_options():
    parser = clickstream.build_parser()
    stream = parser.parse_args(["stream", "--topic", "t", "--processing-time", "10 seconds"])
    assert (stream.gateway, stream.topic, stream.processing_time) == ("http://127.0.0.1:8080", "t", "10 seconds")
    run = parser.parse_args(["run", "--start", "2026-11-26T10:00:00.000Z", "--events", "100"])
    assert clickstream.start_ms(run) == 1_795_687_200_000 and run.topic is None


def test_by_default_the_traffic_ends_about_now(monkeypatch: pytest.MonkeyPatch):
    now_ms = 1_795_687_200_000 + 12_345
    monkeypatch.setattr(clickstream.time, "time", lambda: now_ms / 1000)
    args = clickstream.build_parser().parse_args(["run", "--events", "300"])
    sent = clickstream.generator.generate_events(300, seed=args.seed, start_ms=clickstream.start_ms(args))
    closing_ms = clickstream.events.read_event(sent.records[-1].value).event_time_ms
    assert now_ms - clickstream.events.WINDOW_MS < closing_ms <= now_ms
