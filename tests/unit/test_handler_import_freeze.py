"""The handlers pause the collector for their imports and freeze what those built (`gc.freeze`):
a container's imports live as long as it does, so collections (the first invocation's included)
skip them. The collector runs again once the import is done.

Each case imports a handler file in a fresh interpreter, as a Lambda cold start does."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.lambda_host import ROOT

PROBE = r"""
import gc, importlib.util, sys
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
before = gc.get_freeze_count()
spec.loader.exec_module(module)
print(before, gc.get_freeze_count(), int(gc.isenabled()))
"""


@pytest.mark.parametrize("path", ["functions/turn_steps/app.py", "functions/api/app.py"])
def test_a_handler_import_leaves_its_objects_frozen_and_the_collector_on(path: str) -> None:
    environment = {
        **os.environ,
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "TURNKEEP_TABLE": "t",
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / path)],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    before, after, enabled = (int(n) for n in done.stdout.split())
    assert before == 0
    assert after > 0
    assert enabled == 1
