"""The token-usage figure of a turn's status line, shared by the in-process and remote chat."""

from __future__ import annotations


def usage_text(inputs: int, outputs: int, cached: int, *, estimated: bool) -> str:
    """`X in / Y out tokens`, with `, Z cached` for cache reads and `~`/`(estimated)` when the
    server reported no usage (docs/providers.md, "Usage")."""
    mark = "~" if estimated else ""
    text = f"{mark}{inputs} in / {mark}{outputs} out tokens"
    if cached:
        text += f", {cached} cached"
    return text + (" (estimated)" if estimated else "")
