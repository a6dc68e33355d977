// Follows one turn over the deployment's WebSocket API (docs/api.md, "WebSocket API"). The JWT
// never goes in a URL: the page asks POST /live/tickets for a single-use ticket (the JWT in the
// Authorization header, as every request), connects with `?ticket=` and sends one `subscribe`
// with its cursor; messages are {event, id, data} with the stream's event kinds and data, so the
// same handlers render them.

import { ApiError, UnreachableError } from "./api.js";
import { cursorToken } from "./cursor.js";

/** No socket can be had here (no ticket route, a refused or failed handshake, an error the
 * socket cannot carry past): the caller follows the turn another way and says so. */
export class NoSocket extends Error {}

/** JSON.parse, or undefined for text that is not JSON. */
export function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Where `api`'s turns are followed live (GET /live, asked once per client): {websocket_url,
 * stream}; null for an API without the route (an older one). */
export function liveInfo(api) {
  if (!api.liveInfo) {
    api.liveInfo = api.get("/live").catch((error) => {
      api.liveInfo = null; // asked again next time
      if (error instanceof ApiError && (error.status === 404 || error.status === 405)) return null;
      throw error;
    });
  }
  return api.liveInfo;
}

/**
 * One WebSocket connection following `turnId` from `state.cursor`: resolves to the end
 * {turn_id, status, error, rounds, usage}; rejects with NoSocket (follow another way),
 * UnreachableError (cut after it opened: reconnect), an ApiError 404 (no such turn or session),
 * or an AbortError when `signal` aborts.
 */
export async function socketOnce(api, sessionId, turnId, state, deliver, handlers, signal) {
  let issued;
  try {
    issued = await api.post("/live/tickets", undefined, { signal });
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      throw new NoSocket("this API issues no WebSocket tickets");
    }
    throw error;
  }
  const url = `${issued.websocket_url}?ticket=${encodeURIComponent(issued.ticket)}`;
  return new Promise((resolve, reject) => {
    let opened = false;
    let done = false;
    let socket;
    const finish = (settle, value) => {
      if (done) return;
      done = true;
      signal?.removeEventListener("abort", onAbort);
      socket.close();
      settle(value);
    };
    const onAbort = () => finish(reject, new DOMException("aborted", "AbortError"));
    try {
      socket = new WebSocket(url);
    } catch (error) {
      reject(new NoSocket(`the WebSocket URL ${issued.websocket_url} is not usable`));
      return;
    }
    signal?.addEventListener("abort", onAbort);
    socket.onopen = () => {
      opened = true;
      handlers.onConnection?.("socket");
      const body = { action: "subscribe", session_id: sessionId, turn_id: turnId };
      socket.send(JSON.stringify({ ...body, cursor: cursorToken(state) }));
    };
    socket.onmessage = (message) => {
      const body = parseJson(message.data);
      if (!body || typeof body.event !== "string") return;
      const data = body.data && typeof body.data === "object" ? body.data : {};
      if (body.event === "delta") handlers.onDelta?.(data);
      else if (body.event === "status") handlers.onStatus?.(data);
      else if (body.event === "end") finish(resolve, data);
      else if (body.event === "error") finish(reject, socketError(data));
      else if (typeof data.kind === "string") deliver(data); // frame, entry, approval_*
    };
    socket.onclose = (event) => {
      if (opened) finish(reject, new UnreachableError("The live socket was cut; reconnecting."));
      // A refused handshake (401) is not visible to a page: only that it closed unopened.
      else finish(reject, new NoSocket(`the WebSocket could not be opened (close ${event.code})`));
    };
  });
}

function socketError(data) {
  if (data.code === "not_found") return new ApiError(404, "not_found", data.message || "not found");
  // event_too_large and the like: the events page has what the socket cannot carry.
  return new NoSocket(`the WebSocket answered ${data.code}: ${data.message}`);
}
