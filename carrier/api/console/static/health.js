// What /health says, as the agent list shows it: each running agent's clients with their states
// (in the web process of a web + worker deployment they read "elsewhere": a worker connects
// them), and the service's overall status, "degraded" when a configured client is down.
// Errors come from platforms and proxies: they are set as text, never parsed as HTML.

import { timeNode } from "./revisions.js";

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props);
  node.append(...children);
  return node;
}

/** Each status of carrier.clients.ClientStatus, in words, and what it means for the operator. */
const CLIENT_STATES = {
  connected: ["connected", "connected and handling events"],
  connecting: ["connecting", "making its first connection"],
  retrying: ["retrying", "down: it connects again by itself, with a growing pause"],
  failed: ["failed", "refused for good: fix what the error says, then start the agent again"],
  not_configured: ["not configured", "no credentials for it in this process"],
  elsewhere: ["elsewhere", "its connection runs in another Carrier process (a worker)"],
};

const DOWN = new Set(["retrying", "failed"]);

/**
 * The clients of agent ``agentId`` as ``out`` (the body of GET /health) reports them: a chip per
 * client with its state, then since when and its last error. An agent that does not run in this
 * process is not in ``out``: a dash.
 */
export function clientNodes(out, agentId) {
  const entry = (out?.agents || []).find((a) => a.id === agentId);
  if (!entry) return [el("span", { className: "subtle", textContent: "—" })];
  const names = Object.keys(entry.clients);
  if (!names.length) return [el("span", { className: "subtle", textContent: "no clients" })];
  const list = el("ul", { className: "clients-list" });
  for (const name of names) {
    const client = entry.clients[name];
    const [words, meaning] = CLIENT_STATES[client.status] || [client.status, ""];
    const chip = el("span", { className: `chip s-${client.status}`, title: meaning }, `${name} `);
    chip.append(el("b", { textContent: words }));
    const item = el("li", { className: "client" }, chip);
    item.dataset.client = name;
    item.dataset.status = client.status;
    const note = el("span", { className: "client-note" });
    if (client.since && client.status !== "elsewhere") note.append("since ", timeNode(client.since));
    if (client.last_error) note.append(note.childNodes.length ? ": " : "", client.last_error);
    if (note.childNodes.length) item.append(note);
    list.append(item);
  }
  return [list];
}

/**
 * Shows the service's status in ``node``: ok, or degraded and what is down (the store, or which
 * agent's client). ``problem``: why /health could not be read (then ``out`` is null).
 */
export function showHealth(node, out, problem) {
  node.hidden = !out && !problem;
  node.className = `service-health ${out?.status || ""}`.trim();
  if (!out) {
    node.replaceChildren(problem ? `Service state unknown: ${problem}` : "");
    return;
  }
  const down = [];
  if (out.store !== "ok") down.push(`the store is ${out.store}`);
  for (const agent of out.agents || []) {
    for (const [name, client] of Object.entries(agent.clients)) {
      if (DOWN.has(client.status)) down.push(`${agent.name}'s ${name} client is ${client.status}`);
    }
  }
  const ok = out.status === "ok";
  const badge = el("span", { className: `badge ${ok ? "on" : "warn"}`, textContent: out.status });
  const text = ok ? "no configured client is down." : `${down.join("; ") || "a configured client is down"}.`;
  node.replaceChildren("Service ", badge, `: ${text}`);
}
