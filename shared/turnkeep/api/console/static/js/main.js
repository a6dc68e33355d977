// Wires the page: the connection form, then the session list, the open session, the pending
// approvals, the notes, the host keys and the agent panel.

import { ApiClient, describe } from "./api.js";
import { showAgent } from "./agent.js";
import { byId } from "./dom.js";
import { MetaForm } from "./meta.js";
import { NotesPanel } from "./notes.js";
import { PendingList } from "./approvals.js";
import { SessionList } from "./sessions.js";
import { SessionPanel } from "./session.js";
import { forgetToken, loadConnection, saveConnection } from "./settings.js";

const PENDING_REFRESH_MS = 4000;

const notice = byId("notice");
let noticeTimer = null;
byId("dismiss-notice").addEventListener("click", () => (notice.hidden = true));

/** Show one message to the person: errors stay until dismissed or replaced, notes fade. */
function notify(text, kind = "info") {
  byId("notice-text").textContent = text;
  notice.dataset.kind = kind;
  notice.hidden = false;
  clearTimeout(noticeTimer);
  if (kind !== "error") noticeTimer = setTimeout(() => (notice.hidden = true), 6000);
}

const connectionState = byId("connection-state");
function onConnection(state) {
  const words = {
    socket: "live (WebSocket)",
    stream: "live (stream)",
    poll: "live (polling)",
    "no-socket": "live (polling: the WebSocket cannot be opened)",
    offline: "server unreachable: retrying",
  };
  connectionState.textContent = words[state] || state;
  connectionState.dataset.state = state;
}

const app = { api: null, sessions: null, panel: null, pending: null, notes: null, meta: null };

/** Open a session in the main panel; resolves once it is shown (errors are notified). */
function openSession(sessionId) {
  if (!app.panel) return Promise.resolve();
  return app.panel
    .open(sessionId)
    .then((view) => {
      app.sessions.select(sessionId);
      app.meta.show(view);
      byId("session-side").hidden = false;
      byId("welcome").hidden = true;
      return app.notes.load(sessionId);
    })
    .catch((error) => notify(describe(error), "error"));
}

function connect(connection) {
  const api = new ApiClient(connection);
  app.api = api;
  const ctx = { api, notify, openSession };
  app.sessions = new SessionList(byId("session-list"), byId("more-sessions"), ctx);
  app.pending = new PendingList(byId("pending-list"), ctx);
  app.notes = new NotesPanel(
    { text: byId("notes-text"), size: byId("notes-size"), meter: byId("notes-meter") },
    ctx,
  );
  app.meta = new MetaForm(byId("meta-form"), byId("meta-status"), {
    api,
    onSaved: (view) => {
      app.panel.showView(view); // the new title in the session's header too
      app.sessions.load(true).then(() => app.sessions.select(view.session_id));
    },
  });
  app.panel = new SessionPanel(
    {
      section: byId("session"),
      title: byId("session-title"),
      ident: byId("session-id"),
      cost: byId("session-cost"),
      transcript: byId("transcript"),
      form: byId("composer"),
      input: byId("message"),
      send: byId("send"),
      cancel: byId("cancel"),
      status: byId("turn-line"),
      remove: byId("delete-session"),
      dialog: byId("confirm-delete"),
      attach: {
        button: byId("attach"),
        input: byId("attach-input"),
        list: byId("attach-list"),
        error: byId("attach-error"),
        drop: byId("composer"),
        paste: byId("message"),
      },
    },
    {
      ...ctx,
      onConnection,
      onTurnEvent: (event) => {
        if (event.kind.startsWith("approval_")) app.pending.refresh();
        if (event.kind === "entry" && event.role === "tool") app.notes.load(app.panel.sessionId);
      },
      onApprovalDecided: () => app.pending.refresh(),
      onTurnEnded: () => {
        app.notes.load(app.panel.sessionId);
        app.sessions.load(true);
        app.pending.refresh();
      },
      onDeleted: () => {
        byId("session-side").hidden = true;
        byId("welcome").hidden = false;
        app.notes.clear();
        app.sessions.load(true);
      },
    },
  );
  byId("signed-in").textContent = `Connected to ${connection.baseUrl}`;
  app.sessions.load(true);
  app.pending.refresh();
  showAgent(byId("agent"), api);
}

function setUp() {
  const form = byId("connect-form");
  const saved = loadConnection();
  byId("base-url").value = saved.baseUrl;
  byId("token").value = saved.token;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    try {
      const connection = saveConnection(byId("base-url").value, byId("token").value);
      connect(connection);
      byId("connection").open = false;
    } catch (error) {
      notify(describe(error), "error");
    }
  });
  byId("forget-token").addEventListener("click", () => {
    forgetToken();
    byId("token").value = "";
    notify("Token forgotten for this tab.");
  });
  byId("new-session").addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!app.sessions) return notify("Connect first.", "error");
    const title = byId("new-title").value.trim();
    const view = await app.sessions.create(title);
    if (view) {
      byId("new-title").value = "";
      await openSession(view.session_id);
      // Only where the person still is: a field they moved to while the session opened keeps
      // the focus (and the keys they are typing).
      const where = document.activeElement;
      if (!where || where === document.body || where.id === "new-title") byId("message").focus();
    }
  });
  byId("refresh-pending").addEventListener("click", () => app.pending?.refresh());
  setInterval(() => {
    if (app.pending && document.visibilityState === "visible") app.pending.refresh();
  }, PENDING_REFRESH_MS);
  // The form is open until connected (no script needed to reach it).
  if (saved.token) {
    connect(saved);
    byId("connection").open = false;
  }
}

setUp();
