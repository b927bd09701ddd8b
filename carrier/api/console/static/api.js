// The agent API as the page uses it: the bearer token, JSON calls, and streamed messages.

import { readEvents } from "./sse.js";

const TOKEN_KEY = "carrier.adminToken";

/**
 * The admin token for this tab. sessionStorage, not localStorage: it is gone when the tab closes,
 * so it does not outlive the session on an origin (http://127.0.0.1:8000) that the next program
 * listening on that port would share; a new tab gets it from the link again, or typed in.
 */
export const token = {
  get() {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  },
  set(value) {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  },
};

/**
 * Takes a token handed over in the URL's fragment (``/console#token=...``, the link carrier run
 * prints; a fragment never reaches a server) and removes it from the address bar and the tab's
 * history at once, so it is not bookmarked, shared or shown on screen. True when there was one.
 */
export function takeTokenFromFragment() {
  const params = new URLSearchParams(location.hash.slice(1));
  const value = (params.get("token") || "").trim();
  if (!params.has("token")) return false;
  params.delete("token");
  const rest = params.toString();
  history.replaceState(history.state, "", `${location.pathname}${location.search}${rest ? `#${rest}` : ""}`);
  if (value) token.set(value);
  return Boolean(value);
}

/** Where an operator finds the admin token (said when the page has none, or a wrong one). */
export const TOKEN_HELP =
  "Enter the admin token at the top: open the console link carrier run or carrier serve printed " +
  "(it carries the token), or paste the one in admin.token in the data dir (CARRIER_DATA_DIR, " +
  "~/.carrier by default), or CARRIER_ADMIN_TOKEN if you set one.";

const CHAT_KEY = "carrier.consoleChatId";

/**
 * Who this browser is in chat: one id per browser (localStorage, made on first use), so the
 * conversation and its history are the same after a reload, whichever token the tab holds.
 * Only this random id is kept there; the token never is.
 */
export function chatIdentity() {
  let id = localStorage.getItem(CHAT_KEY);
  if (!id) {
    // getRandomValues works on plain http too (randomUUID needs a secure context).
    const bytes = crypto.getRandomValues(new Uint8Array(12));
    id = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    localStorage.setItem(CHAT_KEY, id);
  }
  return { user_id: `console-${id}`, room_id: `console:${id}`, user_name: "Console user" };
}

/** An error answer of the API: {error, message, problems: [{path, message, file}]}. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body.message || `HTTP ${status}`);
    this.status = status;
    this.code = body.error || "error";
    this.problems = Array.isArray(body.problems) ? body.problems : [];
  }
}

function headers(extra) {
  // The console names itself, so its edits are revisions of source "console".
  const out = { "X-Carrier-Client": "console", ...extra };
  const value = token.get();
  if (value) out.Authorization = `Bearer ${value}`;
  return out;
}

async function failure(response) {
  let body;
  try {
    body = await response.json();
  } catch {
    body = { error: "http_error", message: `${response.status} ${response.statusText}` };
  }
  if (response.status === 401) {
    body.message = `${body.message || "unauthorized"}. ${TOKEN_HELP}`;
  }
  return new ApiError(response.status, body);
}

/** One API call. ``body`` is sent as JSON unless ``contentType`` says otherwise. */
export async function call(method, path, { body, contentType } = {}) {
  const init = { method, headers: headers({ Accept: "application/json" }) };
  if (body !== undefined) {
    const type = contentType || "application/json";
    init.headers["Content-Type"] = type;
    init.body = type === "application/json" && typeof body !== "string" ? JSON.stringify(body) : body;
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response.json();
}

/**
 * Send a message and stream the reply: ``onChunk(text)`` for each piece as it arrives.
 * Resolves with the final body of the ``done`` event; rejects with an ApiError.
 */
export async function streamMessage(agentId, text, { onChunk, signal } = {}) {
  const response = await fetch(`/${encodeURIComponent(agentId)}/message`, {
    method: "POST",
    headers: headers({ Accept: "text/event-stream", "Content-Type": "application/json" }),
    body: JSON.stringify({ text, ...chatIdentity() }),
    signal,
  });
  if (!response.ok) throw await failure(response);
  if (!(response.headers.get("content-type") || "").startsWith("text/event-stream")) {
    return response.json(); // a server that does not stream answers with the whole body
  }
  for await (const { event, data } of readEvents(response.body)) {
    if (event === "chunk") onChunk?.(JSON.parse(data));
    else if (event === "done") return JSON.parse(data);
    else if (event === "error") throw new ApiError(502, JSON.parse(data));
  }
  throw new ApiError(502, { error: "stream_ended", message: "the reply stream ended early" });
}

/** The latest ``limit`` messages of this browser's conversation with the agent, oldest first. */
export async function chatHistory(agentId, limit = 50) {
  const query = new URLSearchParams({ room_id: chatIdentity().room_id, limit: String(limit) });
  const page = await call("GET", `/agents/${encodeURIComponent(agentId)}/messages?${query}`);
  return page.items;
}

/**
 * ``GET /health``: {status: "ok" | "degraded", store, agents}. Its body also when it answers 503
 * (the store does not answer), which says why. ``agents`` (each running agent's clients and
 * their states) is there for the admin token only.
 */
export async function health() {
  const response = await fetch("/health", { headers: headers({ Accept: "application/json" }) });
  if (response.ok || response.status === 503) return response.json();
  throw await failure(response);
}

/**
 * The agents this token may read, for a view's agent picker: all for the admin token (ctx.agents,
 * GET /agents); for an agent's token, which GET /agents refuses (403), its own, as the metrics
 * summary (narrowed to it) names it.
 */
export async function visibleAgents(ctx) {
  try {
    return await ctx.agents();
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 403) throw error;
  }
  const summary = await call("GET", "/metrics/summary");
  return Promise.all(summary.agents.map((a) => call("GET", `/agents/${encodeURIComponent(a.agent_id)}`)));
}
