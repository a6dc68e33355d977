// The session's working notes: read-only (only the agent writes them), with their size
// against the cap the API states (`max_bytes` of GET /sessions/{id}/notes).

import { describe, path } from "./api.js";
import { replaceChildren } from "./dom.js";

export class NotesPanel {
  /** `nodes`: {text (pre), size (p), meter (meter)}; `ctx`: {api}. */
  constructor(nodes, ctx) {
    this.nodes = nodes;
    this.ctx = ctx;
  }

  async load(sessionId) {
    const { text, size, meter } = this.nodes;
    try {
      const body = await this.ctx.api.get(path("sessions", sessionId, "notes"));
      const bytes = Number(body.bytes || 0);
      text.textContent = body.notes ?? "";
      text.dataset.empty = body.notes ? "false" : "true";
      if (!body.notes) text.textContent = "No notes yet.";
      const cap = Number(body.max_bytes);
      meter.max = cap;
      meter.value = bytes;
      const percent = ((bytes / cap) * 100).toFixed(1);
      size.textContent = `${bytes} of ${cap} bytes (${percent}% of ${cap / 1024} KiB)`;
    } catch (error) {
      replaceChildren(text, describe(error));
    }
  }

  clear() {
    this.nodes.text.textContent = "";
    this.nodes.size.textContent = "";
    this.nodes.meter.value = 0;
  }
}
