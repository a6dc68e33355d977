// The one HTTP client of the API (docs/api.md): every request, error body and transport
// failure goes through `request`, so errors are read and worded in one place.

/** An error answer: {"error": {"code", "message", "field"?}} plus Retry-After. */
export class ApiError extends Error {
  constructor(status, code, message, { field = null, retryAfter = null } = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
    this.retryAfter = retryAfter;
  }
}

/** The server could not be reached (down, restarting, offline): worth retrying. */
export class UnreachableError extends Error {}

/** True for failures a client should retry after a pause (nothing was decided). */
export function isTransient(error) {
  return error instanceof UnreachableError || (error instanceof ApiError && error.status === 503);
}

/** One readable sentence for any error this client raises. */
export function describe(error) {
  if (error instanceof UnreachableError) return error.message;
  if (!(error instanceof ApiError)) return String(error && error.message ? error.message : error);
  const message = error.message;
  switch (error.status) {
    case 401:
      return `Not signed in: ${message}. Check the token.`;
    case 404:
      return `Not found: ${message}.`;
    case 409:
      if (error.code === "turn_running") return `A turn is still running: ${message}.`;
      return `Conflict (${error.code}): ${message}.`;
    case 413:
      return `Too large: ${message}.`;
    case 422:
      return `Invalid ${error.field || "input"}: ${message}.`;
    case 429: {
      const wait = error.retryAfter ? ` Try again in ${error.retryAfter} s.` : "";
      return `Too many turns started in this session.${wait}`;
    }
    case 503:
      return `The service is unavailable for now: ${message}. Try again shortly.`;
    default:
      return `API error ${error.status} ${error.code}: ${message}`;
  }
}

function segment(value) {
  return encodeURIComponent(String(value));
}

/** `path("sessions", id, "turns")` -> "/sessions/<id>/turns" with every segment encoded. */
export function path(...segments) {
  return "/" + segments.map(segment).join("/");
}

export class ApiClient {
  /** `connection`: {baseUrl, token}; the token goes in the Authorization header only. */
  constructor(connection, { fetchImpl = (...args) => window.fetch(...args) } = {}) {
    this.baseUrl = connection.baseUrl;
    this.token = connection.token;
    this.fetchImpl = fetchImpl;
  }

  headers(extra = {}) {
    const headers = { ...extra };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    return headers;
  }

  /** The raw Response of a request (transport failures -> UnreachableError). */
  async send(method, route, { body, query, signal, accept } = {}) {
    const url = new URL(this.baseUrl + route);
    for (const [key, value] of Object.entries(query || {})) {
      if (value !== undefined && value !== null) url.searchParams.set(key, String(value));
    }
    const init = { method, signal, headers: this.headers(accept ? { Accept: accept } : {}) };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    try {
      return await this.fetchImpl(url.href, init);
    } catch (error) {
      if (error && error.name === "AbortError") throw error;
      throw new UnreachableError(`Cannot reach the API at ${this.baseUrl} (it may be restarting).`);
    }
  }

  /** The JSON body of a 2xx answer ({} when empty); ApiError for an error answer. */
  async request(method, route, options = {}) {
    const response = await this.send(method, route, options);
    if (!response.ok) throw await errorOf(response);
    const text = await response.text();
    if (!text) return {};
    try {
      return JSON.parse(text);
    } catch {
      throw new ApiError(response.status, "unexpected_answer", `${route} did not answer JSON`);
    }
  }

  get(route, query, options = {}) {
    return this.request("GET", route, { ...options, query });
  }
  post(route, body, options = {}) {
    return this.request("POST", route, { ...options, body });
  }
  put(route, body) {
    return this.request("PUT", route, { body });
  }
  delete(route) {
    return this.request("DELETE", route);
  }
}

/** The ApiError of an error Response (its JSON error body, else its status line). */
export async function errorOf(response) {
  const retryAfter = response.headers.get("Retry-After");
  let detail = null;
  try {
    const body = await response.json();
    detail = body && body.error;
  } catch {
    detail = null;
  }
  if (detail && typeof detail.code === "string") {
    return new ApiError(response.status, detail.code, String(detail.message || detail.code), {
      field: detail.field || null,
      retryAfter,
    });
  }
  return new ApiError(response.status, "http_error", response.statusText || "error", {
    retryAfter,
  });
}
