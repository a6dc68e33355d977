// A server-sent-events parser over a fetch() body (EventSource cannot send an Authorization
// header). Yields {event, id, data} per dispatched event; comments (": ping") are skipped.

/** Async iterator of the events of `body` (a ReadableStream of bytes). */
export async function* sseEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  const parser = new SseParser();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      yield* parser.push(value);
    }
    yield* parser.push("\n\n"); // a last event the stream ended without a blank line after
  } finally {
    reader.releaseLock();
  }
}

/** Incremental parser: `push(text)` returns the events completed by that text. */
export class SseParser {
  constructor() {
    this.buffer = "";
    this.reset();
  }

  reset() {
    this.event = "";
    this.data = [];
    this.id = null;
  }

  push(text) {
    this.buffer += text;
    const out = [];
    let newline;
    while ((newline = this.buffer.indexOf("\n")) >= 0) {
      let line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + 1);
      if (line.endsWith("\r")) line = line.slice(0, -1);
      this.line(line, out);
    }
    return out;
  }

  line(line, out) {
    if (line === "") {
      if (this.data.length) {
        out.push({ event: this.event || "message", id: this.id, data: this.data.join("\n") });
      }
      this.reset();
      return;
    }
    if (line.startsWith(":")) return; // a comment: heartbeats
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id") this.id = value;
  }
}
