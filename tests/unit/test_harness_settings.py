"""TurnkeepSettings: TURNKEEP_ environment variables and local defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from turnkeep.runtime.settings import TurnkeepSettings


def test_defaults_are_scripted_model_and_sqlite_in_the_local_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for key in ("STORAGE_URL", "ENVELOPE_URL", "MODEL", "LOCAL_DIR", "MAX_STEPS"):
        monkeypatch.delenv(f"TURNKEEP_{key}", raising=False)

    settings = TurnkeepSettings()

    assert settings.model == "scripted"
    assert settings.storage_url_or_local() == f"sqlite:///{tmp_path / '.local' / 'turnkeep.db'}"
    assert settings.envelope_url_or_local() == settings.storage_url_or_local()


def test_environment_variables_with_the_prefix_override_the_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TURNKEEP_STORAGE_URL", "memory://x")
    monkeypatch.setenv("TURNKEEP_MAX_STEPS", "3")
    monkeypatch.setenv("TURNKEEP_MODEL", "bedrock:some-model")

    settings = TurnkeepSettings()

    assert settings.storage_url_or_local() == "memory://x"
    assert settings.limits.max_steps == 3
    assert settings.model == "bedrock:some-model"


def test_a_bad_cap_is_rejected_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNKEEP_MAX_STEPS", "0")

    with pytest.raises(ValidationError, match="max_steps"):
        TurnkeepSettings()


def test_the_context_strategy_and_threshold_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from turnkeep.runtime.build import limits_from_settings

    monkeypatch.setenv("TURNKEEP_CONTEXT_STRATEGY", "window")
    monkeypatch.setenv("TURNKEEP_CONTEXT_THRESHOLD", "0.9")
    monkeypatch.setenv("TURNKEEP_CONTEXT_KEEP", "0.6")

    limits = limits_from_settings(TurnkeepSettings())

    assert (limits.context_strategy, limits.context_threshold, limits.context_keep) == (
        "window",
        0.9,
        0.6,
    )


@pytest.mark.parametrize(
    ("name", "value", "complaint"),
    [
        ("CONTEXT_STRATEGY", "forget", "context_strategy"),
        ("CONTEXT_THRESHOLD", "1.5", "context_threshold"),
        ("CONTEXT_KEEP", "0", "context_keep"),
    ],
)
def test_a_bad_context_setting_is_rejected_naming_it(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, complaint: str
) -> None:
    monkeypatch.setenv(f"TURNKEEP_{name}", value)

    with pytest.raises(ValidationError, match=complaint):
        TurnkeepSettings()


def test_keeping_more_than_the_threshold_is_rejected() -> None:
    from turnkeep.harness import HarnessLimits

    with pytest.raises(ValidationError, match="must not exceed context_threshold"):
        HarnessLimits(context_threshold=0.5, context_keep=0.7)


def test_variable_names_match_in_any_case_and_keyword_arguments_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("turnkeep_max_steps", "7")
    monkeypatch.setenv("TURNKEEP_MODEL", "bedrock:from-env")
    monkeypatch.setenv("TURNKEEP_NOT_A_SETTING", "ignored")

    settings = TurnkeepSettings(model="scripted")

    assert settings.limits.max_steps == 7
    assert settings.model == "scripted"


def test_a_bad_variable_is_one_config_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from turnkeep.runtime.config_errors import ConfigError, load_settings

    monkeypatch.setenv("TURNKEEP_FRAME_INTERVAL_MS", "soon")

    with pytest.raises(ConfigError) as raised:
        load_settings(TurnkeepSettings)

    assert str(raised.value).startswith("TURNKEEP_FRAME_INTERVAL_MS='soon' is not accepted: ")
    assert "an integer >= 0" in str(raised.value)


def test_a_lambda_runtime_is_built_without_importing_pydantic_settings(tmp_path: Path) -> None:
    # Its import (with asyncio's) was ~30 ms of every cold step (docs/step-functions.md).
    import os
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from turnkeep.aws_lambda import container\n"
        "container.runtime()\n"
        "print(sorted(m for m in ('pydantic_settings', 'asyncio') if m in sys.modules))\n"
    )
    environment = {
        **os.environ,
        "TURNKEEP_STORAGE_URL": "memory://cold",
        "TURNKEEP_ENVELOPE_URL": "memory://cold",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )

    assert done.stdout.strip() == "[]"


def test_every_turn_limit_is_a_setting_of_the_same_name_declared_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from turnkeep.harness import HarnessLimits

    monkeypatch.setenv("TURNKEEP_TOOL_PARALLELISM", "2")
    monkeypatch.setenv("TURNKEEP_MAX_TOOL_CALLS_PER_ROUND", "9")

    settings = TurnkeepSettings(model_retries=5)

    assert isinstance(settings.limits, HarnessLimits)
    assert (settings.limits.tool_parallelism, settings.limits.max_tool_calls_per_round) == (2, 9)
    assert settings.limits.model_retries == 5
    # The settings declare none of the limits again: they hold them as one HarnessLimits.
    assert set(HarnessLimits.model_fields).isdisjoint(TurnkeepSettings.model_fields)


def test_limits_given_as_an_object_win_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from turnkeep.harness import HarnessLimits

    monkeypatch.setenv("TURNKEEP_MAX_STEPS", "3")

    settings = TurnkeepSettings(limits=HarnessLimits(max_steps=9))

    assert settings.limits.max_steps == 9


def test_the_same_bounds_hold_for_a_limit_set_by_variable_or_in_code() -> None:
    from turnkeep.harness import HarnessLimits

    with pytest.raises(ValidationError, match="max_steps"):
        TurnkeepSettings(max_steps=1001)
    with pytest.raises(ValidationError, match="max_steps"):
        HarnessLimits(max_steps=1001)


def test_a_bad_limit_variable_is_one_config_line_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from turnkeep.runtime.config_errors import ConfigError, load_settings

    monkeypatch.setenv("TURNKEEP_TOOL_PARALLELISM", "0")

    with pytest.raises(ConfigError) as raised:
        load_settings(TurnkeepSettings)

    assert "TURNKEEP_TOOL_PARALLELISM" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_keep_share_over_the_threshold_set_by_variables_is_one_config_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from turnkeep.runtime.config_errors import ConfigError, load_settings

    monkeypatch.setenv("TURNKEEP_CONTEXT_THRESHOLD", "0.5")
    monkeypatch.setenv("TURNKEEP_CONTEXT_KEEP", "0.7")

    with pytest.raises(ConfigError, match="must not exceed context_threshold") as raised:
        load_settings(TurnkeepSettings)

    assert "\n" not in str(raised.value)


def test_the_attachment_source_and_bucket_owner_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TURNKEEP_ATTACHMENT_SOURCE", "bytes")
    monkeypatch.setenv("TURNKEEP_ATTACHMENT_BUCKET_OWNER", "123456789012")

    limits = TurnkeepSettings().limits

    assert (limits.attachment_source, limits.attachment_bucket_owner) == ("bytes", "123456789012")
    assert TurnkeepSettings(attachment_source="auto").limits.attachment_source == "auto"


@pytest.mark.parametrize(
    ("name", "bad"),
    [("attachment_source", "s3"), ("attachment_bucket_owner", "12345")],
)
def test_an_unknown_attachment_source_or_a_malformed_owner_is_refused(name: str, bad: str) -> None:
    with pytest.raises(ValidationError, match=name):
        TurnkeepSettings(**{name: bad})
