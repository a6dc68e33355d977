// The turn statuses in which a turn is still live (followed, not yet ended): the console's one
// copy of `ACTIVE_STATUSES` (`turnkeep/turn_rules.py`), kept equal to it by a unit test.

export const ACTIVE_STATUSES = new Set(["running", "cancelling", "awaiting_approval"]);

/** Whether a turn in `status` is still live. */
export function isActive(status) {
  return ACTIVE_STATUSES.has(status);
}
