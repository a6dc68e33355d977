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

from tools.sam_local import seed
from tools.sam_local.executor import REGION, LocalExecutor, StartLambda
from tools.sam_local.lambda_errors import TaskFailure, TaskResult
from tools.sam_local.sfn_relay import CALLBACKS_PATH
from tools.sam_local.stack import LocalStack, ToolMissingError, check_tools, free_port
from tools.sam_local.template import ROOT, function_ids, load_template

BUILT_TEMPLATE = ROOT / ".aws-sam" / "build" / "template.yaml"
EXAMPLE_AGENT = "turnkeep_agents.release_assistant:agent"
"""The agent of the scenario's second phase (the template's AgentRef; docs/agent.md)."""
EXAMPLE_MCP_URLS = '{"docs": "http://docs-mcp:8765/mcp"}'
"""TURNKEEP_MCP_URLS of the second phase: the example agent's docs MCP server, a container on
the run's network (docs/mcp.md)."""


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


def agent_env_file(path: Path, mcp_urls: str) -> Path:
    """events/env.json with every function's TURNKEEP_MCP_URLS `mcp_urls`, written to `path`."""
    env = json.loads(seed.ENV_FILE.read_text(encoding="utf-8"))
    for variables in env.values():
        variables["TURNKEEP_MCP_URLS"] = mcp_urls
    path.write_text(json.dumps(env, indent=2), encoding="utf-8")
    return path


def _local_args(stack: LocalStack, env_file: Path, agent: str = "") -> list[str]:
    overrides = f"Architecture={architecture()}" + (f" AgentRef={agent}" if agent else "")
    return [
        "--template", str(BUILT_TEMPLATE),
        "--env-vars", str(env_file),
        "--parameter-overrides", overrides,
        "--region", REGION,
        "--warm-containers", "LAZY",  # ~0.1 s per later invocation instead of a container each
    ]  # fmt: skip


@dataclass
class Running:
    """A started stack: URLs, the executor and the SAM logs."""

    stack: LocalStack
    api_url: str
    lambda_url: str
    lambdas: StartLambda
    executor: LocalExecutor
    names: seed.LocalNames

    def invoke(self, function_id: str, payload: bytes) -> TaskResult | TaskFailure:
        """Through the current start-lambda (`switch_agent` replaces it)."""
        return self.lambdas.invoke(function_id, payload)

    def switch_agent(self, agent: str, mcp_urls: str = "") -> None:
        """Start start-lambda and start-api again with AgentRef=`agent` (the same moto, the
        same network): every function's TURNKEEP_AGENT is then `agent`, and its
        TURNKEEP_MCP_URLS `mcp_urls` (an env-vars file beside the logs)."""
        env_file = agent_env_file(self.stack.log_dir / "env-agent.json", mcp_urls)
        self.lambdas.close()
        self.stack.stop_sam()
        args = _local_args(self.stack, env_file, agent)
        self.lambda_url = self.stack.start_sam(
            "start-lambda-agent", ["start-lambda", *args], free_port()
        )
        self.api_url = self.stack.start_sam("start-api-agent", ["start-api", *args], free_port())
        self.lambdas = StartLambda(self.lambda_url)


@contextmanager
def running_stack(log_dir: Path, *, build: bool = True) -> Iterator[Running]:
    """Build, then start network, moto, start-lambda, start-api and the executor; stop all."""
    stack = LocalStack(root=ROOT, log_dir=log_dir)
    lambdas: StartLambda | None = None
    holder: list[Running] = []
    executor: LocalExecutor | None = None
    try:
        if build:
            step(f"sam build (Architecture={architecture()})")
            sam_build(log_dir)
        step("docker network + moto + Step Functions relay")
        stack.start_network()
        moto_url = stack.start_moto()
        relay_url = stack.start_sfn_relay()
        names = seed.LocalNames.from_env_file()
        definition = seed.create_resources(moto_url, names)
        step("sam local start-lambda + start-api")
        args = _local_args(stack, seed.ENV_FILE)
        lambda_url = stack.start_sam("start-lambda", ["start-lambda", *args], free_port())
        api_url = stack.start_sam("start-api", ["start-api", *args], free_port())
        lambdas = StartLambda(lambda_url)

        def invoke(function_id: str, payload: bytes) -> TaskResult | TaskFailure:
            return holder[0].invoke(function_id, payload)  # the current start-lambda

        executor = LocalExecutor(
            remote_endpoint=moto_url,
            remote_machine_arn=names.state_machine_arn,
            definition=definition,
            function_ids=function_ids(load_template()),
            invoke=invoke,
            callbacks_url=f"{relay_url}{CALLBACKS_PATH}",
        )
        holder.append(Running(stack, api_url, lambda_url, lambdas, executor, names))
        executor.start()
        yield holder[0]
    finally:
        if executor is not None:
            executor.stop()
        if holder:
            holder[0].lambdas.close()
        elif lambdas is not None:
            lambdas.close()
        problems = stack.close()
        for problem in problems:
            print(f"sam-local: cleanup: {problem}", file=sys.stderr)


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
            step(f"scenario with AgentRef={EXAMPLE_AGENT} and its docs MCP server container")
            running.stack.start_docs_mcp(built_layer().parent)
            running.switch_agent(EXAMPLE_AGENT, EXAMPLE_MCP_URLS)
            logs = [p.log for p in running.stack.processes]
            agent_scenario = Scenario(running.api_url, running.stack.moto_url, running.lambdas,
                                      running.executor, running.names, logs,
                                      layer_python=built_layer())  # fmt: skip
            results += agent_scenario.run_agent()
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
