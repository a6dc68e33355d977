"""`python -m turnkeep.api [--port 8787]`: the same server as `turnkeep serve` (kept for scripts).

The first stdout line is always `turnkeep api listening on http://127.0.0.1:<port>`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from turnkeep.api.serve import DEFAULT_PORT, PortBusyError, ServeOptions, resume_unfinished, serve
from turnkeep.harness.deps import ToolFactory
from turnkeep.runtime.config_errors import CONFIG_EXIT_STATUS, ConfigError

__all__ = ["build_parser", "main", "resume_unfinished"]


def build_parser() -> argparse.ArgumentParser:
    """Arguments of `python -m turnkeep.api`."""
    parser = argparse.ArgumentParser(prog="python -m turnkeep.api", description=__doc__)
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 = free)"
    )
    parser.add_argument("--log-level", default="info", help="uvicorn log level")
    return parser


def main(argv: Sequence[str] | None = None, *, extra_tools: ToolFactory | None = None) -> int:
    """Serve the API until interrupted; 2 on a configuration error, 1 on a busy port.

    `extra_tools(session_id, user_id)`: tools offered besides the built-ins (see `serve`).
    """
    args = build_parser().parse_args(argv)
    try:
        options = ServeOptions(port=args.port, log_level=args.log_level)
        return serve(options, extra_tools=extra_tools)
    except ConfigError as exc:
        print(f"turnkeep serve: {exc}", file=sys.stderr)
        return CONFIG_EXIT_STATUS
    except PortBusyError as exc:
        print(f"turnkeep serve: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
