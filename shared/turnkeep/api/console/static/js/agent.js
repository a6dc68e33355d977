// The agent the server runs (GET /agent): name, instructions, tools. Servers without the
// route (older ones) get a short note instead.

import { ApiError, describe } from "./api.js";
import { h, replaceChildren } from "./dom.js";

/** The first sentence of a (possibly long) tool description. */
function firstSentence(text) {
  const cut = String(text).search(/[.!?](\s|$)/);
  return cut >= 0 ? String(text).slice(0, cut + 1) : String(text);
}

export async function showAgent(container, api) {
  let agent;
  try {
    agent = await api.get("/agent");
  } catch (error) {
    const missing = error instanceof ApiError && [404, 405, 501].includes(error.status);
    replaceChildren(
      container,
      h("p", { class: "muted" }, missing ? "This server does not describe its agent." : describe(error)),
    );
    return;
  }
  const tools = (agent.tools || []).map((tool) =>
    h(
      "li",
      { title: tool.description || null },
      h("code", {}, tool.name),
      tool.requires_approval ? h("span", { class: "badge" }, "needs approval") : null,
      tool.description ? h("span", { class: "muted" }, ` ${firstSentence(tool.description)}`) : null,
    ),
  );
  const down = (agent.unavailable_sources || []).map((source) =>
    h("li", { class: "is-error" }, `${source.name}: ${source.error}`),
  );
  replaceChildren(
    container,
    h("p", {}, h("strong", {}, agent.name || "agent"), agent.model ? ` · ${agent.model}` : ""),
    agent.description ? h("p", { class: "muted" }, agent.description) : null,
    agent.instructions
      ? h("details", {}, h("summary", {}, "Instructions"), h("pre", {}, agent.instructions))
      : null,
    h("details", {}, h("summary", {}, `Tools (${tools.length})`), h("ul", { class: "tools" }, tools)),
    down.length ? h("ul", { "aria-label": "unavailable tool sources" }, down) : null,
  );
}
