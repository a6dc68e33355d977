// A follower's place in a turn's events: the turn's own seq and, once a sub-agent's child turn
// had events, each child's (docs/api.md, "Sub-agent events"), as the server reads it back.

/** `12`, or `12:<child>=<seq>,...` (`state`: {cursor, children: Map(child -> seq)}). */
export function cursorToken(state) {
  if (!state.children?.size) return state.cursor;
  const pairs = [...state.children.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `${state.cursor}:${pairs.map(([key, seq]) => `${key}=${seq}`).join(",")}`;
}
