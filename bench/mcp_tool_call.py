"""What an MCP tool call costs against a function tool, on a warm and on a cold process.

A real MCP server (the release assistant's docs server,
`turnkeep_agents.release_assistant.docs_server`, built with the `mcp` server SDK) runs in a
process of its own on 127.0.0.1 and counts the MCP requests it receives. Measured:

- warm: one process that has already listed the server (its cache is fresh) calls
  `docs_search` and, alternately, the function tool `echo`, through `ToolRegistry.run_call` as
  the tool step does; p50/p95 of each and their ratio, and the MCP requests one warm call makes;
- cold: fresh interpreters, each doing what a cold container's first tool step does: import
  turnkeep, build the registry (for MCP: import `mcp`, list the server's tools) and run one
  call; the median time of that against the same for `echo`, and the requests a cold process
  makes (one listing, then the call).

`--smoke`: few calls and 2 cold processes per case (CI). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

SERVER = textwrap.dedent(
    """
    import json, sys
    from turnkeep_agents.release_assistant.docs_server import build_server
    from tests.support.mcp_servers import HttpMcpServer
    with HttpMcpServer(server=build_server("docs")) as server:
        print(server.url, flush=True)
        for line in sys.stdin:
            if line.strip() == "counts":
                print(json.dumps(dict(server.methods)), flush=True)
    """
)

COLD = textwrap.dedent(
    """
    import json, sys, time
    started = time.perf_counter()
    from turnkeep.tools.base import ToolContext
    from turnkeep.tools.registry import ToolRegistry
    kind, url = sys.argv[1], sys.argv[2]
    if kind == "mcp":
        from turnkeep.mcp import mcp_server
        source = mcp_server("docs", url=url)
        registry = ToolRegistry(source.list_tools())
        name, arguments = "docs_search", '{"query": "hotfix"}'
    else:
        from turnkeep.tools.builtin import builtin_tools
        registry = ToolRegistry(builtin_tools())
        name, arguments = "echo", '{"text": "hotfix"}'
    ready = time.perf_counter()
    result = registry.run_call(name, arguments, ToolContext("s", "u", "op", "c"))
    done = time.perf_counter()
    assert not result.is_error, result.content
    print(json.dumps({"setup": ready - started, "call": done - ready, "total": done - started}))
    """
)


class Server:
    """The docs MCP server in its own process, asked for its request counts over stdin."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("http://"):
            raise RuntimeError("the docs MCP server did not start")

    def counts(self) -> dict[str, int]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write("counts\n")
        self.process.stdin.flush()
        counts: dict[str, int] = json.loads(self.process.stdout.readline())
        return counts

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=20)


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def warm(server: Server, calls: int) -> None:
    from turnkeep.mcp import mcp_server
    from turnkeep.tools.base import ToolContext
    from turnkeep.tools.builtin import builtin_tools
    from turnkeep.tools.registry import ToolRegistry

    source = mcp_server("docs", url=server.url)
    ctx = ToolContext("s", "u", "op", "c")
    registry = ToolRegistry([*builtin_tools(), *source.list_tools()])
    registry.run_call("docs_search", '{"query": "hotfix"}', ctx)  # connections, first imports
    mcp_times: list[float] = []
    fn_times: list[float] = []
    before = server.counts()
    for _ in range(calls):
        started = time.perf_counter()
        # The registry is built per step, as the tool step does: the listing comes from cache.
        registry = ToolRegistry([*builtin_tools(), *source.list_tools()])
        result = registry.run_call("docs_search", '{"query": "hotfix"}', ctx)
        mcp_times.append(time.perf_counter() - started)
        assert not result.is_error, result.content
        started = time.perf_counter()
        registry = ToolRegistry([*builtin_tools(), *source.list_tools()])
        registry.run_call("echo", '{"text": "hotfix"}', ctx)
        fn_times.append(time.perf_counter() - started)
    requests = _delta(server.counts(), before)
    per_call = {k: v / calls for k, v in sorted(requests.items())}
    print(f"warm process, {calls} calls each (registry built per call, listing cached):")
    for label, times in (("MCP tool docs_search", mcp_times), ("function tool echo", fn_times)):
        print(
            f"  {label:<22} p50 {statistics.median(times) * 1000:8.3f} ms"
            f"   p95 {_p(times, 0.95) * 1000:8.3f} ms"
        )
    p50 = statistics.median(mcp_times) / statistics.median(fn_times)
    p95 = _p(mcp_times, 0.95) / _p(fn_times, 0.95)
    print(f"  ratio MCP / function   p50 {p50:8.0f}x   p95 {p95:8.0f}x")
    print(f"  MCP requests per warm call: {per_call}; listings made: {source.list_requests}")


def cold(server: Server, runs: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "shared")}
    figures: dict[str, list[dict[str, float]]] = {"mcp": [], "function": []}
    requests: dict[str, int] = {}
    for _ in range(runs):
        for kind in ("mcp", "function"):
            before = server.counts()
            started = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", COLD, kind, server.url],
                capture_output=True,
                text=True,
                env=env,
                check=True,
                cwd=ROOT,
            )
            figure = json.loads(out.stdout.strip().splitlines()[-1])
            figure["process"] = time.perf_counter() - started
            figures[kind].append(figure)
            if kind == "mcp":
                for k, v in _delta(server.counts(), before).items():
                    requests[k] = requests.get(k, 0) + v
    print(f"cold process (fresh interpreter), {runs} runs each, medians:")
    med: dict[str, dict[str, float]] = {}
    for kind, rows in figures.items():
        med[kind] = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
        m = med[kind]
        print(
            f"  {kind:<9} imports+registry {m['setup'] * 1000:7.1f} ms   first call "
            f"{m['call'] * 1000:7.1f} ms   step total {m['total'] * 1000:7.1f} ms"
            f"   whole process {m['process'] * 1000:7.1f} ms"
        )
    ratio = med["mcp"]["total"] / med["function"]["total"]
    print(f"  ratio MCP / function, step total: {ratio:.1f}x")
    per_run = {k: v / runs for k, v in sorted(requests.items())}
    print(f"  MCP requests per cold process (listing + one call): {per_run}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="few calls, 2 cold runs (CI)")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args(argv)
    server = Server()
    try:
        warm(server, 20 if args.smoke else args.calls)
        cold(server, 2 if args.smoke else args.runs)
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
