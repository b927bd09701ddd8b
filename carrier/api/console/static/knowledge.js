// The Knowledge view: an agent's documents with their chunk counts and sync state; upload a
// document (kept under the agent's knowledge and ingested at once), remove one, re-sync all.
// GET/POST/DELETE /agents/{id}/knowledge and POST .../knowledge/sync. An agent's token may list;
// changing needs the admin token (the server says so, and the notice shows it).

import { ApiError, call, token, visibleAgents } from "./api.js";

const STATES = {
  synced: ["on", "synced"],
  stale: ["warn", "stale: re-sync to embed again"],
  empty: ["off", "no text (a scanned PDF needs OCR)"],
  missing: ["warn", "file gone: re-sync forgets it"],
};

/** POST a multipart form (api.js's call() sends JSON); raises ApiError like call(). */
async function upload(path, form) {
  const headers = { Accept: "application/json", "X-Carrier-Client": "console" };
  if (token.get()) headers.Authorization = `Bearer ${token.get()}`;
  const response = await fetch(path, { method: "POST", headers, body: form });
  let body = {};
  try {
    body = await response.json();
  } catch {
    body = { message: `${response.status} ${response.statusText}` };
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

export function mount(root, ctx) {
  // ctx.el, and data-* attributes from a ``dataset`` prop (a getter-only property on elements)
  const el = (tag, { dataset, ...props } = {}, ...children) => {
    const node = ctx.el(tag, props, ...children);
    if (dataset) Object.assign(node.dataset, dataset);
    return node;
  };
  const picker = el("select", { id: "knowledge-agent" });
  const notice = el("p", { className: "notice", role: "status" });
  const summary = el("p", { className: "hint", id: "knowledge-summary" });
  const rows = el("tbody");
  const table = el(
    "table",
    { className: "agents kn-table", id: "knowledge-docs" },
    el(
      "thead",
      {},
      el("tr", {}, ...["Document", "Chunks", "Words", "State", ""].map((t) => el("th", { scope: "col", textContent: t }))),
    ),
    rows,
  );
  const file = el("input", { type: "file", id: "knowledge-file", accept: ".txt,.md,.pdf" });
  const send = el("button", { type: "submit", className: "primary", textContent: "Upload" });
  const form = el(
    "form",
    { className: "kn-upload" },
    el("label", { htmlFor: "knowledge-file", textContent: "Add a document (.txt, .md, .pdf)" }),
    file,
    send,
  );
  const resync = el("button", { type: "button", textContent: "Re-sync" });
  root.replaceChildren(
    el(
      "section",
      { className: "panel", ariaLabel: "Knowledge" },
      el(
        "div",
        { className: "panel-head" },
        el("h2", { textContent: "Knowledge" }),
        el("div", { className: "actions" }, el("label", { htmlFor: "knowledge-agent", className: "sr-only", textContent: "Agent" }), picker, resync),
      ),
      notice,
      summary,
      el("div", { className: "table-wrap" }, table),
      form,
    ),
  );

  function say(text, kind = "") {
    notice.textContent = text;
    notice.className = `notice ${kind}`.trim();
  }

  const agentId = () => picker.value;

  async function load() {
    if (!agentId()) {
      rows.replaceChildren();
      summary.textContent = "No agent yet: create one on Home.";
      return;
    }
    const data = await call("GET", `/agents/${encodeURIComponent(agentId())}/knowledge`);
    summary.textContent =
      `${data.documents.length} document(s), ${data.chunks} chunk(s), embedded by ${data.embedding_model}; ` +
      `uploads up to ${Math.round(data.max_bytes / 1e6)} MB.`;
    rows.replaceChildren(...(data.documents.length ? data.documents.map(row) : [emptyRow()]));
  }

  function emptyRow() {
    return el("tr", {}, el("td", { colSpan: 5, className: "empty", textContent: "No documents: upload one below." }));
  }

  function row(doc) {
    const [kind, label] = STATES[doc.state] || ["off", doc.state];
    const remove = el("button", { type: "button", className: "danger", textContent: "Remove" });
    remove.setAttribute("aria-label", `Remove ${doc.title}`);
    remove.addEventListener("click", () => act(remove, () => forget(doc)));
    return el(
      "tr",
      { dataset: { source: doc.source } },
      el("th", { scope: "row" }, el("span", { className: "agent-name", textContent: doc.title }), el("span", { className: "agent-id", textContent: `${doc.origin} · ${doc.source}` })),
      el("td", { className: "num", textContent: String(doc.chunks) }),
      el("td", { className: "num", textContent: String(doc.words) }),
      el("td", {}, el("span", { className: `badge ${kind}`, textContent: label })),
      el("td", {}, el("div", { className: "row-actions" }, remove)),
    );
  }

  async function forget(doc) {
    if (doc.origin === "character") {
      say(`${doc.title} is listed by the character: remove it from its knowledge in the editor, or it comes back at the next sync.`, "warn");
    }
    const report = await call("DELETE", `/agents/${encodeURIComponent(agentId())}/knowledge?source=${encodeURIComponent(doc.source)}`);
    say(`Removed: ${report.removed.join(", ")}`, "ok");
  }

  async function act(button, work) {
    button.disabled = true;
    try {
      await work();
      await load();
    } catch (error) {
      const problems = error instanceof ApiError ? error.problems.map((p) => `${p.path}: ${p.message}`) : [];
      say([ctx.describe(error), ...problems.filter((p) => !p.endsWith(error.message))].join(" — "), "error");
    } finally {
      button.disabled = false;
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = file.files[0];
    if (!chosen) {
      say("Choose a .txt, .md or .pdf file first.", "warn");
      return;
    }
    act(send, async () => {
      say(`Uploading ${chosen.name}…`);
      const data = new FormData();
      data.append("file", chosen, chosen.name);
      const report = await upload(`/agents/${encodeURIComponent(agentId())}/knowledge`, data);
      say(`${chosen.name}: ${report.summary}`, "ok");
      file.value = "";
    });
  });

  resync.addEventListener("click", () =>
    act(resync, async () => {
      const report = await call("POST", `/agents/${encodeURIComponent(agentId())}/knowledge/sync`);
      say(report.error ? `Not synced: ${report.error}` : `Re-synced: ${report.summary}`, report.error ? "error" : "ok");
    }),
  );

  picker.addEventListener("change", () => load().catch((error) => say(ctx.describe(error), "error")));

  return {
    async show() {
      const agents = await visibleAgents(ctx);
      const keep = picker.value;
      picker.replaceChildren(...agents.map((a) => el("option", { value: a.id, textContent: a.name })));
      if (agents.some((a) => a.id === keep)) picker.value = keep;
      try {
        await load();
      } catch (error) {
        say(ctx.describe(error), "error");
      }
    },
  };
}
