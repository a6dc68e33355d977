// The session's working notes: read-only (only the agent writes them), with their size
// against the 32 KiB cap.

import { describe, path } from "./api.js";
import { replaceChildren } from "./dom.js";

export const NOTES_CAP_BYTES = 32 * 1024;

export class NotesPanel {
  /** `nodes`: {text (pre), size (p), meter (meter)}; `ctx`: {api}. */
  constructor(nodes, ctx) {
    this.nodes = nodes;
    this.ctx = ctx;
    nodes.meter.max = NOTES_CAP_BYTES;
  }

  async load(sessionId) {
    const { text, size, meter } = this.nodes;
    try {
      const body = await this.ctx.api.get(path("sessions", sessionId, "notes"));
      const bytes = Number(body.bytes || 0);
      text.textContent = body.notes ?? "";
      text.dataset.empty = body.notes ? "false" : "true";
      if (!body.notes) text.textContent = "No notes yet.";
      meter.value = bytes;
      const percent = ((bytes / NOTES_CAP_BYTES) * 100).toFixed(1);
      size.textContent = `${bytes} of ${NOTES_CAP_BYTES} bytes (${percent}% of 32 KiB)`;
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
