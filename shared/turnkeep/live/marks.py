"""The watch mark: which turns of a session have (or had) WebSocket subscribers, kept on the
session's envelope item, which every step reads anyway (its first BatchGetItem) and whose
update rides in a step's session commits (docs/api.md, "What watching costs").

Two attributes beside the envelope's own (the envelope store ignores them):
- `liveOps`, a string set: the turns a `subscribe` was recorded for (removed when a turn ends,
  or by a step that found nobody subscribed, under the condition below);
- `liveGen`, a number every `subscribe` adds 1 to, after recording its subscription.
A step whose turn is not in `liveOps` looks for subscribers nowhere: its envelope commits carry
the condition "`liveGen` is still what I read", so a `subscribe` since its read cancels the
commit once and the step, told so, looks (`watched_since`); its other commits (frame flushes)
read the mark again with one GetItem.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from turnkeep.storage.attached import AttachedUpdate

OPS: Final = "liveOps"
GEN: Final = "liveGen"


@dataclass(frozen=True, slots=True)
class Mark:
    """The watch mark as read: `gen` (0: never subscribed) and the marked turns."""

    gen: int = 0
    ops: frozenset[str] = frozenset()

    @classmethod
    def of(cls, item: Mapping[str, Any] | None) -> Mark:
        """The mark of an envelope item as DynamoDB returns it (None: no envelope)."""
        if not item:
            return cls()
        raw_gen = item.get(GEN, {})
        raw_ops = item.get(OPS, {})
        gen = raw_gen.get("N") if isinstance(raw_gen, Mapping) else None
        ops = raw_ops.get("SS") if isinstance(raw_ops, Mapping) else None
        return cls(
            int(gen) if isinstance(gen, str) and gen.isdigit() else 0,
            frozenset(o for o in ops if isinstance(o, str))
            if isinstance(ops, list)
            else frozenset(),
        )


def unchanged_since(mark: Mark, attach: AttachedUpdate) -> AttachedUpdate:
    """`attach` with one more condition: the envelope's `liveGen` is still `mark.gen`."""

    def action(seqs: tuple[int, ...]) -> dict[str, Any]:
        built = attach.action(seqs)
        update = dict(built["Update"])
        names = {**update.get("ExpressionAttributeNames", {}), "#liveGen": GEN}
        values = dict(update.get("ExpressionAttributeValues", {}))
        if mark.gen:
            values[":liveGenSeen"] = {"N": str(mark.gen)}
            check = "#liveGen = :liveGenSeen"
        else:
            check = "attribute_not_exists(#liveGen)"
        condition = update.get("ConditionExpression")
        update["ConditionExpression"] = f"({condition}) AND {check}" if condition else check
        update["ExpressionAttributeNames"] = names
        if values:
            update["ExpressionAttributeValues"] = values
        return {**built, "Update": update}

    return AttachedUpdate(attach.table, action)
