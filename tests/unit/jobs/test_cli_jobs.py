"""`odradek jobs run JOB ...` hands the job's own options to `python -m jobs.<job> run`, finding the jobs in
the working directory when they are not on the path (they are not installed with the package)."""

from __future__ import annotations

import io

import pytest

from jobs.clickstream import __main__ as clickstream
from services.clients import cli
from tests.deploy_support import REPO_ROOT


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


def test_the_jobs_run_from_the_working_directory_of_a_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path):
    from services.clients import cli_jobs

    monkeypatch.setattr(cli_jobs.importlib.util, "find_spec", lambda name: None)  # jobs/ is not on the path
    monkeypatch.setattr(cli_jobs.sys, "path", list(cli_jobs.sys.path))
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    args = cli.build_parser().parse_args(["jobs", "run", "clickstream"])
    assert args.run(args, out) == 1
    assert "runs from a checkout of Odradek" in out.getvalue()
    monkeypatch.chdir(REPO_ROOT)
    assert cli_jobs.job_module("clickstream") is clickstream and cli_jobs.sys.path[0] == str(REPO_ROOT)


def test_without_pyspark_the_jobs_say_which_extra_to_install(monkeypatch: pytest.MonkeyPatch):
    from services.clients import cli_jobs

    def missing_pyspark(name: str):
        raise ModuleNotFoundError("No module named 'pyspark'", name="pyspark")

    monkeypatch.setattr(cli_jobs.importlib, "import_module", missing_pyspark)
    out = io.StringIO()
    args = cli.build_parser().parse_args(["jobs", "run", "clickstream"])
    assert args.run(args, out) == 1 and "pip install 'odradek[spark]'" in out.getvalue()
