// The caller's sessions, newest first, one page at a time; creating one with a title.

import { describe } from "./api.js";
import { h, replaceChildren } from "./dom.js";

const PAGE = 20;
const MAX_PAGE = 1000; // the route's largest `limit`

export function sessionLabel(view) {
  return (view.meta && view.meta.title) || view.session_id;
}

export class SessionList {
  /** `ctx`: {api, notify, openSession(id)}; `list` (ul) and `more` (button) are on the page. */
  constructor(list, more, ctx) {
    this.list = list;
    this.more = more;
    this.ctx = ctx;
    this.cursor = null;
    this.selected = null;
    more.addEventListener("click", () => this.load(false));
  }

  /** `reset`: reload from the newest, as many as are shown (older pages stay listed, so the
   * open session does not drop out of the list when a turn's end refreshes it). */
  async load(reset = true) {
    let limit = PAGE;
    if (reset) {
      this.cursor = null;
      const shown = this.list.querySelectorAll("[data-session]").length;
      limit = Math.min(Math.max(PAGE, shown), MAX_PAGE);
    }
    let page;
    try {
      page = await this.ctx.api.get("/sessions", { order: "newest", limit, cursor: this.cursor });
    } catch (error) {
      this.ctx.notify(describe(error), "error");
      return;
    }
    const items = page.sessions.map((view) => this.item(view));
    if (reset) replaceChildren(this.list, items);
    else this.list.append(...items);
    if (reset && !items.length) {
      this.list.append(h("li", { class: "muted" }, "No sessions yet: create one above."));
    }
    this.cursor = page.next_cursor || null;
    this.more.hidden = !this.cursor;
  }

  item(view) {
    const status = view.turn && view.turn.status !== "idle" ? view.turn.status : "";
    return h(
      "li",
      { dataset: { session: view.session_id } },
      h(
        "button",
        {
          type: "button",
          class: "session-button",
          "aria-current": view.session_id === this.selected ? "true" : null,
          onclick: () => this.ctx.openSession(view.session_id),
        },
        h("span", { class: "session-title" }, sessionLabel(view)),
        status ? h("span", { class: `badge status-${status}` }, status) : null,
      ),
    );
  }

  select(sessionId) {
    this.selected = sessionId;
    for (const button of this.list.querySelectorAll(".session-button")) {
      const mine = button.parentElement.dataset.session === sessionId;
      if (mine) button.setAttribute("aria-current", "true");
      else button.removeAttribute("aria-current");
    }
  }

  /** POST /sessions {title}; the new session's view (null after showing an error). */
  async create(title) {
    try {
      const body = title ? { title } : {};
      const view = await this.ctx.api.post("/sessions", body);
      await this.load(true);
      return view;
    } catch (error) {
      this.ctx.notify(describe(error), "error");
      return null;
    }
  }
}
