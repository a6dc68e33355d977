// The session's host keys a person edits: title, persona, tool approval. PUT meta replaces
// the whole host set, so keys this form does not show are sent back unchanged.

import { describe, path } from "./api.js";

const FIELDS = {
  title: "meta-title",
  personaId: "meta-persona-id",
  personaSnapshot: "meta-persona",
  toolApproval: "meta-tool-approval",
};

export class MetaForm {
  /** `form`: the <form> holding the FIELDS inputs and a status node; `ctx`: {api, onSaved}. */
  constructor(form, status, ctx) {
    this.form = form;
    this.status = status;
    this.ctx = ctx;
    this.view = null;
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.save();
    });
  }

  show(view) {
    this.view = view;
    for (const [key, id] of Object.entries(FIELDS)) {
      const value = view.meta ? view.meta[key] : undefined;
      this.form.querySelector(`#${id}`).value = value === undefined ? "" : String(value);
    }
    this.status.textContent = "";
  }

  async save() {
    if (!this.view) return;
    const meta = { ...(this.view.meta || {}) };
    for (const [key, id] of Object.entries(FIELDS)) {
      const value = this.form.querySelector(`#${id}`).value.trim();
      meta[key] = value === "" ? null : value;
    }
    this.status.textContent = "Saving…";
    try {
      const view = await this.ctx.api.put(path("sessions", this.view.session_id, "meta"), meta);
      this.show(view);
      this.status.textContent = "Saved.";
      this.ctx.onSaved?.(view);
    } catch (error) {
      this.status.textContent = describe(error);
    }
  }
}
