"""Cold start of the Lambda handlers: a fresh process's import plus first invocation, against a
fresh process that imports boto3, builds a DynamoDB client and makes as many requests.

Measured from the built-artifact layout Lambda loads: the function's code directory, the layer's
`python/` directory (the layer requirements and `turnkeep`, copied from this environment's
installed distributions) and the runtime's boto3/botocore, nothing else on the path (`-S`: no
site-packages), `PYTHONDONTWRITEBYTECODE=1`. The layer is measured twice: as the layer build
ships it today (no `__pycache__`: every module compiled from source on every cold start) and
with bytecode compiled for this interpreter (`compileall`). The runtime's boto3 always has its
bytecode, as Lambda's does. Invocations go to a moto server on 127.0.0.1:

- step: `model_step` of a freshly started Q&A turn (scripted model) with TURNKEEP_WS_ENDPOINT
  set as the template sets it (the push path loaded, nobody subscribed), each turn in a table of its
  own: moto's TransactWriteItems deep-copies the whole table (its rollback), so in one shared
  table every run's commit would pay for all the bench's earlier fixtures (~0.1 s at 300 items),
  which DynamoDB does not;
- API: `GET /sessions/{id}` of an existing session.

Targets (issue #15): step <= 1.5x, API <= 3x its baseline; medians of fresh processes, same run
(wall time; the CPU columns, user + system, show the same ratio with less of the machine's noise).
`--smoke` runs 2 processes per case instead of 9 (`--runs` sets it), compiled layer only.
`--imports` prints the heaviest imports (`-X importtime`) of each handler; `--profile` where one
cold invocation's time goes (cProfile, cumulative, imports included); `--attribute` what each
library (botocore, pydantic's import and first model build, Powertools) costs the handler on
its own, clocked in a process with the other libraries imported first, and what is left for
turnkeep's own import and step work, each as a share of the baseline. `--python python3.12`
measures with the Lambda runtime's interpreter instead of this one (the layer pip-installed for
it from the package index).
"""

from __future__ import annotations

import argparse
import compileall
import importlib.metadata
import json
import logging
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.lambda_script import LOAD_HANDLER

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.aws_template import create_bucket, create_table

ROOT = Path(__file__).resolve().parents[1]
REGION = "us-east-1"
TABLE, BUCKET = "cold-bench", "cold-bench-bucket"
USER = "bench-user"
STEP_TARGET, API_TARGET = 1.5, 3.0
RUNTIME_DISTRIBUTIONS = ("boto3",)  # provided by the Lambda runtime, with bytecode


class _Interpreter:
    """The interpreter of the measured processes: this one, or `--python` (e.g. the Lambda
    runtime's python3.12, with a layer pip-installed for it)."""

    path = sys.executable


INTERPRETER = _Interpreter()

# Runs in the measured process: import the handler file as Lambda does, invoke it once.
INVOKE = (
    r"""
import importlib.util, json, sys, uuid
path, attribute = sys.argv[1:3]
"""
    + LOAD_HANDLER
    + r"""
result = getattr(module, attribute)(json.loads(sys.argv[3]), Context())
if isinstance(result, dict) and int(result.get("statusCode", 200)) >= 400:
    raise SystemExit(f"invocation failed: {result}")
if isinstance(result, dict) and result.get("error"):
    raise SystemExit(f"step failed: {result}")
"""
)

# The baseline: import boto3, build a DynamoDB client, make N strongly consistent GetItems.
BASELINE = r"""
import sys
import boto3
client = boto3.session.Session().client("dynamodb")
for _ in range(int(sys.argv[2])):
    client.get_item(TableName=sys.argv[1], Key={"pk": {"S": "x"}, "sk": {"S": "y"}},
                    ConsistentRead=True)
"""

# Counts the botocore requests of one invocation (a separate run: the timed runs count nothing).
COUNT = (
    r"""
import botocore.client
calls = [0]
original = botocore.client.BaseClient._make_api_call
def counted(self, operation, params):
    calls[0] += 1
    return original(self, operation, params)
botocore.client.BaseClient._make_api_call = counted
"""
    + INVOKE
    + '\nprint("REQUESTS", calls[0])\n'
)


# `--attribute`: the same invocation (or baseline) in one fresh process, its clock started after
# the code in TURNKEEP_BENCH_PRELOAD ran. A library's own cost is the clocked time with every
# other library preloaded minus the time with all of them preloaded (leave-one-out: an import
# two libraries share is in neither's figure).
_CLOCKED = """
import os, sys, time
exec(os.environ.get("TURNKEEP_BENCH_PRELOAD", ""))
started = time.perf_counter()
{body}
print("ELAPSED", time.perf_counter() - started)
"""
PARTS = {
    "botocore import": "import botocore.session, botocore.client\n",
    "pydantic import + first model build": (
        "from pydantic import BaseModel\nclass _Probe(BaseModel):\n    x: int\n_Probe(x=1)\n"
    ),
    "Powertools Logger + Metrics import": (
        "from aws_lambda_powertools import Logger, Metrics\n"
        "from aws_lambda_powertools.metrics import MetricUnit\n"
    ),
}


def _closure(requirements: list[str]) -> set[str]:
    """Names of the installed distributions `requirements` need on this interpreter,
    transitively (environment markers evaluated, extras followed only where asked for)."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    pending = [(Requirement(r), "") for r in requirements]
    while pending:
        requirement, extra = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = requirement.name.lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # an optional dependency this environment does not have
        seen.add(name)
        for text in dist.requires or []:
            child = Requirement(text)
            # A requirement of one of the asked-for extras carries `extra == "<name>"`.
            for wanted in requirement.extras or {""}:
                pending.append((child, wanted))
    return seen


def _copy_distributions(names: set[str], target: Path) -> None:
    """Copy every installed file of the named distributions under `target` (no `__pycache__`)."""
    for name in sorted(names):
        dist = importlib.metadata.distribution(name)
        for file in dist.files or []:
            parts = file.parts
            if ".." in parts or "__pycache__" in parts or file.suffix == ".pyc":
                continue
            source = Path(str(dist.locate_file(file)))
            if not source.is_file():
                continue
            destination = target / file
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)


@dataclass(frozen=True)
class Layout:
    """Directories of the built artifact: runtime (boto3), layer python/ with and without
    bytecode, and the function code directories."""

    runtime: Path
    layer_source: Path
    layer_compiled: Path
    steps: Path
    api: Path


def _copy_project(layer: Path, root: Path) -> Path:
    """Copy `turnkeep` into the layer's `python/` and the function code under `root`; return
    the functions directory (no `__pycache__`: the caller compiles what it ships compiled)."""
    shutil.copytree(
        ROOT / "shared" / "turnkeep",
        layer / "turnkeep",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    functions = root / "functions"
    shutil.copytree(
        ROOT / "functions", functions, ignore=shutil.ignore_patterns("__pycache__", "*.md")
    )
    return functions


def build_layout(root: Path) -> Layout:
    """Build the artifact layout from this environment's installed distributions."""
    requirements = [
        line.split("#", 1)[0].strip()
        for line in (ROOT / "layers" / "turnkeep" / "requirements.txt").read_text().splitlines()
    ]
    runtime_names = _closure(list(RUNTIME_DISTRIBUTIONS))
    layer_names = _closure([r for r in requirements if r]) - runtime_names
    runtime = root / "runtime"
    _copy_distributions(runtime_names, runtime)
    compileall.compile_dir(runtime, quiet=2, workers=1)
    layer = root / "layer-source" / "python"
    _copy_distributions(layer_names, layer)
    functions = _copy_project(layer, root)
    compiled = root / "layer-compiled" / "python"
    shutil.copytree(layer, compiled)
    compileall.compile_dir(compiled, quiet=2, workers=1)
    return Layout(runtime, layer, compiled, functions / "turn_steps", functions / "api")


def build_layout_for(python: str, root: Path) -> Layout:
    """The artifact layout for another interpreter: the layer requirements pip-installed for it
    (boto3 and botocore included, as the layer ships them), compiled by it; no source variant."""
    layer = root / "layer-compiled" / "python"
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
            str(layer),
            "-r",
            str(ROOT / "layers" / "turnkeep" / "requirements.txt"),
        ],
        check=True,
    )
    shutil.rmtree(layer / "bin", ignore_errors=True)
    functions = _copy_project(layer, root)
    runtime = root / "runtime"  # empty: the layer's boto3 comes first on Lambda's path anyway
    runtime.mkdir()
    for tree in (layer, functions):
        subprocess.run([python, "-m", "compileall", "-q", str(tree)], check=True)
    return Layout(runtime, layer, layer, functions / "turn_steps", functions / "api")


@contextmanager
def moto_server() -> Iterator[str]:
    """A moto server on 127.0.0.1 (this process); yields its endpoint."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def _env(endpoint: str, path: list[Path]) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join(str(p) for p in path),
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_LAMBDA_FUNCTION_NAME": "bench",
        "TURNKEEP_TABLE": TABLE,
        "TURNKEEP_STORAGE_URL": f"aws://?table={TABLE}&bucket={BUCKET}&prefix=tk",
        "TURNKEEP_ENVELOPE_URL": f"aws://?table={TABLE}",
        "TURNKEEP_MODEL": "scripted",
        "TURNKEEP_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:x",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_NAMESPACE": "turnkeep",
        "POWERTOOLS_SERVICE_NAME": "turnkeep",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }


def _step_ws_endpoint() -> str:
    """The model step's TURNKEEP_WS_ENDPOINT as template.yaml deploys it (always set: the
    step's push path is part of its cold start)."""
    from tools.sam_local.template import deployed_environment, load_template

    refs = {
        "WebSocketApi": "wscold01",
        "AWS::Region": REGION,
        "AWS::URLSuffix": "amazonaws.com",
        # Pseudo parameters other variables of the step use (the bucket owner, the machine ARN).
        "AWS::AccountId": "123456789012",
        "AWS::Partition": "aws",
        "AWS::StackName": "turnkeep",
    }
    template = load_template()
    refs |= {n: str(p.get("Default", "")) for n, p in template.get("Parameters", {}).items()}
    refs |= {"SessionTable": TABLE, "ProgressBucket": BUCKET}
    return deployed_environment(template, "ModelStepFunction", refs)["TURNKEEP_WS_ENDPOINT"]


def _urls(table: str) -> dict[str, str]:
    return {
        "TURNKEEP_STORAGE_URL": f"aws://?table={table}&bucket={BUCKET}&prefix=tk",
        "TURNKEEP_ENVELOPE_URL": f"aws://?table={table}",
    }


class Fixture:
    """Session data in the moto server: a session to read, fresh turns to run a step of."""

    def __init__(self, endpoint: str) -> None:
        import boto3

        for key, value in _env(endpoint, []).items():
            if key.startswith(("AWS_", "TURNKEEP_")) and key != "AWS_LAMBDA_FUNCTION_NAME":
                os.environ[key] = value
        session = boto3.session.Session(region_name=REGION)
        self.ddb = session.client("dynamodb", endpoint_url=endpoint)
        create_table(self.ddb, TABLE)
        create_bucket(session.client("s3", endpoint_url=endpoint), BUCKET)
        self.deps = self._deps(TABLE)
        self.session_id = f"read-{uuid.uuid4().hex[:8]}"
        self.deps.envelopes.create(self.session_id, USER)
        self.step_table: str | None = None

    @staticmethod
    def _deps(table: str) -> Any:
        from turnkeep.aws_lambda import container

        os.environ.update(_urls(table))
        container.reset_runtime()
        return container.runtime().deps

    def started_turn(self) -> tuple[dict[str, Any], dict[str, str]]:
        """A model step event of a freshly started Q&A turn in a new session, in a new table
        (the previous turn's table is dropped), and the environment naming that table."""
        from turnkeep.harness import StartTurnInput, start_turn

        if self.step_table is not None:
            self.ddb.delete_table(TableName=self.step_table)
        self.step_table = f"cold-step-{uuid.uuid4().hex[:8]}"
        create_table(self.ddb, self.step_table)
        deps = self._deps(self.step_table)
        session_id = f"step-{uuid.uuid4().hex[:8]}"
        op_id = f"op-{uuid.uuid4().hex[:12]}"
        deps.envelopes.create(session_id, USER)
        start_turn(
            deps,
            StartTurnInput(session_id=session_id, op_id=op_id, user_id=USER, text="hello"),
        )
        event = {"session_id": session_id, "op_id": op_id, "round": 0}
        return event, {**_urls(self.step_table), "TURNKEEP_WS_ENDPOINT": _step_ws_endpoint()}

    def read_event(self) -> tuple[dict[str, Any], dict[str, str]]:
        """`GET /sessions/{id}` of the fixture's session by its owner (no other environment)."""
        event: dict[str, Any] = json.loads(
            (ROOT / "events" / "api" / "get_events.json").read_text()
        )
        path = f"/sessions/{self.session_id}"
        event["rawPath"] = event["requestContext"]["http"]["path"] = path
        event["rawQueryString"] = ""
        event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = USER
        return event, {}


def _run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one fresh interpreter running `args`
    (interpreter start included). CPU time hardly moves with other load on the machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [INTERPRETER.path, "-S", *args], env=env, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{args[:2]} failed: {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def _printed(args: list[str], env: dict[str, str], label: str) -> str:
    """The value a fresh interpreter running `args` printed after `label` (it must succeed)."""
    done = subprocess.run(
        [INTERPRETER.path, "-S", *args], env=env, capture_output=True, text=True, check=False
    )
    found = re.search(rf"{label} (\S+)", done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"{args[:2]} printed no {label}: {done.stderr[-2000:]}")
    return found.group(1)


def _requests(handler: Path, attribute: str, event: dict[str, Any], env: dict[str, str]) -> int:
    """botocore requests of one invocation (a separate, untimed run)."""
    return int(_printed(["-c", COUNT, str(handler), attribute, json.dumps(event)], env, "REQUESTS"))


def import_profile(
    handler: Path, attribute: str, event: dict[str, Any], env: dict[str, str]
) -> str:
    """The heaviest top-level imports of one cold invocation (`-X importtime`, cumulative)."""
    done = subprocess.run(
        [
            INTERPRETER.path,
            "-S",
            "-X",
            "importtime",
            "-c",
            INVOKE,
            str(handler),
            attribute,
            json.dumps(event),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    rows: list[tuple[int, str]] = []
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if match and len(match.group(2)) <= 4:
            rows.append((int(match.group(1)), match.group(3)))
    rows.sort(reverse=True)
    return ", ".join(f"{name} {us / 1e6:.3f}s" for us, name in rows[:10])


# Runs INVOKE under cProfile in the measured process and prints the heaviest calls.
PROFILE = r"""
import cProfile, pstats, sys
source, rows = sys.argv.pop(1), int(sys.argv.pop(1))
profiler = cProfile.Profile()
scope = {"__name__": "__main__"}
profiler.runctx(compile(source, "<invoke>", "exec"), scope, scope)
pstats.Stats(profiler).sort_stats("cumulative").print_stats(rows)
"""


def call_profile(
    handler: Path, attribute: str, event: dict[str, Any], env: dict[str, str], rows: int = 40
) -> str:
    """One cold invocation's heaviest calls (cProfile, cumulative seconds)."""
    done = subprocess.run(
        [
            INTERPRETER.path,
            "-S",
            "-c",
            PROFILE,
            INVOKE,
            str(rows),
            str(handler),
            attribute,
            json.dumps(event),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"profiling run failed: {done.stderr[-2000:]}")
    return done.stdout


def _clocked(args: list[str], env: dict[str, str], preload: str) -> float:
    """Seconds from after `preload` to the end of the invocation, in one fresh process."""
    return float(_printed(args, {**env, "TURNKEEP_BENCH_PRELOAD": preload}, "ELAPSED"))


def attribute_costs(
    handler: Path,
    name: str,
    fresh: Any,
    env: dict[str, str],
    *,
    requests: int,
    runs: int,
) -> None:
    """Print what each library part costs the handler's cold start on its own (leave-one-out:
    the other parts preloaded, so imports they share are nobody's), and what is left for
    turnkeep's import and step work beyond the baseline's client and requests; each in ms and
    as a share of the baseline's clocked time."""
    invoke = _CLOCKED.format(body=INVOKE)
    baseline = _CLOCKED.format(body=BASELINE)
    preloads = {
        "nothing": "",
        "all": "".join(PARTS.values()),
        **{
            label: "".join(code for other, code in PARTS.items() if other != label)
            for label in PARTS
        },
    }
    timed: dict[str, list[float]] = {label: [] for label in preloads}
    base: dict[str, list[float]] = {"nothing": [], "botocore import": []}
    for _ in range(runs):  # interleaved, like the timed runs
        for label, preload in preloads.items():
            event, event_env = fresh()
            timed[label].append(
                _clocked(["-c", invoke, str(handler), name, event], event_env, preload)
            )
        for label, values in base.items():
            preload = PARTS.get(label, "")
            values.append(_clocked(["-c", baseline, TABLE, str(requests)], env, preload))
    med = {label: statistics.median(values) for label, values in timed.items()}
    base_ms = statistics.median(base["nothing"]) * 1e3
    handler_ms = med["nothing"] * 1e3
    print(
        f"    in situ (median of {runs}, clocked in the process: interpreter start and exit "
        f"excluded): handler {handler_ms:.0f} ms, baseline {base_ms:.0f} ms "
        f"({handler_ms / base_ms:.2f}x)"
    )
    for label in PARTS:
        cost = (med[label] - med["all"]) * 1e3
        share = cost / base_ms
        print(f"    {label + ', its own':<44} {cost:>5.0f} ms  {share:>5.2f}x of the baseline")
    # With every library preloaded, what is left beyond the baseline's client and requests
    # (the baseline with botocore preloaded) is turnkeep's own import and step work.
    rest = (med["all"] - statistics.median(base["botocore import"])) * 1e3
    label = "turnkeep import + step work, beyond"
    print(f"    {label:<44} {rest:>5.0f} ms  {rest / base_ms:>5.2f}x of the baseline")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="2 processes per case")
    parser.add_argument("--runs", type=int, help="processes per case (default 9; 2 with --smoke)")
    parser.add_argument("--imports", action="store_true", help="print the heaviest imports")
    parser.add_argument("--profile", action="store_true", help="print a cold invocation's profile")
    parser.add_argument(
        "--attribute", action="store_true", help="print what each part of the stack costs in situ"
    )
    parser.add_argument(
        "--python",
        help="measure with this interpreter (e.g. python3.12, Lambda's runtime): the layer is "
        "pip-installed for it (needs the package index), compiled layer only",
    )
    args = parser.parse_args()
    runs = args.runs or (2 if args.smoke else 9)
    if args.python:
        INTERPRETER.path = shutil.which(args.python) or args.python
    with tempfile.TemporaryDirectory(prefix="cold-import-") as tmp, moto_server() as endpoint:
        layout = (
            build_layout_for(INTERPRETER.path, Path(tmp))
            if args.python
            else build_layout(Path(tmp))
        )
        fixture = Fixture(endpoint)
        layers = {"source": layout.layer_source, "compiled": layout.layer_compiled}
        # The layout that ships bytecode only: CI's smoke, and another interpreter's layer.
        if args.smoke or args.python:
            del layers["source"]
        cases = {
            "step": (layout.steps / "app.py", "model_step", fixture.started_turn),
            "API": (layout.api / "app.py", "handler", fixture.read_event),
        }
        version = _printed(
            ["-c", "import sys; print('PYTHON', sys.version.split()[0])"], {}, "PYTHON"
        )
        print(
            f"cold start = fresh process: import + first invocation (moto on 127.0.0.1); median of "
            f"{runs}; baseline = import boto3 + DynamoDB client + as many GetItems"
        )
        print(f"Python {version} ({INTERPRETER.path})")
        print(
            f"{'handler':<6} {'layer':<9} {'requests':>8} {'handler s':>10} {'baseline s':>11} "
            f"{'ratio':>6} {'target':>7}   {'cpu s':>6} {'base cpu':>8} {'cpu ratio':>9}"
        )
        missed: list[str] = []
        for name, (handler, attribute, make_event) in cases.items():
            target = STEP_TARGET if name == "step" else API_TARGET
            for kind, layer in layers.items():
                env = _env(endpoint, [handler.parent, layer, layout.runtime])

                def fresh(
                    env: dict[str, str] = env, make_event: Any = make_event
                ) -> tuple[str, dict[str, str]]:
                    event, extra = make_event()
                    return json.dumps(event), {**env, **extra}

                event, event_env = fresh()
                requests = _requests(handler, attribute, json.loads(event), event_env)
                timed: list[tuple[float, float]] = []
                base: list[tuple[float, float]] = []
                for _ in range(runs):  # interleaved: load drifts affect both sides alike
                    event, event_env = fresh()
                    timed.append(_run(["-c", INVOKE, str(handler), attribute, event], event_env))
                    base.append(_run(["-c", BASELINE, TABLE, str(requests)], env))
                handler_s = statistics.median(wall for wall, _ in timed)
                base_s = statistics.median(wall for wall, _ in base)
                handler_cpu = statistics.median(cpu for _, cpu in timed)
                base_cpu = statistics.median(cpu for _, cpu in base)
                ratio = handler_s / base_s
                print(
                    f"{name:<6} {kind:<9} {requests:>8} {handler_s:>10.3f} {base_s:>11.3f} "
                    f"{ratio:>5.2f}x {target:>6.1f}x   {handler_cpu:>6.3f} {base_cpu:>8.3f} "
                    f"{handler_cpu / base_cpu:>8.2f}x"
                )
                if kind == "compiled" and ratio > target:
                    missed.append(f"{name} {ratio:.2f}x > {target}x")
                if args.imports:
                    event, event_env = fresh()
                    heaviest = import_profile(handler, attribute, json.loads(event), event_env)
                    print(f"    heaviest imports: {heaviest}")
                if args.profile:
                    event, event_env = fresh()
                    print(call_profile(handler, attribute, json.loads(event), event_env))
                if args.attribute and kind == "compiled":
                    attribute_costs(handler, attribute, fresh, env, requests=requests, runs=runs)
        print(
            "targets (compiled layer): " + ("met" if not missed else "MISSED: " + "; ".join(missed))
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
