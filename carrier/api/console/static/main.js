// The console page: agents, the persona editor (form and raw) and the chat, wired to the API.

import { ApiError, TOKEN_HELP, call, health, takeTokenFromFragment, token } from "./api.js";
import { Chat } from "./chat.js";
import { PersonaForm, clearProblems, markProblem } from "./persona.js";
import { clientNodes, showHealth } from "./health.js";
import { History, conflictText, headRevision, timeNode } from "./revisions.js";
import { Overview } from "./overview.js";
import { startViews } from "./views.js";

const $ = (id) => document.getElementById(id);

const TEMPLATE = `# A character in YAML (or paste JSON). Keys the form lacks are kept.
name: Nova
bio:
  - Nova keeps the night shift company at a small observatory.
lore:
  - Nova has named every star visible from the roof.
adjectives: [curious, calm]
topics:
  - astronomy
style:
  all:
    - short, warm sentences
messageExamples:
  - - name: "{{user1}}"
      content: {text: what can I see tonight?}
    - name: Nova
      content: {text: Jupiter rises at nine; bring the small telescope.}
`;

const state = {
  agents: [],
  editing: null, // the id of the agent in the editor, or null for a new one
  rawDirty: false, // the raw editor holds text the form has not seen
  agentsError: null, // why the last GET /agents failed, or null
  revision: null, // the head revision the editor loaded: a save is refused if it moved since
  conflict: null, // a save refused as made on an older revision: {body, contentType, head}
  health: null, // the last answer of GET /health, or null
  healthError: null, // why the last GET /health failed, or null
};

const HEALTH_EVERY_MS = 10_000; // clients' states change on their own: read them again that often

const persona = new PersonaForm($("pane-form"));
// The server's word on an agent wins: when a message finds it not running, read the state again.
const chat = new Chat({ describe, onConflict: () => refreshAgents({ keepStatus: true }) });
const overview = new Overview({ describe });
const history = new History({
  describe,
  confirm: (text) => window.confirm(text),
  onReverted: (agent, number) => reverted(agent, number),
});

function say(id, text, kind = "") {
  const node = $(id);
  node.textContent = text;
  node.className = `notice ${kind}`.trim();
}

function describe(error) {
  return error instanceof ApiError ? error.message : `The request failed: ${error.message}`;
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props);
  node.append(...children);
  return node;
}

// --- the token --------------------------------------------------------------------------------

// What the token state says follows the last answer to GET /agents. Every server needs a token:
// CARRIER_ADMIN_TOKEN, or the local one carrier run minted (handed over in the link's fragment).
function showTokenState() {
  const refused = state.agentsError?.status === 401;
  let text;
  if (token.get()) text = refused ? "Token set for this tab, but the server refused it." : "Token set for this tab.";
  else text = "No token set: this server needs the admin token.";
  $("token-state").textContent = text;
}

/** Without a token nothing can be read: say where to find it and put the cursor in the field. */
function askForToken() {
  state.agents = [];
  state.health = null;
  state.healthError = null;
  showHealth($("service-health"), null, null);
  overview.clear();
  state.agentsError = new ApiError(401, { error: "unauthorized", message: TOKEN_HELP });
  say("agents-status", TOKEN_HELP, "warn");
  showTokenState();
  renderAgents();
  $("token").focus();
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  token.set($("token").value.trim());
  $("token").value = "";
  refreshAgents();
});

$("token-forget").addEventListener("click", () => {
  token.set("");
  refreshAgents();
});

// --- agents -----------------------------------------------------------------------------------

// Where it runs (this process, another one, nowhere) against its desired state, which every
// process sharing the store applies.
function statusBadge(agent) {
  let label = agent.status === "running" ? "running elsewhere" : "stopped";
  if (agent.running) label = agent.status === "running" ? "running" : "stopping";
  return el("span", { className: `badge ${agent.running ? "on" : "off"}`, textContent: label });
}

function statusCell(agent) {
  const cell = el("td", { className: "status" }, statusBadge(agent));
  const meta = [];
  if (agent.desired_by) meta.push(`${agent.status === "running" ? "started" : "stopped"} by ${agent.desired_by}`);
  if (agent.revision) meta.push(`revision ${agent.revision}`);
  if (meta.length) {
    const line = el("span", { className: "meta", textContent: meta.join(" · ") });
    if (agent.desired_at) line.title = `desired state set ${timeNode(agent.desired_at).textContent}`;
    cell.append(line);
  }
  return cell;
}

/** Reads /health again and updates the clients' cells in place (nothing else moves). */
async function refreshHealth() {
  try {
    state.health = await health();
    state.healthError = null;
  } catch (error) {
    state.health = null;
    state.healthError = error.status === 401 ? null : error; // the agents' notice says it already
  }
  showHealth($("service-health"), state.health, state.healthError && describe(state.healthError));
  for (const agent of state.agents) {
    const cell = document.getElementById(`agent-${agent.id}`)?.querySelector("td.clients");
    cell?.replaceChildren(...clientNodes(state.health, agent.id));
  }
}

function modelText(agent) {
  if (!agent.running) return "—";
  return agent.offline ? "offline" : agent.model || "—";
}

function button(text, label, onClick, className = "") {
  const node = el("button", { type: "button", textContent: text, className });
  node.setAttribute("aria-label", label);
  node.addEventListener("click", onClick);
  return node;
}

function renderAgents() {
  const rows = state.agents.map((agent) => {
    const toggle = agent.running
      ? button("Stop", `Stop ${agent.name}`, () => setRunning(agent, false))
      : button("Start", `Start ${agent.name}`, () => setRunning(agent, true), "primary");
    const actions = el(
      "div",
      { className: "row-actions" },
      toggle,
      button("Edit", `Edit ${agent.name}`, () => editAgent(agent.id)),
      button("Chat", `Chat with ${agent.name}`, () => chat.show(agent.id, true)),
    );
    const name = el("th", { scope: "row" }, el("span", { className: "agent-name", textContent: agent.name }));
    name.append(el("span", { className: "agent-id", textContent: agent.id }));
    return el(
      "tr",
      { id: `agent-${agent.id}` },
      name,
      statusCell(agent),
      el("td", { className: "clients" }, ...clientNodes(state.health, agent.id)),
      el("td", { className: "model", textContent: modelText(agent), title: agent.model_note || "" }),
      el("td", { className: "actions-cell" }, actions),
    );
  });
  $("agents").tBodies[0].replaceChildren(...rows);
  $("agents").hidden = rows.length === 0;
  $("agents-empty").hidden = rows.length !== 0;
  chat.setAgents(state.agents, state.agentsError !== null);
}

/** Reads the agents' real state from the server; ``keepStatus`` leaves the notice as it is. */
async function refreshAgents({ keepStatus = false } = {}) {
  if (!token.get()) {
    askForToken();
    return;
  }
  const healthRead = refreshHealth();
  try {
    state.agents = await call("GET", "/agents");
    state.agentsError = null;
    if (!keepStatus) say("agents-status", "");
  } catch (error) {
    state.agents = [];
    state.agentsError = error;
    say("agents-status", describe(error), "error");
  }
  await healthRead;
  showTokenState();
  renderAgents();
  if (state.agentsError === null) overview.refresh(state.agents, state.health);
  else overview.clear();
}

function replaceAgent(agent) {
  const at = state.agents.findIndex((a) => a.id === agent.id);
  if (at === -1) state.agents.push(agent);
  else state.agents[at] = agent;
  renderAgents();
}

async function setRunning(agent, run) {
  try {
    const out = await call("POST", `/agents/${encodeURIComponent(agent.id)}/${run ? "start" : "stop"}`);
    replaceAgent(out);
    refreshHealth(); // its clients' states
    const skipped = Object.entries(out.skipped_clients || {}).map(([c, why]) => `${c} (${why})`);
    let text = `${out.name} ${run ? "started" : "stopped"}.`;
    if (skipped.length) text += ` Clients skipped: ${skipped.join("; ")}.`;
    say("agents-status", text, "ok");
    $(`agent-${out.id}`)?.querySelector(`button[aria-label^="${run ? "Stop" : "Start"}"]`)?.focus();
  } catch (error) {
    say("agents-status", describe(error), "error");
    await refreshAgents({ keepStatus: true }); // show the state it is really in
  }
}

async function deleteAgent(agent) {
  if (!window.confirm(`Delete ${agent.name} with all its memories and uploads?`)) return;
  try {
    await call("DELETE", `/agents/${encodeURIComponent(agent.id)}`);
    state.agents = state.agents.filter((a) => a.id !== agent.id);
    chat.forget(agent.id);
    if (state.editing === agent.id) newPersona();
    renderAgents();
    say("agents-status", `${agent.name} deleted.`, "ok");
  } catch (error) {
    say("agents-status", describe(error), "error");
  }
}

$("agents-refresh").addEventListener("click", () => refreshAgents());

$("editor-delete").addEventListener("click", () => {
  const agent = state.agents.find((a) => a.id === state.editing);
  if (agent) deleteAgent(agent);
});

// --- the editor ---------------------------------------------------------------------------------

/** The agent the editor holds (or none: a new persona), at the revision it was read at. */
function setEditing(agent) {
  state.editing = agent ? agent.id : null;
  state.revision = agent?.revision ?? null;
  hideConflict();
  $("editor-heading").textContent = agent ? `Edit ${agent.name}` : "New persona";
  $("editor-revision").textContent = agent?.revision ? `revision ${agent.revision}` : "";
  $("editor-delete").hidden = !agent;
  if (agent) $("editor-delete").setAttribute("aria-label", `Delete ${agent.name}`);
  const label = agent ? "Save changes" : "Create persona";
  $("form-save").textContent = label;
  $("raw-save").textContent = label;
  $("tab-history").hidden = !agent;
  if (!agent && activeTab() === "history") selectTab("form");
  history.reset(agent);
  if (activeTab() === "history") history.load();
}

/** Shows an agent's stored character in the editor, in both tabs. */
function loadIntoEditor(agent) {
  setEditing(agent);
  persona.fill(agent.character);
  $("raw").value = JSON.stringify(agent.character, null, 2);
  state.rawDirty = false;
  clearRawProblems();
}

function newPersona() {
  setEditing(null);
  persona.fill({});
  $("raw").value = TEMPLATE;
  state.rawDirty = false;
  clearRawProblems();
  say("editor-status", "");
}

async function editAgent(id) {
  try {
    const agent = await call("GET", `/agents/${encodeURIComponent(id)}`);
    loadIntoEditor(agent);
    replaceAgent(agent);
    const secrets = Object.entries(agent.secrets || {}).map(([name, s]) => `${name}: ${s}`);
    say("editor-status", secrets.length ? `Secrets (kept on save, never shown): ${secrets.join(", ")}.` : "");
    $("editor").scrollIntoView({ block: "start" });
    $({ raw: "raw", form: "f-name", history: "tab-history" }[activeTab()]).focus();
  } catch (error) {
    say("agents-status", describe(error), "error");
  }
}

/**
 * Creates the persona, or saves the edit on the revision the editor read (``revision``: the one
 * it is made on; "overwrite" passes the newer head on purpose). An edit refused because the
 * character changed elsewhere meanwhile is never retried by itself: the editor says who changed
 * it and waits (resolves with null). Other failures reject.
 */
async function save(body, contentType, revision = state.revision) {
  const id = state.editing;
  let path = "/agents";
  if (id) path = `/agents/${encodeURIComponent(id)}${revision ? `?revision=${revision}` : ""}`;
  let agent;
  try {
    agent = await call(id ? "PUT" : "POST", path, { body, contentType });
  } catch (error) {
    if (!id || !(error instanceof ApiError) || error.code !== "revision_conflict") throw error;
    await showConflict(id, body, contentType);
    return null;
  }
  setEditing(agent);
  replaceAgent(agent);
  persona.fill(agent.character);
  state.rawDirty = false;
  say("editor-status", `${agent.name} ${id ? "saved" : "created"}.`, "ok");
  return agent;
}

// --- an edit made on an older revision ------------------------------------------------------------

function hideConflict() {
  state.conflict = null;
  $("editor-conflict").hidden = true;
  $("conflict-text").textContent = "";
}

/** Says who changed the character since the editor read it; "overwrite" is a choice, not a default. */
async function showConflict(id, body, contentType) {
  const name = state.agents.find((a) => a.id === id)?.name || id;
  const opened = state.revision;
  let head = null;
  try {
    head = await headRevision(id);
  } catch {
    // said below without the details
  }
  if (state.editing !== id) return; // another agent was opened meanwhile
  say("editor-status", "");
  state.conflict = head ? { body, contentType, head: head.number } : null;
  $("conflict-text").textContent = head
    ? conflictText(name, opened, head)
    : `Not saved: ${name} changed elsewhere since you opened it (revision ${opened}). Reload to see it.`;
  $("conflict-overwrite").hidden = !head;
  $("editor-conflict").hidden = false;
  $("conflict-reload").focus();
}

$("conflict-reload").addEventListener("click", () => {
  if (state.editing) editAgent(state.editing);
});

$("conflict-overwrite").addEventListener("click", async () => {
  const conflict = state.conflict;
  if (!conflict) return;
  try {
    const agent = await save(conflict.body, conflict.contentType, conflict.head);
    if (agent) say("editor-status", `${agent.name} saved over revision ${conflict.head}.`, "ok");
  } catch (error) {
    hideConflict();
    say("editor-status", describe(error), "error");
  }
});

/** After a revert from the History tab: the editor shows the new head. */
function reverted(agent, number) {
  const before = state.revision;
  loadIntoEditor(agent);
  replaceAgent(agent);
  const text =
    agent.revision === before
      ? `Nothing to revert: ${agent.name}'s character is revision ${number}'s already.`
      : `${agent.name} reverted to revision ${number}: its character is now revision ${agent.revision}.`;
  say("editor-status", text, "ok");
}

$("pane-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  persona.clear();
  try {
    await save(persona.read());
  } catch (error) {
    say("editor-status", "");
    persona.show(error instanceof ApiError ? error : new ApiError(0, { message: describe(error) }));
  }
});

function clearRawProblems() {
  clearProblems($("pane-raw"));
  $("raw-problems").replaceChildren();
  $("raw-problems").hidden = true;
}

$("raw").addEventListener("input", () => {
  state.rawDirty = true;
});

$("pane-raw").addEventListener("submit", async (event) => {
  event.preventDefault();
  clearRawProblems();
  const text = $("raw").value;
  const json = /^\s*[{[]/.test(text);
  try {
    await save(text, json ? "application/json" : "application/yaml");
  } catch (error) {
    say("editor-status", "");
    const list = $("raw-problems");
    const problems = error instanceof ApiError ? error.problems : [];
    const lead = problems.length
      ? `Not saved: ${problems.length} problem${problems.length > 1 ? "s" : ""} in the character.`
      : describe(error);
    list.append(el("li", { className: "lead", textContent: lead }));
    for (const p of problems) {
      const where = p.file ? `${p.file}: ` : "";
      list.append(el("li", {}, el("code", { textContent: p.path || "(whole file)" }), ` ${where}${p.message}`));
    }
    list.hidden = false;
    $("raw").setAttribute("aria-invalid", "true");
    $("raw").focus();
  }
});

// Tabs: arrow keys move between them; the form and the raw text follow each other; the history
// is read again each time it is shown.

const TABS = ["form", "raw", "history"];

function activeTab() {
  return TABS.find((name) => $(`tab-${name}`).getAttribute("aria-selected") === "true") || "form";
}

function selectTab(which) {
  if (which === activeTab()) return;
  if (which === "raw" && !state.rawDirty) {
    $("raw").value = !state.editing && persona.isEmpty() ? TEMPLATE : JSON.stringify(persona.read(), null, 2);
  }
  if (which === "form" && state.rawDirty) {
    try {
      persona.fill(JSON.parse($("raw").value));
      state.rawDirty = false;
      say("editor-status", "");
    } catch {
      say("editor-status", "The form reads JSON only: save the YAML from the raw editor, or write it as JSON.", "warn");
    }
  }
  for (const name of TABS) {
    const on = name === which;
    $(`tab-${name}`).setAttribute("aria-selected", String(on));
    $(`tab-${name}`).tabIndex = on ? 0 : -1;
    $(`pane-${name}`).hidden = !on;
  }
  if (which === "history") history.load();
}

const MOVES = { ArrowLeft: -1, ArrowRight: 1 };

for (const name of TABS) {
  $(`tab-${name}`).addEventListener("click", () => selectTab(name));
  $(`tab-${name}`).addEventListener("keydown", (event) => {
    if (!(event.key in MOVES) && event.key !== "Home" && event.key !== "End") return;
    event.preventDefault();
    const shown = TABS.filter((n) => !$(`tab-${n}`).hidden);
    const at = shown.indexOf(name);
    let to = shown[(at + (MOVES[event.key] || 0) + shown.length) % shown.length];
    if (event.key === "Home") to = shown[0];
    if (event.key === "End") to = shown.at(-1);
    selectTab(to);
    $(`tab-${to}`).focus();
  });
}

$("new-persona").addEventListener("click", () => {
  newPersona();
  $(activeTab() === "raw" ? "raw" : "f-name").focus();
});

// Clients connect, drop and come back by themselves: their states are read again now and then,
// and the overview's figures every third time (seven calls: well within a token's rate limit).
let ticks = 0;
setInterval(async () => {
  if (!document.hidden && token.get() && state.agentsError === null) {
    await refreshHealth();
    ticks += 1;
    if (ticks % 3 === 0) overview.refresh(state.agents, state.health);
  }
}, HEALTH_EVERY_MS);

$("overview-refresh").addEventListener("click", () => refreshAgents({ keepStatus: true }));

// --- start ----------------------------------------------------------------------------------------

takeTokenFromFragment();
newPersona();
refreshAgents();
// The other views read the agents as Home last did (or ask, when Home has not yet).
startViews($("views"), {
  describe,
  el,
  agents: async () => (state.agentsError === null && state.agents.length ? state.agents : call("GET", "/agents")),
});
