// The "Logs & audit" view: a live tail of one agent's log lines (GET /agents/{id}/logs/stream,
// server-sent events; every line was redacted on the server) with a level filter, and the
// audit log (GET /audit, admin only) with its filters and older pages.

import { ApiError, call, token, visibleAgents } from "./api.js";
import { readEvents } from "./sse.js";

const LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"];
const KEEP_LINES = 500; // lines shown; older ones leave the top

export function mount(root, ctx) {
  // ctx.el, and data-* attributes from a ``dataset`` prop (a getter-only property on elements)
  const el = (tag, { dataset, ...props } = {}, ...children) => {
    const node = ctx.el(tag, props, ...children);
    if (dataset) Object.assign(node.dataset, dataset);
    return node;
  };

  function notice(id) {
    const node = el("p", { className: "notice", role: "status", id });
    const say = (text, kind = "") => {
      node.textContent = text;
      node.className = `notice ${kind}`.trim();
    };
    return [node, say];
  }

  function labelled(id, label, input) {
    input.id = id;
    return el("div", { className: "acc-field" }, el("label", { htmlFor: id, textContent: label }), input);
  }

  // --- live tail -----------------------------------------------------------------------------
  const agent = el("select");
  const level = el("select", {}, ...LEVELS.map((l) => el("option", { value: l, textContent: l.toLowerCase() })));
  level.value = "INFO";
  const follow = el("button", { type: "button", className: "primary", textContent: "Follow" });
  const clear = el("button", { type: "button", textContent: "Clear" });
  const lines = el("ol", { className: "log-lines", id: "log-lines", tabIndex: 0 });
  lines.setAttribute("aria-label", "Log lines");
  lines.setAttribute("aria-live", "polite");
  const [tailNotice, sayTail] = notice("log-status");
  let running = null; // {abort: AbortController}
  let lastSeq = 0;

  function lineNode(line) {
    const at = new Date(line.at);
    return el(
      "li",
      { className: `log-line lv-${line.level.toLowerCase()}`, dataset: { level: line.level, seq: String(line.seq) } },
      el("time", { dateTime: line.at, textContent: at.toLocaleTimeString() }),
      el("span", { className: "log-level", textContent: line.level }),
      el("span", { className: "log-logger", textContent: line.logger }),
      el("span", { className: "log-text", textContent: line.message }),
    );
  }

  function append(line) {
    lastSeq = Math.max(lastSeq, line.seq);
    const atBottom = lines.scrollTop + lines.clientHeight >= lines.scrollHeight - 4;
    lines.append(lineNode(line));
    while (lines.childElementCount > KEEP_LINES) lines.firstElementChild.remove();
    if (atBottom) lines.scrollTop = lines.scrollHeight; // stays where the reader scrolled to
  }

  function stop(message) {
    running?.abort.abort();
    running = null;
    follow.textContent = "Follow";
    if (message) sayTail(message);
  }

  async function start() {
    stop();
    if (!agent.value) {
      sayTail("No agent to follow: create one on Home.", "warn");
      return;
    }
    const abort = new AbortController();
    running = { abort };
    follow.textContent = "Stop";
    const query = new URLSearchParams({ level: level.value, after: String(lastSeq) });
    const headers = { Accept: "text/event-stream" };
    if (token.get()) headers.Authorization = `Bearer ${token.get()}`;
    sayTail(`Following ${agent.selectedOptions[0]?.textContent || agent.value} at ${level.value.toLowerCase()} and above…`);
    try {
      const response = await fetch(`/agents/${encodeURIComponent(agent.value)}/logs/stream?${query}`, { headers, signal: abort.signal });
      if (!response.ok) {
        let body = {};
        try {
          body = await response.json();
        } catch {
          body = { message: `${response.status} ${response.statusText}` };
        }
        throw new ApiError(response.status, body);
      }
      for await (const { event, data } of readEvents(response.body)) {
        if (abort.signal.aborted) return; // stopped, or restarted at another level
        if (event === "line") append(JSON.parse(data));
      }
      if (running?.abort === abort) stop("The server ended the stream (it restarted?): press Follow to go on.");
    } catch (error) {
      if (abort.signal.aborted) return;
      stop();
      sayTail(ctx.describe(error), "error");
    }
  }

  follow.addEventListener("click", () => (running ? stop("Stopped.") : start()));
  clear.addEventListener("click", () => lines.replaceChildren());
  for (const select of [agent, level]) {
    select.addEventListener("change", () => {
      lastSeq = 0; // the kept lines again, of this agent at this level
      lines.replaceChildren();
      if (running) start();
    });
  }

  const tail = el(
    "section",
    { className: "panel", id: "log-tail" },
    el(
      "div",
      { className: "panel-head" },
      el("h2", { textContent: "Live log" }),
      el("div", { className: "actions" }, labelled("log-agent", "Agent", agent), labelled("log-level", "Level", level), follow, clear),
    ),
    tailNotice,
    lines,
  );

  // --- audit ---------------------------------------------------------------------------------
  const fAgent = el("select");
  const fActor = el("input", { placeholder: "admin, token:<name>…", autocomplete: "off" });
  const fKind = el("input", { placeholder: "api.call, agent.start…", autocomplete: "off" });
  const fSince = el("input", { type: "datetime-local" });
  const search = el("button", { type: "submit", className: "primary", textContent: "Filter" });
  const more = el("button", { type: "button", textContent: "Older", hidden: true });
  const rows = el("tbody");
  const [auditNotice, sayAudit] = notice("audit-status");
  let cursor = null;

  function auditRow(e) {
    const detail = Object.keys(e.detail || {}).length ? JSON.stringify(e.detail) : "";
    return el(
      "tr",
      { dataset: { kind: e.kind } },
      el("td", { textContent: new Date(e.at).toLocaleString() }),
      el("td", {}, el("span", { className: `badge ${e.result === "ok" ? "on" : "warn"}`, textContent: e.result }), " ", e.kind),
      el("td", { textContent: e.actor || "" }),
      el("td", { className: "audit-action" }, el("span", { textContent: e.action }), el("span", { className: "agent-id", textContent: [e.target, detail].filter(Boolean).join(" ") })),
    );
  }

  async function loadAudit(older = false) {
    const query = new URLSearchParams({ limit: "50" });
    if (fAgent.value) query.set("agent_id", fAgent.value);
    if (fActor.value.trim()) query.set("actor", fActor.value.trim());
    for (const kind of fKind.value.split(",").map((k) => k.trim()).filter(Boolean)) query.append("kind", kind);
    if (fSince.value) query.set("since", new Date(fSince.value).toISOString());
    if (older && cursor) query.set("cursor", cursor);
    const page = await call("GET", `/audit?${query}`);
    const built = page.items.map(auditRow);
    if (older) rows.append(...built);
    else rows.replaceChildren(...(built.length ? built : [el("tr", {}, el("td", { colSpan: 4, className: "empty", textContent: "Nothing matches these filters." }))]));
    cursor = page.next_cursor;
    more.hidden = !cursor;
    sayAudit("");
  }

  const form = el(
    "form",
    { className: "audit-filters" },
    labelled("audit-agent", "Agent", fAgent),
    labelled("audit-actor", "Actor", fActor),
    labelled("audit-kind", "Kinds (comma-separated)", fKind),
    labelled("audit-since", "Since", fSince),
    search,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    loadAudit().catch((error) => sayAudit(ctx.describe(error), "error"));
  });
  more.addEventListener("click", () => loadAudit(true).catch((error) => sayAudit(ctx.describe(error), "error")));

  const audit = el(
    "section",
    { className: "panel", id: "audit" },
    el("div", { className: "panel-head" }, el("h2", { textContent: "Audit log" })),
    auditNotice,
    form,
    el(
      "div",
      { className: "table-wrap" },
      el("table", { className: "agents", id: "audit-table" }, el("thead", {}, el("tr", {}, ...["When", "What", "Who", "Action"].map((t) => el("th", { scope: "col", textContent: t })))), rows),
    ),
    more,
  );

  root.replaceChildren(tail, audit);

  return {
    async show() {
      const agents = await visibleAgents(ctx);
      const keep = agent.value;
      agent.replaceChildren(...agents.map((a) => el("option", { value: a.id, textContent: a.name })));
      if (agents.some((a) => a.id === keep)) agent.value = keep;
      const keepF = fAgent.value;
      fAgent.replaceChildren(el("option", { value: "", textContent: "any agent" }), ...agents.map((a) => el("option", { value: a.id, textContent: a.name })));
      fAgent.value = agents.some((a) => a.id === keepF) ? keepF : "";
      await loadAudit().catch((error) => sayAudit(ctx.describe(error), "error"));
    },
  };
}
