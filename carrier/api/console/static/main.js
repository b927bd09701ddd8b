// The console page: agents, the persona editor (form and raw) and the chat, wired to the API.

import { ApiError, TOKEN_HELP, call, takeTokenFromFragment, token } from "./api.js";
import { Chat } from "./chat.js";
import { PersonaForm, clearProblems, markProblem } from "./persona.js";

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
};

const persona = new PersonaForm($("pane-form"));
// The server's word on an agent wins: when a message finds it not running, read the state again.
const chat = new Chat({ describe, onConflict: () => refreshAgents({ keepStatus: true }) });

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

function statusBadge(agent) {
  const label = agent.running ? "running" : agent.status === "running" ? "running elsewhere" : "stopped";
  return el("span", { className: `badge ${agent.running ? "on" : "off"}`, textContent: label });
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
      el("td", {}, statusBadge(agent)),
      el("td", { className: "model", textContent: modelText(agent), title: agent.model_note || "" }),
      el("td", {}, actions),
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
  try {
    state.agents = await call("GET", "/agents");
    state.agentsError = null;
    if (!keepStatus) say("agents-status", "");
  } catch (error) {
    state.agents = [];
    state.agentsError = error;
    say("agents-status", describe(error), "error");
  }
  showTokenState();
  renderAgents();
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

function setEditing(agent) {
  state.editing = agent ? agent.id : null;
  $("editor-heading").textContent = agent ? `Edit ${agent.name}` : "New persona";
  $("editor-delete").hidden = !agent;
  if (agent) $("editor-delete").setAttribute("aria-label", `Delete ${agent.name}`);
  const label = agent ? "Save changes" : "Create persona";
  $("form-save").textContent = label;
  $("raw-save").textContent = label;
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
    setEditing(agent);
    persona.fill(agent.character);
    $("raw").value = JSON.stringify(agent.character, null, 2);
    state.rawDirty = false;
    clearRawProblems();
    const secrets = Object.entries(agent.secrets || {}).map(([name, s]) => `${name}: ${s}`);
    say("editor-status", secrets.length ? `Secrets (kept on save, never shown): ${secrets.join(", ")}.` : "");
    $("editor").scrollIntoView({ block: "start" });
    $(activeTab() === "raw" ? "raw" : "f-name").focus();
  } catch (error) {
    say("agents-status", describe(error), "error");
  }
}

async function save(body, contentType) {
  const path = state.editing ? `/agents/${encodeURIComponent(state.editing)}` : "/agents";
  const agent = await call(state.editing ? "PUT" : "POST", path, { body, contentType });
  const created = !state.editing;
  setEditing(agent);
  replaceAgent(agent);
  say("editor-status", `${agent.name} ${created ? "created" : "saved"}.`, "ok");
  return agent;
}

$("pane-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  persona.clear();
  try {
    const agent = await save(persona.read());
    persona.fill(agent.character);
    state.rawDirty = false;
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
    const agent = await save(text, json ? "application/json" : "application/yaml");
    persona.fill(agent.character);
    state.rawDirty = false;
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

// Tabs: arrow keys move between them; the form and the raw text follow each other.

function activeTab() {
  return $("tab-raw").getAttribute("aria-selected") === "true" ? "raw" : "form";
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
  for (const name of ["form", "raw"]) {
    const on = name === which;
    $(`tab-${name}`).setAttribute("aria-selected", String(on));
    $(`tab-${name}`).tabIndex = on ? 0 : -1;
    $(`pane-${name}`).hidden = !on;
  }
}

for (const name of ["form", "raw"]) {
  $(`tab-${name}`).addEventListener("click", () => selectTab(name));
  $(`tab-${name}`).addEventListener("keydown", (event) => {
    if (!["ArrowLeft", "ArrowRight", "Home", "End"].includes(event.key)) return;
    event.preventDefault();
    const other = name === "form" ? "raw" : "form";
    const to = event.key === "Home" ? "form" : event.key === "End" ? "raw" : other;
    selectTab(to);
    $(`tab-${to}`).focus();
  });
}

$("new-persona").addEventListener("click", () => {
  newPersona();
  $(activeTab() === "raw" ? "raw" : "f-name").focus();
});

// --- start ----------------------------------------------------------------------------------------

takeTokenFromFragment();
newPersona();
refreshAgents();
