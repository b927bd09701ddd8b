// The console page: the token, the agents, the overview and the chat, wired to the API; the
// persona editor is editor.js's.

import { ApiError, TOKEN_HELP, call, health, takeTokenFromFragment, token } from "./api.js";
import { Chat } from "./chat.js";
import { startEditor } from "./editor.js";
import { clientNodes, showHealth } from "./health.js";
import { timeNode } from "./revisions.js";
import { Overview } from "./overview.js";
import { startViews } from "./views.js";

const $ = (id) => document.getElementById(id);

const state = {
  agents: [],
  agentsError: null, // why the last GET /agents failed, or null
  health: null, // the last answer of GET /health, or null
  healthError: null, // why the last GET /health failed, or null
};

const HEALTH_EVERY_MS = 10_000; // clients' states change on their own: read them again that often

// The server's word on an agent wins: when a message finds it not running, read the state again.
const chat = new Chat({ describe, onConflict: () => refreshAgents({ keepStatus: true }) });
const overview = new Overview({ describe });

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
      button("Edit", `Edit ${agent.name}`, () => editor.edit(agent.id)),
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
    editor.loadClients(); // once: the clients the persona form offers
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
    if (editor.editing === agent.id) editor.newPersona();
    renderAgents();
    say("agents-status", `${agent.name} deleted.`, "ok");
  } catch (error) {
    say("agents-status", describe(error), "error");
  }
}

$("agents-refresh").addEventListener("click", () => refreshAgents());

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
const editor = startEditor({
  describe,
  say,
  agents: () => state.agents,
  replaceAgent,
  deleteAgent,
});
refreshAgents();
// The other views read the agents as Home last did (or ask, when Home has not yet).
startViews($("views"), {
  describe,
  el,
  agents: async () => (state.agentsError === null && state.agents.length ? state.agents : call("GET", "/agents")),
});
