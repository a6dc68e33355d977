"""A typed turn's result as the chat prints it (in-process and remote alike): JSON, indented."""

from __future__ import annotations

import json


def result_block(output: object) -> str:
    """`result> ` and the validated object as indented JSON (docs/agent.md, "Typed results")."""
    return "result> " + json.dumps(output, indent=2, ensure_ascii=False)
