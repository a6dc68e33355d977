// The connection the person chose: API base URL and token, kept in sessionStorage only
// (gone when the tab closes; never put in a URL).

const BASE_KEY = "turnkeep.baseUrl";
const TOKEN_KEY = "turnkeep.token";

/** {baseUrl, token} as stored; the base URL defaults to the page's own origin. */
export function loadConnection() {
  return {
    baseUrl: sessionStorage.getItem(BASE_KEY) || window.location.origin,
    token: sessionStorage.getItem(TOKEN_KEY) || "",
  };
}

/** Store a connection; the URL is checked first (an Error names what is wrong). */
export function saveConnection(baseUrl, token) {
  const url = checkBaseUrl(baseUrl);
  sessionStorage.setItem(BASE_KEY, url);
  sessionStorage.setItem(TOKEN_KEY, token.trim());
  return { baseUrl: url, token: token.trim() };
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** The base URL without a trailing slash; Error unless http(s)://host with no query. */
export function checkBaseUrl(raw) {
  let parsed;
  try {
    parsed = new URL(raw.trim());
  } catch {
    throw new Error("API URL: not a URL (e.g. http://127.0.0.1:8787)");
  }
  if (!["http:", "https:"].includes(parsed.protocol)) {
    throw new Error("API URL: must start with http:// or https://");
  }
  if (parsed.search || parsed.hash) throw new Error("API URL: must not carry a query or #");
  return parsed.href.replace(/\/+$/, "");
}
