// A turn's timeline: its model rounds, tool calls, approval waits and context shrinks as bars
// on one time axis, with their tokens (and cost, `cost_micros`, where the server reports it:
// the usage rows' integer micro-dollars, docs/console.md "Timeline"), from
// GET /sessions/{id}/turns/{turn}/timeline (docs/console.md, "Timeline").

import { h } from "./dom.js";

const KIND_NAMES = {
  round: "model round",
  tool: "tool call",
  approval: "approval wait",
  compaction: "compaction",
  context_window: "context window",
};

/** `1.23 s` / `450 ms`: a duration a person reads at a glance. */
export function seconds(value) {
  const s = Math.max(0, Number(value) || 0);
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${s.toFixed(2)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

/** The figures of one bar: `120 in / 40 out tokens · 30 cached · $0.0012`. */
export function figures(bar) {
  const parts = [];
  if (bar.input_tokens != null || bar.output_tokens != null) {
    const estimated = bar.estimated ? " (estimated)" : "";
    parts.push(`${bar.input_tokens ?? 0} in / ${bar.output_tokens ?? 0} out tokens${estimated}`);
  }
  if (bar.cache_read_tokens) parts.push(`${bar.cache_read_tokens} cache read`);
  if (bar.cache_write_tokens) parts.push(`${bar.cache_write_tokens} cache write`);
  if (bar.cost_micros != null) parts.push(`$${(bar.cost_micros / 1e6).toFixed(4)}`);
  return parts.join(" · ");
}

/** The timeline element of `data` (the route's JSON); `now` (epoch s) ends a running turn. */
export function renderTimeline(data, now = Date.now() / 1000) {
  const bars = data.bars || [];
  const start = data.started_at ?? (bars.length ? bars[0].start : now);
  const end = Math.max(
    data.finished_at ?? now,
    ...bars.map((b) => Number(b.end) || 0),
    start + 0.001,
  );
  const span = end - start;
  const total = `${seconds(span)}${data.finished_at == null ? " so far" : ""}`;
  const rows = bars.map((bar) => {
    const track = h("div", { class: "tl-track", "aria-hidden": "true" });
    const fill = h("div", { class: `tl-bar tl-${bar.kind}${bar.is_error ? " is-error" : ""}` });
    // CSSOM, not a style attribute: the console's CSP allows no inline styles.
    fill.style.left = `${(((bar.start - start) / span) * 100).toFixed(3)}%`;
    fill.style.width = `${Math.max(0.4, ((bar.end - bar.start) / span) * 100).toFixed(3)}%`;
    track.append(fill);
    const figure = figures(bar);
    return h(
      "li",
      { class: "tl-row", dataset: { kind: bar.kind } },
      h(
        "span",
        { class: "tl-label" },
        h("strong", {}, `${KIND_NAMES[bar.kind] || bar.kind}`),
        ` ${bar.label} · ${seconds(bar.end - bar.start)} at +${seconds(bar.start - start)}`,
        figure ? h("span", { class: "tl-figures" }, ` · ${figure}`) : null,
      ),
      track,
    );
  });
  const usage = data.usage || {};
  const summary = `${bars.length} bar${bars.length === 1 ? "" : "s"} over ${total} · ${
    usage.input_tokens || 0
  } in / ${usage.output_tokens || 0} out tokens${
    usage.cost_micros != null ? ` · $${(usage.cost_micros / 1e6).toFixed(4)}` : ""
  }`;
  return h(
    "section",
    { class: "timeline", "aria-label": `timeline of turn ${data.turn_id}` },
    h("p", { class: "tl-summary" }, summary),
    data.untimed
      ? h("p", { class: "hint" }, `${data.untimed} earlier step(s) were stored without timing.`)
      : null,
    bars.length
      ? h("ol", { class: "tl-rows" }, rows)
      : h("p", { class: "hint" }, "Nothing timed yet."),
  );
}
