// A sub-agent call's child turn under its result (docs/console.md, "Sub-agents"): closed by
// default; opening it loads the child session's transcript and turn view through the same API
// routes as any session (the child session belongs to the same user, docs/agent.md
// "Sub-agents") and renders them with the turn view code of the parent.

import { describe, path } from "./api.js";
import { h, replaceChildren } from "./dom.js";

const PAGE = 100;

/** `completed · 40 in / 12 out tokens`: what the result entry says of its child. */
function summaryText(subagent) {
  const usage = subagent.usage || {};
  const agent = subagent.agent ? ` · ${subagent.agent}` : "";
  return `child turn${agent} · ${subagent.status || "?"} · ${usage.input_tokens || 0} in / ${
    usage.output_tokens || 0
  } out tokens`;
}

/**
 * The collapsible child turn of `subagent` (the result entry's `subagent`: session_id, op_id,
 * status, usage); `ctx` is the parent's turn ctx; `makeView(turnId, ctx)` builds a turn view.
 */
export function childTurn(subagent, ctx, makeView) {
  const box = h("div", { class: "child-turn-body" });
  const details = h(
    "details",
    { class: "child-turn", dataset: { session: subagent.session_id, op: subagent.op_id } },
    h("summary", {}, summaryText(subagent)),
    box,
  );
  let loaded = false;
  details.addEventListener("toggle", async () => {
    if (!details.open || loaded) return;
    loaded = true; // a failed load clears it below, so the next opening tries again
    replaceChildren(box, [h("p", { class: "hint" }, "Loading the child turn…")]);
    try {
      replaceChildren(box, [await loadChild(subagent, ctx, makeView)]);
    } catch (error) {
      loaded = false;
      replaceChildren(box, [
        h("p", { class: "hint", role: "alert" }, `Child turn unavailable: ${describe(error)}`),
      ]);
    }
  });
  return details;
}

/** The child turn's view: every entry of its transcript, then its status and usage. */
async function loadChild(subagent, ctx, makeView) {
  const sessionId = subagent.session_id;
  const opId = subagent.op_id;
  const view = makeView(opId, { ...ctx, sessionId });
  const route = path("sessions", sessionId, "transcript");
  let cursor = 0;
  for (;;) {
    const page = await ctx.api.get(route, { cursor, limit: PAGE });
    for (const entry of page.entries) {
      // Entry ids are `<turn id>:<n>` (docs/api.md): the child session holds this turn only
      // today, but a later turn of it would not belong under this call.
      if (String(entry.entry_id || "").startsWith(`${opId}:`)) view.apply(entry);
    }
    cursor = page.next_cursor;
    if (!page.has_more) break;
  }
  view.setStatus(await ctx.api.get(path("sessions", sessionId, "turns", opId)));
  return view.element;
}

/**
 * A running sub-agent call's child turn, filled live from the parent's stream (docs/console.md,
 * "Sub-agents"): `call` is a nested event's call (call_id, agent, session_id, op_id); open
 * while it runs, collapsible. Returns {element, view}: the parent's view hands the child's
 * events to `view` and drops the block when the call's result comes (the closed child turn
 * under the result takes its place).
 */
export function liveChildTurn(call, ctx, makeView) {
  const view = makeView(call.op_id, { ...ctx, sessionId: call.session_id });
  view.setStatus({ status: "running", rounds: 0 });
  const element = h(
    "details",
    {
      class: "child-turn live",
      open: true,
      dataset: { session: call.session_id, op: call.op_id, call: call.call_id },
    },
    h("summary", {}, `child turn · ${call.agent} · running`),
    h("div", { class: "child-turn-body" }, view.element),
  );
  return { element, view };
}
