"""`python -m tools.sam_local test|up`: the SAM local stack of turnkeep.

- `test` (what `make sam-local-test` runs): `sam build` for x86_64, a docker network, moto,
  `sam local start-lambda` and `start-api`, the state machine executor, the scenario; stops
  everything it started; last line `sam-local: N passed, M failed`; exit 0 / 1, or 2 when Docker
  or SAM CLI is missing.
- `up`: the same stack without the scenario, until Ctrl-C, for `sam local invoke` and curl.

SAM_LOCAL_FLAGS adds flags to every `sam local` command (e.g. `--skip-pull-image`);
SAM_LOCAL_ARCH (default x86_64) is the Architecture parameter built and run.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.sam_local import seed
from tools.sam_local.executor import REGION, LocalExecutor, StartLambda
from tools.sam_local.stack import LocalStack, ToolMissingError, check_tools, free_port
from tools.sam_local.template import ROOT, function_ids, load_template

BUILT_TEMPLATE = ROOT / ".aws-sam" / "build" / "template.yaml"


def architecture() -> str:
    """The Architecture parameter to build and run (the machine's own, normally)."""
    return os.environ.get("SAM_LOCAL_ARCH", "x86_64")


def built_layer() -> Path:
    """The `python/` directory of the layer built for `architecture()`."""
    logical_id = {"arm64": "TurnkeepLayerArm64", "x86_64": "TurnkeepLayerX8664"}[architecture()]
    return ROOT / ".aws-sam" / "build" / logical_id / "python"


def sam_build(log_dir: Path) -> None:
    """`sam build` of the template for `architecture()`; raises with the log's tail on failure."""
    log = log_dir / "sam-build.log"
    with log.open("wb") as handle:
        done = subprocess.run(
            ["sam", "build", "--parameter-overrides", f"Architecture={architecture()}"],
            cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, check=False,
        )  # fmt: skip
    if done.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        raise RuntimeError("sam build failed:\n" + "\n".join(tail))


EXAMPLE_AGENT = "turnkeep_agents.release_assistant:agent"
EXAMPLE_MCP_URLS = '{"docs": "http://docs-mcp:8765/mcp"}'  # the docs server's container


def _local_args(env_file: Path = seed.ENV_FILE, agent: str = "") -> list[str]:
    overrides = f"Architecture={architecture()}" + (f" AgentRef={agent}" if agent else "")
    return [
        "--template", str(BUILT_TEMPLATE),
        "--env-vars", str(env_file),
        "--parameter-overrides", overrides,
        "--region", REGION,
        "--warm-containers", "LAZY",  # ~0.1 s per later invocation instead of a container each
    ]  # fmt: skip


class Invoker:
    """The executor's way to the functions: the current `sam local start-lambda` (switched when
    the stack restarts its functions for the example agent)."""

    def __init__(self, target: StartLambda) -> None:
        self.target = target

    def invoke(self, function_id: str, payload: bytes) -> Any:
        """Invoke through the current start-lambda."""
        return self.target.invoke(function_id, payload)


@dataclass
class Running:
    """A started stack: URLs, the executor and the SAM logs."""

    stack: LocalStack
    api_url: str
    lambda_url: str
    lambdas: StartLambda
    executor: LocalExecutor
    names: seed.LocalNames
    invoker: Invoker


@contextmanager
def running_stack(log_dir: Path, *, build: bool = True) -> Iterator[Running]:
    """Build, then start network, moto, start-lambda, start-api and the executor; stop all."""
    stack = LocalStack(root=ROOT, log_dir=log_dir)
    lambdas: StartLambda | None = None
    invoker: Invoker | None = None
    executor: LocalExecutor | None = None
    try:
        if build:
            step(f"sam build (Architecture={architecture()})")
            sam_build(log_dir)
        step("docker network + moto")
        stack.start_network()
        moto_url = stack.start_moto()
        names = seed.LocalNames.from_env_file()
        definition = seed.create_resources(moto_url, names)
        step("sam local start-lambda + start-api")
        lambda_url = stack.start_sam("start-lambda", ["start-lambda", *_local_args()],
                                     free_port())  # fmt: skip
        api_url = stack.start_sam("start-api", ["start-api", *_local_args()], free_port())
        lambdas = StartLambda(lambda_url)
        invoker = Invoker(lambdas)
        executor = LocalExecutor(
            remote_endpoint=moto_url,
            remote_machine_arn=names.state_machine_arn,
            definition=definition,
            function_ids=function_ids(load_template()),
            invoke=invoker.invoke,
        )
        executor.start()
        running = Running(stack, api_url, lambda_url, lambdas, executor, names, invoker)
        yield running
    finally:
        if executor is not None:
            executor.stop()
        if lambdas is not None:
            lambdas.close()
        if invoker is not None and invoker.target is not lambdas:
            invoker.target.close()
        problems = stack.close()
        for problem in problems:
            print(f"sam-local: cleanup: {problem}", file=sys.stderr)


def run_example_agent(running: Running, log_dir: Path) -> tuple[str, StartLambda]:
    """Restart start-lambda and start-api with every function running the example agent, its
    docs MCP server a container on the network (from the built layer); returns the new API URL
    and start-lambda. The executor's tasks go to the new start-lambda from then on."""
    stack = running.stack
    stack.start_docs_mcp(built_layer().parent)
    env = json.loads(seed.ENV_FILE.read_text(encoding="utf-8"))
    for variables in env.values():
        variables["TURNKEEP_MCP_URLS"] = EXAMPLE_MCP_URLS
    env_file = log_dir / "env-example-agent.json"
    env_file.write_text(json.dumps(env, indent=2), encoding="utf-8")
    for name in ("start-lambda", "start-api"):
        for problem in stack.stop_sam(name):
            print(f"sam-local: restart: {problem}", file=sys.stderr)
    args = _local_args(env_file, EXAMPLE_AGENT)
    lambda_url = stack.start_sam("start-lambda-example", ["start-lambda", *args], free_port())
    api_url = stack.start_sam("start-api-example", ["start-api", *args], free_port())
    lambdas = StartLambda(lambda_url)
    running.invoker.target = lambdas
    return api_url, lambdas


def step(message: str) -> None:
    """Progress line."""
    print(f"sam-local: {message}", flush=True)


def run_test(log_dir: Path, *, build: bool = True) -> int:
    """The scenario on a fresh stack; prints the summary line last."""
    from tools.sam_local.scenario import Scenario

    results: list[tuple[str, bool, str]] = []
    started = time.monotonic()
    try:
        with running_stack(log_dir, build=build) as running:
            step("scenario")
            logs = [p.log for p in running.stack.processes]
            scenario = Scenario(running.api_url, running.stack.moto_url, running.lambdas,
                                running.executor, running.names, logs,
                                layer_python=built_layer())  # fmt: skip
            results = scenario.run()
            step(f"example agent ({EXAMPLE_AGENT}) with its docs MCP server container")
            example_api, example_lambdas = run_example_agent(running, log_dir)
            example = Scenario(example_api, running.stack.moto_url, example_lambdas,
                               running.executor, running.names, logs,
                               layer_python=built_layer())  # fmt: skip
            results += example.run_example_agent()
    except Exception as exc:  # setup failed: counted, explained, everything already stopped
        print(f"FAIL  stack: {type(exc).__name__}: {exc}", flush=True)
        results.append(("stack", False, str(exc)))
    passed = sum(1 for _n, ok, _d in results if ok)
    failed = len(results) - passed
    print(f"sam-local: logs in {log_dir}; {time.monotonic() - started:.0f} s")
    print(f"sam-local: {passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


def run_up(log_dir: Path, *, build: bool = True) -> int:
    """Start the stack and keep it until Ctrl-C."""
    with running_stack(log_dir, build=build) as running:
        seed.seed_step_samples(running.stack.moto_url, running.names)
        print(
            "\n".join([
                f"API (start-api):     {running.api_url}   (Authorization: Bearer dev-<user>)",
                f"Lambda (start-lambda): {running.lambda_url}",
                f"moto:                {running.stack.moto_url}",
                f"docker network:      {running.stack.network}",
                "Ctrl-C stops everything.",
            ])
        )  # fmt: skip
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            step("stopping")
    step("stopped")
    return 0


def _stop_on_signals() -> None:
    """Ctrl-C and SIGTERM end a run through KeyboardInterrupt, so everything it started is
    stopped (also when a shell started it in the background, where SIGINT comes ignored)."""

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


def main(argv: list[str] | None = None) -> int:
    """Entry point; exit 2 when Docker or SAM CLI is missing."""
    parser = argparse.ArgumentParser(prog="python -m tools.sam_local", description=__doc__)
    parser.add_argument("command", choices=["test", "up", "check"])
    parser.add_argument(
        "--no-build", action="store_true", help="reuse .aws-sam/build (built for SAM_LOCAL_ARCH)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    try:
        check_tools()
    except ToolMissingError as exc:
        print(f"sam-local: cannot run: {exc}", file=sys.stderr)
        return 2
    if args.command == "check":
        print("sam-local: docker and sam are usable")
        return 0
    log_dir = Path(tempfile.mkdtemp(prefix="turnkeep-sam-local-"))
    _stop_on_signals()
    try:
        if args.command == "test":
            return run_test(log_dir, build=not args.no_build)
        return run_up(log_dir, build=not args.no_build)
    except KeyboardInterrupt:
        print("sam-local: interrupted; everything started was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
