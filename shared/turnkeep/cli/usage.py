"""`turnkeep usage [--from DAY] [--to DAY] [--user U] [--url URL]`: what a user spent, by UTC
day and model, with the total (docs/usage.md). In-process it reads the local ledger (beside
TURNKEEP_ENVELOPE_URL); with --url it asks the API's `GET /usage` as the caller."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, TextIO

from turnkeep.runtime.build import Runtime
from turnkeep.spend.report import usage_report


def _day(text: str) -> str:
    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a UTC day YYYY-MM-DD, got {text!r}") from None


def add_usage_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The `usage` subcommand's arguments."""
    usage = sub.add_parser(
        "usage",
        help="tokens and cost by day and model",
        description="What a user spent (tokens, cache, cost) by UTC day and model.",
    )
    usage.add_argument("--from", dest="from_day", type=_day, help="first UTC day (default: --to)")
    usage.add_argument("--to", dest="to_day", type=_day, help="last UTC day (default: today)")
    usage.add_argument("--user", default=None, help="whose usage (default: the local demo user)")
    usage.add_argument("--url", help="ask the HTTP API at this base URL (the caller's own)")
    usage.add_argument("--token", help="with --url: bearer token (else the dev token of --user)")


def dollars(micros: int) -> str:
    """Micro-dollars as `$0.012345`."""
    return f"${Decimal(micros) / 1_000_000:.6f}"


def _line(label: str, figures: Mapping[str, Any]) -> str:
    cached = f" cache {figures['cache_read_tokens']} read/{figures['cache_write_tokens']} written"
    estimated = " (estimated)" if figures.get("estimated") else ""
    return (
        f"{label:<28} {figures['rounds']:>5} rounds {figures['input_tokens']:>9} in "
        f"{figures['output_tokens']:>8} out{cached}  {dollars(int(figures['cost_micros']))}"
        f"{estimated}\n"
    )


def print_report(report: Mapping[str, Any], out: TextIO) -> None:
    """The report as lines: one per day, one per model, then the total."""
    out.write(f"usage {report['from']} .. {report['to']} (UTC)\n")
    for day in report["by_day"]:
        out.write(_line(str(day["day"]), day))
    for model in report["by_model"]:
        out.write(_line(f"model {model['model']}", model))
    out.write(_line("total", report["total"]))


def _today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


def local_usage(args: argparse.Namespace, runtime: Runtime, user: str, out: TextIO) -> int:
    """Print the local ledger's report of `user`."""
    last = args.to_day or _today()
    first = args.from_day or last
    if first > last:
        out.write(f"turnkeep usage: --from {first} is after --to {last}\n")
        return 2
    ledger = runtime.deps.ledger
    lines = [] if ledger is None else ledger.usage_lines(user, first, last)
    print_report(usage_report(lines, first, last), out)
    return 0


def remote_usage(client: Any, args: argparse.Namespace, out: TextIO) -> int:
    """Print `GET /usage` of the API `client` talks to (1 with the API's message on an error)."""
    params = {k: v for k, v in (("from", args.from_day), ("to", args.to_day)) if v is not None}
    answer = client.get("/usage", params=params)
    if answer.status_code != 200:
        try:
            message = answer.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {answer.status_code}"
        out.write(f"turnkeep usage: {message}\n")
        return 1
    print_report(answer.json(), out)
    return 0
