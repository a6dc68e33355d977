"""The processes and containers of a SAM local stack, each stopped by its own id.

`LocalStack` records everything it starts (a docker network, the moto container, the Step
Functions relay container, the example agent's docs MCP server container, the SAM CLI processes
and the Lambda containers those start on the network) and `close()` removes exactly those, also
after a failure. The host reaches containers only through ports published on
127.0.0.1; containers reach each other by name on the network created here.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
import uuid
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx

MOTO_IMAGE = "motoserver/moto:latest"
MOTO_ALIAS = "moto"  # the name events/env.json points every function at
MOTO_PORT = 5000
LAMBDA_IMAGE = "public.ecr.aws/lambda/python:3.12-x86_64"
"""The Lambda runtime image SAM runs the functions in; it also runs the example MCP server."""
DOCS_MCP_ALIAS = "docs-mcp"  # the name events/env.json points the example agent's docs server at
DOCS_MCP_PORT = 8765
DOCS_MCP_MODULE = "turnkeep_agents.release_assistant.docs_server"
SFN_RELAY_ALIAS = "sfn-relay"  # the functions' AWS_ENDPOINT_URL_SFN host (sfn_relay.py)
SFN_RELAY_PORT = 8766
SFN_RELAY_ENDPOINT = f"http://{SFN_RELAY_ALIAS}:{SFN_RELAY_PORT}"


RUNTIME_PYTHON = "python3.12"


class ToolMissingError(RuntimeError):
    """Docker or SAM CLI is not usable on this machine."""


def check_tools() -> None:
    """Raise ToolMissingError unless the docker daemon answers and `sam` is on PATH."""
    if shutil.which("sam") is None:
        raise ToolMissingError("SAM CLI (`sam`) is not on PATH: install the AWS SAM CLI")
    if shutil.which("docker") is None:
        raise ToolMissingError("Docker (`docker`) is not on PATH: install Docker")
    probe = subprocess.run(
        ["docker", "info", "--format", "{{.ServerVersion}}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if probe.returncode != 0:
        raise ToolMissingError(f"the Docker daemon does not answer: {probe.stderr.strip()}")
    _check_runtime_python()


def _check_runtime_python() -> None:
    """`sam build` compiles the layer with the Lambda runtime's Python (layers/turnkeep/Makefile):
    it must run here, not only be on PATH (a pyenv shim of a version not selected does not)."""
    if shutil.which(RUNTIME_PYTHON) is None:
        raise ToolMissingError(f"{RUNTIME_PYTHON} (the Lambda runtime's Python) is not on PATH")
    probe = subprocess.run(
        [RUNTIME_PYTHON, "-c", ""], capture_output=True, text=True, check=False, timeout=60
    )
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[0]
        raise ToolMissingError(
            f"{RUNTIME_PYTHON} (the Lambda runtime's Python, for sam build) does not run: "
            f"{reason}; under pyenv, select it beside the default, e.g. "
            f"PYENV_VERSION=$(pyenv version-name):3.12.x"
        )


def sam_flags() -> list[str]:
    """Extra flags for every `sam local` command, from SAM_LOCAL_FLAGS (e.g. --skip-pull-image
    where images are present but cannot be pulled)."""
    return shlex.split(os.environ.get("SAM_LOCAL_FLAGS", ""))


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _docker(*args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=False, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


@dataclass
class SamProcess:
    """A background `sam local start-*` process and where its output goes."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    url: str


@dataclass
class LocalStack:
    """Network, moto container and SAM processes of one run (names carry a unique suffix)."""

    root: Path
    log_dir: Path
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    network_id: str | None = None
    moto_id: str | None = None
    moto_url: str = ""
    mcp_id: str | None = None
    mcp_url: str = ""
    relay_id: str | None = None
    relay_url: str = ""
    processes: list[SamProcess] = field(default_factory=list)

    @property
    def network(self) -> str:
        """The docker network name of this run."""
        return f"turnkeep-sam-{self.run_id}"

    def start_network(self) -> None:
        """Create this run's bridge network."""
        self.network_id = _docker("network", "create", "--driver", "bridge", self.network)

    def start_moto(self, timeout: float = 60) -> str:
        """Run moto (DynamoDB, S3, Step Functions) as `moto` on the network, published on
        127.0.0.1 only; returns its URL for the host."""
        assert self.network_id is not None, "start_network first"
        self.moto_id = _docker(
            "run", "--detach", "--name", f"turnkeep-moto-{self.run_id}",
            "--network", self.network, "--network-alias", MOTO_ALIAS,
            "--publish", f"127.0.0.1::{MOTO_PORT}",
            MOTO_IMAGE,
        )  # fmt: skip
        published = _docker("port", self.moto_id, f"{MOTO_PORT}/tcp").splitlines()[0]
        port = published.rsplit(":", 1)[1]
        self.moto_url = f"http://127.0.0.1:{port}"
        _wait_http(f"{self.moto_url}/moto-api/", timeout, "moto")
        return self.moto_url

    def start_docs_mcp(self, layer: Path, timeout: float = 60) -> str:
        """Run the example agent's docs MCP server as `docs-mcp` on the network, from what
        `sam build` produced: the Lambda runtime image's python3.12 with the built layer (where
        the agent's package is) mounted read-only at /opt, as a function sees it. Published on
        127.0.0.1 only; returns its URL for the host."""
        assert self.network_id is not None, "start_network first"
        self.mcp_id = _docker(
            "run", "--detach", "--name", f"turnkeep-docs-mcp-{self.run_id}",
            "--network", self.network, "--network-alias", DOCS_MCP_ALIAS,
            "--publish", f"127.0.0.1::{DOCS_MCP_PORT}",
            "--volume", f"{layer}:/opt:ro", "--env", "PYTHONPATH=/opt/python",
            "--entrypoint", "python3",
            LAMBDA_IMAGE,
            "-m", DOCS_MCP_MODULE, "--host", "0.0.0.0", "--port", str(DOCS_MCP_PORT),
        )  # fmt: skip
        published = _docker("port", self.mcp_id, f"{DOCS_MCP_PORT}/tcp").splitlines()[0]
        port = published.rsplit(":", 1)[1]
        self.mcp_url = f"http://127.0.0.1:{port}/mcp"
        # GET without a session is answered 4xx at once by a live Streamable HTTP endpoint.
        _wait_http(self.mcp_url, timeout, "the docs MCP server")
        return self.mcp_url

    def start_sfn_relay(self, timeout: float = 60) -> str:
        """Run the Step Functions relay (sfn_relay.py, beside this file) as `sfn-relay` on the
        network, forwarding to moto; published on 127.0.0.1 only; returns its URL for the host."""
        assert self.network_id is not None, "start_network first"
        here = Path(__file__).resolve().parent
        self.relay_id = _docker(
            "run", "--detach", "--name", f"turnkeep-sfn-relay-{self.run_id}",
            "--network", self.network, "--network-alias", SFN_RELAY_ALIAS,
            "--publish", f"127.0.0.1::{SFN_RELAY_PORT}",
            "--volume", f"{here}:/relay:ro",
            "--entrypoint", "python3",
            LAMBDA_IMAGE,
            "/relay/sfn_relay.py", "--port", str(SFN_RELAY_PORT),
            "--upstream", f"http://{MOTO_ALIAS}:{MOTO_PORT}",
        )  # fmt: skip
        published = _docker("port", self.relay_id, f"{SFN_RELAY_PORT}/tcp").splitlines()[0]
        self.relay_url = f"http://127.0.0.1:{published.rsplit(':', 1)[1]}"
        _wait_http(f"{self.relay_url}/relay/callbacks", timeout, "the Step Functions relay")
        return self.relay_url

    def start_sam(self, name: str, command: list[str], port: int, timeout: float = 120) -> str:
        """Start `sam local <command>` on 127.0.0.1:`port` in the background; returns its URL
        once it answers."""
        log = self.log_dir / f"sam-{name}.log"
        args = ["sam", "local", *command, "--host", "127.0.0.1", "--port", str(port)]
        args += ["--docker-network", self.network, *sam_flags()]
        handle = log.open("wb")
        process = subprocess.Popen(
            args, cwd=self.root, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
        handle.close()
        url = f"http://127.0.0.1:{port}"
        self.processes.append(SamProcess(name, process, log, url))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"sam local {command[0]} exited: see {log}")
            with suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                return url
            time.sleep(0.3)
        raise RuntimeError(f"sam local {command[0]} did not listen on {port}: see {log}")

    def stop_sam(self) -> list[str]:
        """Stop the SAM processes of this run (SAM stops their Lambda containers)."""
        problems: list[str] = []
        for sam in reversed(self.processes):
            problems += _stop_process(sam)
        return problems

    def close(self) -> list[str]:
        """Stop everything this run started, by id; returns what could not be removed."""
        problems: list[str] = []
        for sam in reversed(self.processes):
            problems += _stop_process(sam)
        self.processes.clear()
        if self.network_id is not None:
            # Lambda containers SAM started on this run's network (warm containers included).
            with suppress(RuntimeError):
                leftovers = _docker("ps", "-aq", "--filter", f"network={self.network}").split()
                for container in leftovers:
                    ours = (self.moto_id or "", self.mcp_id or "", self.relay_id or "")
                    if not any(container == known[: len(container)] for known in ours):
                        problems += _remove_container(container)
        if self.moto_id is not None:
            problems += _remove_container(self.moto_id)
            self.moto_id = None
        if self.mcp_id is not None:
            problems += _remove_container(self.mcp_id)
            self.mcp_id = None
        if self.relay_id is not None:
            problems += _remove_container(self.relay_id)
            self.relay_id = None
        if self.network_id is not None:
            try:
                _docker("network", "rm", self.network_id)
            except RuntimeError as exc:
                problems.append(str(exc))
            self.network_id = None
        return problems


def _stop_process(sam: SamProcess) -> list[str]:
    process = sam.process
    if process.poll() is not None:
        return []
    # SAM CLI stops its containers on SIGTERM; its process group holds only what it started.
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
        return [f"sam {sam.name} (pid {process.pid}) needed SIGKILL"]
    return []


def _remove_container(container: str) -> list[str]:
    try:
        _docker("rm", "--force", container)
    except RuntimeError as exc:
        return [str(exc)]
    return []


def _wait_http(url: str, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code < 500:
                return
        time.sleep(0.3)
    raise RuntimeError(f"{what} did not answer on {url} within {timeout:.0f} s")
