// The caller's sessions, newest first, one page at a time; creating one with a title.

import { describe } from "./api.js";
import { h, replaceChildren } from "./dom.js";

const PAGE = 20;

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

  async load(reset = true) {
    if (reset) this.cursor = null;
    let page;
    try {
      page = await this.ctx.api.get("/sessions", { order: "newest", limit: PAGE, cursor: this.cursor });
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
