// One turn on the page: its status line, the user message, each response bubble (provisional
// while it streams, replaced by the settled entry), tool calls and results, approvals and
// compaction summaries. History and live turns go through the same `apply`.

import { attachmentList } from "./attachments.js";
import { childTurn, liveChildTurn } from "./childturn.js";
import { h, replaceChildren } from "./dom.js";
import { approvalCard, markDecided } from "./approvals.js";
import { describe, path } from "./api.js";
import { isActive } from "./statuses.js";
import { renderTimeline } from "./timeline.js";

const CONTEXT_ROLES = new Set(["compaction", "context_window"]);
// A tool result longer than this shows its first PREVIEW_CHARS and a button for the rest.
export const FOLD_CHARS = 600;
const PREVIEW_CHARS = 300;

/** A tool result's text: whole when short, else folded with a toggle (expand on demand). */
function resultBody(content) {
  const text = String(content ?? "");
  if (text.length <= FOLD_CHARS) return [h("pre", {}, text)];
  const folded = `${text.slice(0, PREVIEW_CHARS)}…`;
  const pre = h("pre", { class: "folded" }, folded);
  const size = `${text.length.toLocaleString("en")} characters`;
  const toggle = h(
    "button",
    { type: "button", class: "fold-toggle", "aria-expanded": "false" },
    `Show all (${size})`,
  );
  toggle.addEventListener("click", () => {
    const open = toggle.getAttribute("aria-expanded") !== "true";
    pre.textContent = open ? text : folded;
    pre.classList.toggle("folded", !open);
    toggle.setAttribute("aria-expanded", String(open));
    toggle.textContent = open ? `Fold (${size})` : `Show all (${size})`;
  });
  return [pre, toggle];
}

function textOf(parts) {
  return (parts || [])
    .filter((p) => p && p.kind === "text")
    .map((p) => String(p.text ?? ""))
    .join("");
}

function args(raw) {
  if (typeof raw !== "string") return JSON.stringify(raw ?? {}, null, 2);
  try {
    return JSON.stringify(JSON.parse(raw), null, 2);
  } catch {
    return raw;
  }
}

/** Integer micro-dollars as `$0.000123` (docs/usage.md: costs are never floats). */
export function dollars(micros) {
  const value = BigInt(Math.max(0, Math.trunc(Number(micros) || 0)));
  const whole = value / 1000000n;
  const part = (value % 1000000n).toString().padStart(6, "0");
  return `$${whole}.${part}`;
}

/** The one-line status of a turn: `completed · 2 rounds · 40 in / 12 out tokens · $0.000052`. */
export function statusText(view) {
  const rounds = Number(view.rounds || 0);
  const usage = view.usage || {};
  let text = `${view.status} · ${rounds} round${rounds === 1 ? "" : "s"}`;
  text += ` · ${usage.input_tokens || 0} in / ${usage.output_tokens || 0} out tokens`;
  if (usage.cost_micros) text += ` · ${dollars(usage.cost_micros)}`;
  return text;
}

export class TurnView {
  /** `ctx`: {api, sessionId, notify(text, kind)}; the element is `this.element`. */
  constructor(turnId, ctx) {
    this.turnId = turnId;
    this.ctx = ctx;
    this.bubbles = new Map(); // response_id -> {element, text, textNode, calls}
    this.approvals = new Map(); // call_id -> card element
    this.liveChildren = new Map(); // call_id -> {element, view}: a running sub-agent call
    this.endedCalls = new Set(); // sub-agent calls whose result is here
    this.status = h("p", { class: "turn-status", "aria-live": "polite" }, "…");
    this.error = h("p", { class: "turn-error", role: "alert", hidden: true });
    // A typed turn's validated result (docs/agent.md, "Typed results"): a JSON block.
    this.resultJson = h("pre", { class: "turn-result-json" });
    this.result = h(
      "section",
      { class: "turn-result", "aria-label": "result", hidden: true },
      h("h3", {}, "Result"),
      this.resultJson,
    );
    this.body = h("div", { class: "turn-body" });
    this.timelineBox = h("div", { class: "turn-timeline", hidden: true });
    this.timelineToggle = h(
      "button",
      { type: "button", class: "link timeline-toggle", "aria-expanded": "false" },
      "Timeline",
    );
    this.timelineToggle.addEventListener("click", () => this.toggleTimeline());
    this.element = h(
      "article",
      { class: "turn", dataset: { turn: turnId }, "aria-label": `turn ${turnId}` },
      h(
        "header",
        { class: "turn-head" },
        h("span", { class: "turn-id" }, turnId),
        this.status,
        this.timelineToggle,
      ),
      this.timelineBox,
      this.body,
      this.result,
      this.error,
    );
  }

  /** Show (loading it afresh) or hide the turn's timeline. */
  async toggleTimeline() {
    const open = this.timelineToggle.getAttribute("aria-expanded") !== "true";
    this.timelineToggle.setAttribute("aria-expanded", String(open));
    this.timelineBox.hidden = !open;
    if (open) await this.loadTimeline();
  }

  async loadTimeline() {
    const route = path("sessions", this.ctx.sessionId, "turns", this.turnId, "timeline");
    try {
      replaceChildren(this.timelineBox, [renderTimeline(await this.ctx.api.get(route))]);
    } catch (error) {
      replaceChildren(this.timelineBox, [
        h("p", { class: "hint", role: "alert" }, `Timeline unavailable: ${describe(error)}`),
      ]);
    }
  }

  setStatus(view) {
    this.lastStatus = view;
    this.status.textContent = statusText(view);
    this.element.dataset.status = view.status;
    if (view.error) {
      this.error.textContent = `Error: ${view.error}`;
      this.error.hidden = false;
    }
    if (view.output !== undefined && view.output !== null) {
      this.resultJson.textContent = JSON.stringify(view.output, null, 2);
      this.result.hidden = false;
    }
    const live = isActive(view.status);
    if (!live) for (const card of this.approvals.values()) markDecided(card, null);
    if (!this.timelineBox.hidden) this.loadTimeline(); // the open timeline follows the turn
  }

  /** Put a settled item in the body: before the provisional bubble of a later round, if one
   * is streaming already (a live delta may overtake the commit of the result it follows). */
  place(node) {
    const streaming = this.body.querySelector(".msg.assistant.provisional");
    if (streaming) this.body.insertBefore(node, streaming);
    else this.body.append(node);
  }

  /** One event of the events contract (frame, entry, approval_requested/decided). */
  apply(event) {
    if (event.nested?.length) return this.nested(event, (view, inner) => view.apply(inner));
    if (event.kind === "frame") this.frame(event);
    else if (event.kind === "entry") this.entry(event);
    else if (event.kind === "approval_requested") this.approvalRequested(event);
    else if (event.kind === "approval_decided") this.approvalDecided(event);
    else if (event.kind === "tool_source_unavailable") this.sourceUnavailable(event);
  }

  /** The turn goes on without (some) tools of an optional tool source: say which and why. */
  sourceUnavailable(event) {
    const what = (event.tools || []).length ? event.tools.join(", ") : `the tools of ${event.source}`;
    this.place(
      h(
        "aside",
        { class: "source-notice", role: "status" },
        h("strong", {}, `Going on without ${what}`),
        h("span", {}, ` ${event.message || ""}`),
      ),
    );
  }

  /** A live delta of the stream route: same rule as a frame's text. */
  delta(delta) {
    if (delta.nested?.length) return this.nested(delta, (view, inner) => view.delta(inner));
    this.frame({ response_id: delta.response_id, offset: delta.offset, text: delta.text });
  }

  /** A child turn's event (docs/api.md, "Sub-agent events"): to the live block of the call it
   * runs under, one level of `nested` less; none once that call's result is here. */
  nested(event, handle) {
    const [call, ...deeper] = event.nested;
    if (this.endedCalls.has(call.call_id)) return;
    let child = this.liveChildren.get(call.call_id);
    if (!child) {
      child = liveChildTurn(call, this.ctx, (id, ctx) => new TurnView(id, ctx));
      this.liveChildren.set(call.call_id, child);
      this.place(child.element);
    }
    handle(child.view, { ...event, nested: deeper.length ? deeper : undefined });
  }

  /** The call's result is here: its live block gives way to the closed child turn. */
  endChild(callId) {
    this.endedCalls.add(callId);
    this.liveChildren.get(callId)?.element.remove();
    this.liveChildren.delete(callId);
  }

  bubble(rid) {
    let bubble = this.bubbles.get(rid);
    if (!bubble) {
      const textNode = h("div", { class: "bubble-text" });
      const calls = h("div", { class: "bubble-calls" });
      const element = h(
        "div",
        { class: "msg assistant provisional", dataset: { response: rid } },
        h("span", { class: "who" }, "assistant"),
        textNode,
        calls,
      );
      bubble = { element, text: "", textNode, calls, liveCalls: new Map() };
      this.bubbles.set(rid, bubble);
      this.body.append(element);
    }
    return bubble;
  }

  frame(event) {
    const rid = String(event.response_id || "");
    const bubble = this.bubble(rid);
    if (bubble.settled) return; // the settled entry already replaced the provisional text
    const piece = typeof event.text === "string" ? event.text : "";
    // The server counts `offset` in code points (docs/api.md), a JS string's length in UTF-16
    // units: an emoji before the offset would otherwise cut or repeat the text after it.
    const chars = Array.from(bubble.text);
    const offset = Number.isInteger(event.offset) ? event.offset : chars.length;
    if (piece || offset !== chars.length) {
      bubble.text = chars.slice(0, offset).join("") + piece;
      bubble.textNode.textContent = bubble.text;
    }
    for (const delta of event.deltas || []) this.liveCall(bubble, delta);
  }

  liveCall(bubble, delta) {
    if (delta.type !== "tool_call" && delta.type !== "tool_args") return;
    const index = delta.index ?? 0;
    let call = bubble.liveCalls.get(index);
    if (!call) {
      call = { name: "", args: "", node: h("pre", { class: "call live" }) };
      bubble.liveCalls.set(index, call);
      bubble.calls.append(call.node);
    }
    if (delta.type === "tool_call") call.name = delta.name || call.name;
    else call.args += delta.text || "";
    call.node.textContent = `→ ${call.name}(${call.args})`;
  }

  entry(event) {
    const role = event.role;
    if (role === "user") {
      this.place(
        h(
          "div",
          { class: "msg user" },
          h("span", { class: "who" }, "you"),
          h("div", { class: "bubble-text" }, textOf(event.parts)),
          attachmentList(event.parts, this.ctx),
        ),
      );
    } else if (role === "assistant") {
      this.settle(event);
    } else if (role === "tool") {
      for (const part of event.parts || []) {
        if (part.kind !== "tool_result") continue;
        if (event.subagent) this.endChild(part.call_id);
        const error = Boolean(part.is_error);
        this.place(
          h(
            "div",
            { class: `tool-result${error ? " is-error" : ""}`, role: error ? "alert" : null },
            h("span", { class: "who" }, `${error ? "tool error" : "tool result"} · ${part.name}`),
            resultBody(part.content),
            // A sub-agent call's result: its child turn, collapsed (docs/console.md).
            event.subagent
              ? childTurn(event.subagent, this.ctx, (id, ctx) => new TurnView(id, ctx))
              : null,
          ),
        );
      }
    } else if (CONTEXT_ROLES.has(role)) {
      const info = (event.parts || [])[0] || {};
      const label = role === "compaction" ? "Compaction summary" : "Context window trimmed";
      this.place(
        h(
          "aside",
          { class: "compaction", "aria-label": label },
          h("strong", {}, label),
          h(
            "span",
            { class: "figures" },
            ` ${info.tokens_before ?? "?"} → ${info.tokens_after ?? "?"} tokens`,
          ),
          info.summary ? h("p", {}, String(info.summary)) : null,
        ),
      );
    }
  }

  settle(event) {
    const rid = String(event.response_id || event.entry_id || "");
    const bubble = this.bubble(rid);
    bubble.settled = true;
    bubble.text = textOf(event.parts);
    bubble.textNode.textContent = bubble.text;
    bubble.element.classList.remove("provisional");
    bubble.element.hidden = !bubble.text && !(event.parts || []).some((p) => p.kind === "tool_call");
    const calls = (event.parts || [])
      .filter((p) => p.kind === "tool_call")
      .map((p) => h("pre", { class: "call" }, `→ ${p.name}(${args(p.arguments)})`));
    replaceChildren(bubble.calls, calls);
    if (event.interrupted) bubble.element.append(h("p", { class: "note" }, "(interrupted)"));
  }

  approvalRequested(event) {
    if (this.approvals.has(event.call_id)) return;
    const card = approvalCard(
      {
        session_id: this.ctx.sessionId,
        turn_id: this.turnId,
        call_id: event.call_id,
        tool: event.tool,
        arguments: event.arguments,
        subagent: event.subagent,
      },
      { ...this.ctx, onDecided: () => this.ctx.onDecided?.() },
    );
    this.approvals.set(event.call_id, card);
    this.place(card);
  }

  approvalDecided(event) {
    const card = this.approvals.get(event.call_id);
    if (card) markDecided(card, event.decision, event.reason);
  }
}
