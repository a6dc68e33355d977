// Building DOM nodes without HTML strings: text always goes in as text (no injection).

/** h("div", {class: "x", onclick: fn}, child, "text", [more]) -> Element */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      node.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(node.dataset, value);
    } else if (value === true) {
      node.setAttribute(key, "");
    } else {
      node.setAttribute(key, String(value));
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else node.append(child instanceof Node ? child : String(child));
  }
}

/** Replace every child of `node` with `children`. */
export function replaceChildren(node, ...children) {
  node.replaceChildren();
  append(node, children);
}

/** The element with `id` (throws when the page lacks it: a wiring bug, not a runtime state). */
export function byId(id) {
  const node = document.getElementById(id);
  if (!node) throw new Error(`the page has no #${id}`);
  return node;
}

/** A local date-time for epoch milliseconds. */
export function when(ms) {
  return typeof ms === "number" ? new Date(ms).toLocaleString() : "";
}
