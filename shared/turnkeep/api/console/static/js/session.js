// The open session: its transcript (history and the live turn), the message box, cancel and
// delete. Turns are followed by `followTurn` (stream route, else polling).

import { ApiError, describe, path } from "./api.js";
import { AttachmentTray } from "./attachments.js";
import { replaceChildren } from "./dom.js";
import { followTurn } from "./follow.js";
import { sessionLabel } from "./sessions.js";
import { isActive } from "./statuses.js";
import { dollars, TurnView } from "./turnview.js";

const TRANSCRIPT_PAGE = 500;
const STICK_PX = 80;

/** The session's status line while turn `turnId` is live. */
function liveLine(turnId, status) {
  if (status === "awaiting_approval") return `Turn ${turnId} is waiting for an approval.`;
  if (status === "cancelling") return `Turn ${turnId} is being cancelled.`;
  return `Turn ${turnId} is running.`;
}

function turnOf(entryId) {
  const cut = String(entryId || "").indexOf(":");
  return cut > 0 ? entryId.slice(0, cut) : "session";
}

export class SessionPanel {
  /**
   * `nodes`: {section, title, ident, cost, transcript, form, input, send, cancel, status, remove,
   * dialog}; `ctx`: {api, notify, onTurnEnded(view), onTurnEvent(event), onDeleted(id),
   * onConnection(state)}.
   */
  constructor(nodes, ctx) {
    this.nodes = nodes;
    this.ctx = ctx;
    this.view = null;
    this.turns = new Map();
    this.cursor = 0;
    this.running = null;
    this.follower = null;
    nodes.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    nodes.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.send();
      }
    });
    this.tray = nodes.attach
      ? new AttachmentTray(nodes.attach, { api: ctx.api, sessionId: () => this.sessionId })
      : null;
    nodes.cancel.addEventListener("click", () => this.cancel());
    nodes.remove.addEventListener("click", () => this.confirmDelete());
  }

  get sessionId() {
    return this.view ? this.view.session_id : null;
  }

  async open(sessionId) {
    this.stopFollowing();
    this.turns.clear();
    this.cursor = 0;
    this.running = null;
    replaceChildren(this.nodes.transcript);
    if (this.tray) this.tray.clear(); // attachments belong to the session they were sent to
    const view = await this.ctx.api.get(path("sessions", sessionId));
    this.showView(view);
    this.nodes.section.hidden = false;
    await this.loadHistory();
    if (isActive(view.turn.status) && view.turn.turn_id) this.follow(view.turn.turn_id);
    else this.setRunning(null);
    return view;
  }

  showView(view) {
    // Only GET /sessions/{id} carries the totals: a renamed session's view keeps the last ones.
    const same = this.view && this.view.session_id === view.session_id;
    const usage = view.usage || (same ? this.view.usage : null);
    this.view = { ...view, usage };
    this.nodes.title.textContent = sessionLabel(view);
    this.nodes.ident.textContent = view.session_id;
    // The session's cost is the sum of its turns' (docs/usage.md, "Seeing it").
    if (this.nodes.cost) {
      this.nodes.cost.textContent = usage ? `Session cost ${dollars(usage.cost_micros)}` : "";
    }
  }

  /** Read the session again for its totals after a turn ended (a failed read keeps the old). */
  async refreshTotals() {
    const sessionId = this.sessionId;
    if (!sessionId) return;
    try {
      const view = await this.ctx.api.get(path("sessions", sessionId));
      if (view.session_id === this.sessionId) this.showView(view);
    } catch {
      // the figures stay as they were until the next turn ends or the session is opened
    }
  }

  async loadHistory() {
    const api = this.ctx.api;
    const route = path("sessions", this.sessionId, "transcript");
    let cursor = 0;
    for (;;) {
      const page = await api.get(route, { cursor, limit: TRANSCRIPT_PAGE });
      for (const entry of page.entries) this.turnView(turnOf(entry.entry_id)).apply(entry);
      cursor = page.next_cursor;
      if (!page.has_more) break;
    }
    this.cursor = cursor;
    const ids = [...this.turns.keys()].filter((id) => id !== "session");
    await Promise.all(
      ids.map(async (id) => {
        try {
          this.turns.get(id).setStatus(await api.get(path("sessions", this.sessionId, "turns", id)));
        } catch (error) {
          if (!(error instanceof ApiError && error.status === 404)) throw error;
        }
      }),
    );
    this.scrollToEnd(true);
  }

  turnView(turnId) {
    let view = this.turns.get(turnId);
    if (!view) {
      view = new TurnView(turnId, {
        api: this.ctx.api,
        sessionId: this.sessionId,
        notify: this.ctx.notify,
        onDecided: () => this.ctx.onApprovalDecided?.(),
      });
      this.turns.set(turnId, view);
      this.nodes.transcript.append(view.element);
    }
    return view;
  }

  /** Run `change` keeping the transcript pinned to its end when the reader was there. */
  stick(change) {
    const box = this.nodes.transcript;
    const atEnd = box.scrollHeight - box.scrollTop - box.clientHeight < STICK_PX;
    change();
    if (atEnd) this.scrollToEnd();
  }

  scrollToEnd() {
    const box = this.nodes.transcript;
    box.scrollTop = box.scrollHeight;
  }

  setRunning(turnId, status = "running") {
    this.running = turnId;
    this.nodes.cancel.disabled = !turnId;
    this.nodes.section.dataset.running = turnId ? "true" : "false";
    this.nodes.status.textContent = turnId ? liveLine(turnId, status) : "Ready.";
  }

  async send() {
    const text = this.nodes.input.value;
    if (!this.view || !text.trim()) return;
    if (this.running) {
      this.ctx.notify("A turn is still running: wait for it to end, or cancel it.", "error");
      return;
    }
    if (this.tray && this.tray.busy) {
      this.ctx.notify("An attachment is still uploading: send when it is listed.", "error");
      return;
    }
    this.nodes.send.disabled = true;
    this.nodes.status.textContent = "Sending…";
    try {
      const body = { text };
      const attachments = this.tray ? this.tray.ids() : [];
      if (attachments.length) body.attachments = attachments;
      const started = await this.ctx.api.post(path("sessions", this.sessionId, "turns"), body);
      this.nodes.input.value = ""; // only now: a refused or failed send keeps the text
      if (this.tray) this.tray.clear();
      this.follow(started.turn_id);
    } catch (error) {
      this.nodes.status.textContent = "Not sent.";
      this.ctx.notify(describe(error), "error");
    } finally {
      this.nodes.send.disabled = false;
    }
  }

  follow(turnId) {
    this.stopFollowing();
    const controller = new AbortController();
    this.follower = controller;
    const view = this.turnView(turnId);
    view.setStatus({ status: "running", rounds: 0, usage: {} });
    this.setRunning(turnId);
    const turnPath = path("sessions", this.sessionId, "turns", turnId);
    // A status change shows at once; the turn's figures (rounds, tokens) are read after it, so
    // a turn waiting for an approval shows what it has used, not the zeros it started with.
    let asked = 0;
    const showStatus = (status) => {
      const ask = ++asked; // only the latest read counts: an older answer may arrive last
      view.setStatus({ ...view.lastStatus, status });
      if (this.running === turnId) this.setRunning(turnId, status);
      this.ctx.api
        .get(turnPath, undefined, { signal: controller.signal })
        .then((current) => {
          if (ask !== asked || controller.signal.aborted) return;
          if (!isActive(view.lastStatus.status)) return; // the end came first: it is final
          view.setStatus(current);
          if (this.running === turnId && isActive(current.status)) {
            this.setRunning(turnId, current.status);
          }
        })
        .catch(() => {}); // the figures wait for the next change or the end
    };
    showStatus("running");
    const handlers = {
      onEvent: (event) => {
        this.stick(() => view.apply(event));
        // The status event may follow a moment later: show the wait at once.
        if (event.kind === "approval_requested") showStatus("awaiting_approval");
        this.ctx.onTurnEvent?.(event);
      },
      onStatus: (change) => showStatus(change.status),
      onDelta: (delta) => this.stick(() => view.delta(delta)),
      onConnection: (state) => this.ctx.onConnection?.(state),
    };
    followTurn(this.ctx.api, this.sessionId, turnId, handlers, {
      signal: controller.signal,
      cursor: this.cursor,
    })
      .then((end) => {
        if (!end || controller.signal.aborted) return;
        view.setStatus(end);
        this.setRunning(null);
        this.refreshTotals();
        this.ctx.onTurnEnded?.(end);
      })
      .catch((error) => {
        if (controller.signal.aborted) return;
        this.setRunning(null);
        this.ctx.notify(describe(error), "error");
      });
  }

  stopFollowing() {
    if (this.follower) this.follower.abort();
    this.follower = null;
  }

  async cancel() {
    if (!this.running) return;
    try {
      const answer = await this.ctx.api.post(
        path("sessions", this.sessionId, "turns", this.running, "cancel"),
      );
      this.nodes.status.textContent = answer.cancel_requested
        ? "Cancelling…"
        : `The turn had already ended (${answer.status}).`;
    } catch (error) {
      this.ctx.notify(describe(error), "error");
    }
  }

  confirmDelete() {
    if (!this.view) return;
    const dialog = this.nodes.dialog;
    dialog.querySelector("[data-name]").textContent = sessionLabel(this.view);
    dialog.returnValue = "";
    dialog.showModal();
    dialog.addEventListener(
      "close",
      () => {
        if (dialog.returnValue === "delete") this.remove();
      },
      { once: true },
    );
  }

  async remove() {
    const sessionId = this.sessionId;
    try {
      await this.ctx.api.delete(path("sessions", sessionId));
    } catch (error) {
      this.ctx.notify(describe(error), "error");
      return;
    }
    this.close();
    this.ctx.notify(`Session ${sessionId} deleted.`, "info");
    this.ctx.onDeleted?.(sessionId);
  }

  close() {
    this.stopFollowing();
    this.view = null;
    this.turns.clear();
    replaceChildren(this.nodes.transcript);
    this.nodes.section.hidden = true;
  }
}


