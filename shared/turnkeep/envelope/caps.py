"""Every envelope size cap, in one place, chosen so an envelope always fits one DynamoDB item.

An envelope is one DynamoDB item, and an item is limited to 400 KB (409,600 bytes: attribute
names plus values, UTF-8). The caps below are per key; their sum (key names included) is the
whole-meta cap, so no combination of valid host and worker writes can outgrow the item, and a
worker write never has to read the host keys to know it fits. docs/envelope.md shows the sum.

Sizes are UTF-8 bytes of the value (numbers and booleans count as their decimal text).
"""

from __future__ import annotations

from typing import Final

KIB: Final = 1024

#: DynamoDB's item size limit (names + values), the hard ceiling an envelope must fit.
DYNAMODB_ITEM_MAX_BYTES: Final = 400 * KIB

#: The agent's working-notes block (docs/envelope.md). Folded into every model round while
#: non-empty, so this is first an inference-cost bound (~8-16k tokens per round), then a
#: storage bound.
WORKING_NOTES_MAX_BYTES: Final = 32768

#: A persona's standing orders, snapshotted on the envelope (512 KiB would not fit one
#: DynamoDB item with the rest, docs/envelope.md; 128 KiB is ~32k tokens of standing orders,
#: already far more than a prompt wants).
PERSONA_SNAPSHOT_MAX_BYTES: Final = 128 * KIB

#: `attachedSkills`: a JSON array of skill texts folded after the notes.
ATTACHED_SKILLS_MAX_BYTES: Final = 64 * KIB

#: Free-text host fields.
TITLE_MAX_BYTES: Final = 1 * KIB
#: Identifier-like string values (persona id, model id, run id, stream cursor).
IDENT_MAX_BYTES: Final = 256
#: `usage`: a JSON object of token/cost counters.
USAGE_MAX_BYTES: Final = 4 * KIB
#: `turnError`: a short human-readable failure reason.
TURN_ERROR_MAX_BYTES: Final = 4 * KIB
#: Owner ids (they appear in three attributes of the item); session ids follow the one
#: session-id rule, `turnkeep.session_ids` (at most 128 ASCII characters).
OWNER_ID_MAX_BYTES: Final = 256

#: Largest decimal text of an integer meta value (a signed 64-bit integer).
INT_MAX_TEXT_BYTES: Final = 20

#: Whole-meta cap: every key's cap plus its name, summed (checked by a unit test), rounded up.
#: Enforced on every write as a backstop, although the per-key caps already imply it.
META_MAX_BYTES: Final = 240 * KIB

#: Bytes an item carries besides meta: pk, sk, gsi1pk, gsi1sk, ownerId, sessionId, createdAt,
#: updatedAt (names + values at their largest) and the 2-byte `m_` prefix of each meta
#: attribute name. Generous upper bound; see docs/envelope.md for the arithmetic.
ENVELOPE_ITEM_OVERHEAD_MAX_BYTES: Final = 2 * KIB
