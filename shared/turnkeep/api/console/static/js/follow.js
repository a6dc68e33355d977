// Follows one turn until it ends: the deployment's WebSocket API when GET /live names one
// (ws.js), else the stream route when the server has it, else the events page polled with its
// cursor (docs/api.md, "Events"). Every way, every event reaches `onEvent` once, in seq order;
// a lost connection is retried from the last seq seen, so nothing is missed or shown twice when
// the server goes away and comes back.

import { UnreachableError, errorOf, isTransient, path } from "./api.js";
import { cursorToken } from "./cursor.js";
import { sseEvents } from "./sse.js";
import { NoSocket, liveInfo, parseJson, socketOnce } from "./ws.js";

const POLL_MIN_MS = 50;
const POLL_MAX_MS = 500;
const RETRY_MAX_MS = 5000;
const PAGE_LIMIT = 200;
// Statuses meaning "no stream route here" (an older or deployed API): poll instead.
const NO_STREAM = new Set([404, 405, 501]);

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });

/**
 * Follow turn `turnId` of `sessionId`. `handlers`: onEvent(event) for frames, entries and
 * approval events; onDelta({response_id, offset, text}) for live text; onStatus({turn_id,
 * status}) when the turn's status changes; onConnection(state) with "socket" | "stream" |
 * "poll" | "offline" | "no-socket" (polling or streaming because the WebSocket cannot be had:
 * the page says so). Resolves to the end {turn_id, status, error, rounds,
 * usage}; rejects on a non-transient API error; resolves to null when `signal` aborts.
 */
export async function followTurn(api, sessionId, turnId, handlers, { signal, cursor = 0 } = {}) {
  // `children`: each sub-agent child turn's own place (its events are numbered in its own
  // session: docs/api.md, "Sub-agent events"); `cursorToken()` is what the server reads.
  const state = { cursor, children: new Map(), mode: null, fallback: "stream" };
  const turnPath = path("sessions", sessionId, "turns", turnId);
  const deliver = (event) => {
    if (typeof event.seq === "number") {
      const child = event.nested?.length
        ? String(event.nested[event.nested.length - 1].op_id).replace(/^op-sub-/, "")
        : null;
      const seen = child === null ? state.cursor : state.children.get(child) || 0;
      if (event.seq <= seen) return;
      if (child === null) state.cursor = event.seq;
      else state.children.set(child, event.seq);
    }
    handlers.onEvent?.(event);
  };
  let retry = 250;
  while (!signal?.aborted) {
    try {
      if (state.mode === null) await chooseMode(api, state);
      let end;
      if (state.mode === "socket") {
        end = await socketOnce(api, sessionId, turnId, state, deliver, handlers, signal);
      } else if (state.mode === "stream") {
        end = await streamOnce(api, turnPath, state, deliver, handlers, signal);
      } else {
        end = await pollUntilEnd(api, turnPath, state, deliver, handlers, signal);
      }
      if (end) return end;
      retry = 250;
      // The stream closed without an end (a proxy's timeout, a restart): reconnect from the
      // cursor after a breath, so a server that keeps closing is not hammered.
      if (state.mode === "stream") await sleep(retry, signal);
    } catch (error) {
      if (error && error.name === "AbortError") return null;
      if (error instanceof NoSocket) {
        state.mode = state.fallback;
        state.noSocket = true;
        handlers.onConnection?.("no-socket");
        continue;
      }
      if (!isTransient(error)) throw error;
      handlers.onConnection?.("offline");
      await sleep(retry, signal);
      retry = Math.min(retry * 2, RETRY_MAX_MS);
    }
  }
  return null;
}

// The first way to follow: the WebSocket GET /live names, else the stream route where it
// answers; an API without GET /live (an older one) gets the stream route tried.
async function chooseMode(api, state) {
  const live = await liveInfo(api);
  state.fallback = !live || live.stream ? "stream" : "poll";
  state.mode = live && live.websocket_url ? "socket" : state.fallback;
}

async function streamOnce(api, turnPath, state, deliver, handlers, signal) {
  const response = await api.send("GET", `${turnPath}/stream`, {
    query: state.cursor || state.children.size ? { cursor: cursorToken(state) } : undefined,
    signal,
    accept: "text/event-stream",
  });
  if (NO_STREAM.has(response.status)) {
    state.mode = "poll";
    return null;
  }
  if (!response.ok) throw await errorOf(response);
  if (!(response.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
    state.mode = "poll";
    return null;
  }
  handlers.onConnection?.("stream");
  try {
    for await (const message of sseEvents(response.body)) {
      const data = parseJson(message.data);
      if (data === undefined) continue;
      if (message.event === "delta") handlers.onDelta?.(data);
      else if (message.event === "status") handlers.onStatus?.(data);
      else if (message.event === "end") return data;
      else if (data && typeof data.kind === "string") deliver(data); // frame, entry, approval_*
    }
  } catch (error) {
    if (error && error.name === "AbortError") throw error;
    throw new UnreachableError("The live stream was cut; reconnecting.");
  }
  return null;
}

async function pollUntilEnd(api, turnPath, state, deliver, handlers, signal) {
  const mode = state.noSocket ? "no-socket" : "poll";
  handlers.onConnection?.(mode);
  let wait = POLL_MIN_MS;
  while (!signal?.aborted) {
    const page = await api.get(
      `${turnPath}/events`,
      { cursor: cursorToken(state), limit: PAGE_LIMIT },
      { signal },
    );
    handlers.onConnection?.(mode);
    for (const event of page.events) deliver(event);
    if (page.status !== state.status) {
      state.status = page.status;
      handlers.onStatus?.({ turn_id: page.turn_id, status: page.status });
    }
    if (page.finished) {
      const view = await api.get(turnPath, undefined, { signal });
      return {
        turn_id: view.turn_id,
        status: view.status,
        error: view.error,
        error_code: view.error_code,
        rounds: view.rounds,
        usage: view.usage,
        output: view.output,
      };
    }
    if (page.events.length >= PAGE_LIMIT) continue; // more is waiting: read it at once
    await sleep(wait, signal);
    wait = page.events.length ? POLL_MIN_MS : Math.min(wait * 2, POLL_MAX_MS);
  }
  return null;
}
