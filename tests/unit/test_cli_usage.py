"""`turnkeep usage`: the local ledger's spend of a user by day and model with the total, or the
API's `GET /usage` with --url; a bad day is a usage error naming it."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from tests.support.api_client import auth, make_api_harness
from turnkeep import Agent
from turnkeep.cli import main
from turnkeep.cli.demo import DEMO_USER
from turnkeep.cli.usage import remote_usage
from turnkeep.harness import run_turn
from turnkeep.runtime.build import build_runtime
from turnkeep.runtime.settings import TurnkeepSettings


def test_usage_prints_the_local_users_spend_by_day_and_model_with_the_total(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'turnkeep.db'}"
    monkeypatch.setenv("TURNKEEP_STORAGE_URL", url)
    monkeypatch.setenv("TURNKEEP_ENVELOPE_URL", url)
    runtime = build_runtime(TurnkeepSettings())
    runtime.deps.agent = Agent(model_settings={"price": "1,1"})
    runtime.envelopes.create("s-usage", DEMO_USER)
    result = run_turn(runtime.deps, "s-usage", DEMO_USER, "hello there")
    runtime.close()

    assert main(["usage"]) == 0

    lines = capsys.readouterr().out.splitlines()
    cost = f"${result.usage.cost_micros / 1_000_000:.6f}"
    assert lines[0].startswith("usage ")
    assert lines[0].endswith(" (UTC)")
    assert lines[-1].startswith("total ")
    assert lines[-1].endswith(cost)
    assert f"{result.usage.input_tokens} in" in lines[-1]
    assert any(line.startswith("model scripted") and line.endswith(cost) for line in lines)


def test_a_malformed_day_is_a_usage_error_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["usage", "--from", "last week"])

    assert exited.value.code == 2
    assert "must be a UTC day YYYY-MM-DD, got 'last week'" in capsys.readouterr().err


def test_usage_with_url_prints_the_apis_report_of_the_caller() -> None:
    for api in make_api_harness():
        api.runtime.deps.agent = Agent(model_settings={"price": "1,1"})
        sid = api.session()
        turn = api.start(sid, "hello there")
        view = api.client.get(f"/sessions/{sid}/turns/{turn}", headers=auth()).json()
        api.client.headers.update(auth())
        out = io.StringIO()

        done = remote_usage(api.client, argparse.Namespace(from_day=None, to_day=None), out)

        assert done == 0
        assert (
            out.getvalue()
            .splitlines()[-1]
            .endswith(f"${view['usage']['cost_micros'] / 1_000_000:.6f}")
        )
        bad = remote_usage(
            api.client, argparse.Namespace(from_day="2026-02-02", to_day="2026-02-01"), out
        )
        assert bad == 1
        assert out.getvalue().splitlines()[-1] == (
            "turnkeep usage: from 2026-02-02 is after to 2026-02-01"
        )
