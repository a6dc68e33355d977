// Calls waiting for a person: one card per call (approve / edit the arguments / deny with a
// reason), used both inside a turn and in the list of pending approvals across sessions.

import { describe, path } from "./api.js";
import { h, replaceChildren, when } from "./dom.js";

let counter = 0;

function pretty(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value ?? {}, null, 2);
}

/**
 * A card for `pending` {session_id, turn_id, call_id, tool, arguments, subagent?} (`subagent`:
 * a sub-agent's child turn asks; it is decided on the parent's route all the same); `ctx`: {api,
 * notify(text, kind), onDecided?()}. Decisions are POSTed; errors are shown on the card.
 */
export function approvalCard(pending, ctx, where = "in this turn") {
  const id = `approval-${++counter}`;
  const status = h("p", { class: "approval-status", "aria-live": "polite" });
  const argsText = pretty(pending.arguments);
  const editor = h("textarea", { id: `${id}-args`, rows: 4, spellcheck: "false" }, argsText);
  const reason = h("input", { id: `${id}-reason`, type: "text", maxlength: 1000 });
  const controls = h("div", { class: "approval-controls" });

  async function decide(decision) {
    const body = { decision };
    if (decision === "edit") {
      try {
        body.arguments = JSON.parse(editor.value);
      } catch {
        status.textContent = "The edited arguments are not valid JSON.";
        card.classList.add("has-error");
        editor.focus();
        return;
      }
      if (!body.arguments || typeof body.arguments !== "object" || Array.isArray(body.arguments)) {
        status.textContent = "The edited arguments must be a JSON object.";
        return;
      }
    }
    if (decision === "deny" && reason.value.trim()) body.reason = reason.value.trim();
    card.classList.remove("has-error");
    for (const button of card.querySelectorAll("button")) button.disabled = true;
    status.textContent = "Sending…";
    try {
      await ctx.api.post(
        path("sessions", pending.session_id, "turns", pending.turn_id, "approvals", pending.call_id),
        body,
      );
      markDecided(card, decision, body.reason);
      ctx.onDecided?.();
    } catch (error) {
      status.textContent = describe(error);
      card.classList.add("has-error");
      for (const button of card.querySelectorAll("button")) button.disabled = false;
    }
  }

  const editBox = h(
    "div",
    { class: "approval-edit", hidden: true },
    h("label", { for: editor.id }, `Arguments for ${pending.tool} (JSON)`),
    editor,
    h("button", { type: "button", onclick: () => decide("edit") }, "Run with these arguments"),
  );
  replaceChildren(
    controls,
    h("button", { type: "button", class: "primary", onclick: () => decide("approve") }, "Approve"),
    h(
      "button",
      {
        type: "button",
        "aria-expanded": "false",
        "aria-controls": `${id}-editbox`,
        onclick: (event) => {
          editBox.hidden = !editBox.hidden;
          event.currentTarget.setAttribute("aria-expanded", String(!editBox.hidden));
          if (!editBox.hidden) editor.focus();
        },
      },
      "Edit arguments",
    ),
    h(
      "span",
      { class: "deny-group" },
      h("label", { for: reason.id }, "Reason"),
      reason,
      h("button", { type: "button", class: "danger", onclick: () => decide("deny") }, "Deny"),
    ),
  );
  editBox.id = `${id}-editbox`;
  const card = h(
    "section",
    {
      class: "approval pending",
      "aria-label": `approval of ${pending.tool} ${where} (call ${pending.call_id})`,
      dataset: { call: pending.call_id },
    },
    h("h3", {}, `Approval needed: ${pending.tool}`),
    pending.subagent
      ? h(
          "p",
          { class: "approval-subagent" },
          `Asked by sub-agent ${(pending.subagent.path || [pending.subagent.agent]).join(" › ")}`,
        )
      : null,
    h("pre", { class: "approval-args" }, argsText),
    controls,
    editBox,
    status,
  );
  return card;
}

/** Show a card as decided (`decision` null: the turn ended without a decision seen here). */
export function markDecided(card, decision, reason) {
  if (!card.classList.contains("pending")) return;
  card.classList.remove("pending");
  for (const node of card.querySelectorAll(".approval-controls, .approval-edit")) node.remove();
  const status = card.querySelector(".approval-status");
  const words = { approve: "Approved", edit: "Approved with edited arguments", deny: "Denied" };
  let text = decision ? words[decision] || decision : "No longer waiting";
  if (decision === "deny" && reason) text += `: ${reason}`;
  if (status) status.textContent = text;
  card.dataset.decision = decision || "none";
}

/** The pending-approvals panel: `refresh()` reloads GET /approvals into `container`, keeping
 * the cards already shown (a half-typed reason or edit survives a refresh). */
export class PendingList {
  constructor(container, ctx) {
    this.container = container;
    this.ctx = ctx; // {api, notify, openSession(id)}
    this.items = new Map(); // "<turn>/<call>" -> element
    this.empty = h("p", { class: "muted" }, "Nothing waits for you.");
    this.problem = h("p", { class: "muted", hidden: true });
    container.append(this.problem, this.empty);
  }

  async refresh() {
    let body;
    try {
      body = await this.ctx.api.get("/approvals");
      this.problem.hidden = true;
    } catch (error) {
      this.problem.textContent = describe(error);
      this.problem.hidden = false;
      return;
    }
    const seen = new Set();
    for (const pending of body.approvals || []) {
      const key = `${pending.turn_id}/${pending.call_id}`;
      seen.add(key);
      if (!this.items.has(key)) {
        const item = this.item(pending);
        this.items.set(key, item);
        this.container.append(item);
      }
    }
    for (const [key, item] of this.items) {
      if (!seen.has(key)) {
        item.remove();
        this.items.delete(key);
      }
    }
    this.empty.hidden = this.items.size > 0;
  }

  item(pending) {
    return h(
      "div",
      { class: "pending-item" },
      h(
        "button",
        { type: "button", class: "link", onclick: () => this.ctx.openSession(pending.session_id) },
        "Open session",
      ),
      h("code", { class: "muted pending-session" }, ` ${pending.session_id}`),
      h("p", { class: "muted" }, `Expires ${when(pending.expires_at)}`),
      approvalCard(
        pending,
        { ...this.ctx, onDecided: () => this.refresh() },
        `pending in ${pending.session_id}`,
      ),
    );
  }
}
