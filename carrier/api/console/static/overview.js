// The overview: every agent with its state, clients, model, today's figures and budget, a status
// line for the whole service, and the charts (GET /metrics/summary and GET /metrics/series),
// with the vector index each agent has in this process (rows, and whether searches go through
// its ANN index, are exact, or wait for it to load; summary.agents[].vectors).
// Figures are set as text (never parsed as HTML); a server that keeps no series says so once.

import { ApiError, call } from "./api.js";
import { drawBars, drawChart, formatNumber } from "./charts.js";
import { clientNodes } from "./health.js";

const $ = (id) => document.getElementById(id);

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props);
  node.append(...children);
  return node;
}

const STAGES = ["message", "state", "generate", "actions", "evaluate"];
const DAYS = 14;
const JOBS = ["succeeded", "retried", "failed"];
// The vector index's states (series.py's VectorIndexOut) and their colours (.series-N).
const VECTOR_TONES = { ann: 2, exact: 0, building: 6, loading: 7, database: 4, not_loaded: 7 };
const VECTORS_TITLE = "Vector index: rows per agent, in this process";

function bytes(value) {
  if (value >= 1024 * 1024) return `${(value / (1024 * 1024)).toFixed(1)} MB`;
  if (value >= 1024) return `${Math.round(value / 1024)} KB`;
  return `${value} B`;
}


function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    for (const v of [].concat(value)) search.append(key, String(v));
  }
  return `/metrics/series?${search}`;
}

function lineOf(body, name, agentId = null) {
  return body.lines.find((l) => l.name === name && l.agent_id === agentId);
}

/** ``label`` is shown before the cell's content when the rows are cards (narrow screens). */
function labelled(node, label) {
  node.dataset.label = label;
  return node;
}

function money(value) {
  return formatNumber(value, "$");
}

/** What a budget says: its limits, what was spent against them, and the policy past them. */
function budgetNodes(agent) {
  if (agent.budget_problem) {
    return [el("span", { className: "badge warn", textContent: "invalid" }), ` ${agent.budget_problem}`];
  }
  const budget = agent.budget;
  if (!budget) return [el("span", { className: "subtle", textContent: "none" })];
  const parts = [];
  if (budget.day_usd) parts.push(`${money(agent.cost_usd)} of ${money(budget.day_usd)} today`);
  if (budget.month_usd) parts.push(`${money(agent.month_cost_usd)} of ${money(budget.month_usd)} this month`);
  const policy = budget.policy === "fallback" ? `fallback to ${budget.fallback_model}` : budget.policy;
  const out = [el("span", { textContent: `${parts.join(", ")} · ${policy}` })];
  if (agent.exceeded) {
    const badge = el("span", { className: "badge warn exceeded", textContent: "spent" });
    badge.title = agent.exceeded.reason;
    out.unshift(badge, " ");
    out.push(el("span", { className: "budget-note", textContent: agent.exceeded.reason }));
  }
  return out;
}

function stateNodes(agent) {
  let label = agent.status === "running" ? "running elsewhere" : "stopped";
  if (agent.running) label = agent.status === "running" ? "running" : "stopping";
  const out = [el("span", { className: `badge ${agent.running ? "on" : "off"}`, textContent: label })];
  if (agent.desired_by) {
    const verb = agent.status === "running" ? "started" : "stopped";
    out.push(el("span", { className: "meta", textContent: `${verb} by ${agent.desired_by}` }));
  }
  return out;
}

function modelNodes(agent) {
  if (!agent.running) return [el("span", { className: "subtle", textContent: "—" })];
  const name = el("span", { className: "model-name", textContent: agent.offline ? "offline" : agent.model || "—" });
  const out = [name];
  if (agent.model_note) out.push(el("span", { className: "meta", textContent: agent.model_note }));
  return out;
}

export class Overview {
  /** ``describe(error)``: the words for a failed call (main.js's). */
  constructor({ describe }) {
    this.describe = describe;
    this.busy = false;
    // Empty charts at once, so the page does not grow when the figures arrive.
    for (const figure of document.querySelectorAll(".charts figure:not(#chart-vectors)")) {
      drawChart(figure, { title: figure.querySelector("figcaption").textContent, lines: [] });
    }
    drawBars($("chart-vectors"), { title: VECTORS_TITLE, bars: [] });
  }

  say(text, kind = "") {
    const node = $("overview-status");
    node.textContent = text;
    node.className = `notice ${kind}`.trim();
  }

  clear() {
    $("overview-agents").tBodies[0].replaceChildren();
    $("overview-line").textContent = "";
    this.say("");
  }

  /** Reads the figures and the series again; ``agents`` (GET /agents) and ``health`` (GET /health) as main.js has them. */
  async refresh(agents, health) {
    if (this.busy) return;
    this.busy = true;
    try {
      const now = Math.floor(Date.now() / 1000);
      const days = new Date((now - (DAYS - 1) * 86_400) * 1000).toISOString().slice(0, 10);
      const [summary, turns, latency, spend, trouble, jobs] = await Promise.all([
        call("GET", "/metrics/summary"),
        call("GET", query({ name: "turns", group: "total" })),
        call("GET", query({ name: ["turn", ...STAGES].map((s) => `latency.${s}`), group: "total" })),
        call("GET", query({ name: ["cost_usd", "tokens.prompt", "tokens.completion"], step: "day", from: `${days}T00:00:00Z` })),
        call("GET", query({ name: ["errors", "redactions"], group: "total" })),
        call("GET", query({ name: JOBS.map((j) => `jobs.${j}`), group: "total", step: "day", from: `${days}T00:00:00Z` })),
      ]);
      this.say("");
      this.renderTable(agents, health, summary);
      this.renderCharts(agents, { turns, latency, spend, trouble, jobs });
      this.renderVectors(agents, summary);
    } catch (error) {
      if (error instanceof ApiError && error.code === "series_unavailable") {
        this.say(`No figures: ${error.message}.`, "warn");
        this.renderTable(agents, health, null);
      } else {
        this.say(this.describe(error), "error");
      }
    } finally {
      this.busy = false;
    }
  }

  renderTable(agents, health, summary) {
    const figures = new Map((summary?.agents || []).map((a) => [a.agent_id, a]));
    const rows = agents.map((agent) => {
      const today = figures.get(agent.id);
      const cell = (text, label, className = "num") => labelled(el("td", { className, textContent: text }), label);
      const row = el(
        "tr",
        { id: `overview-${agent.id}` },
        el("th", { scope: "row", textContent: agent.name }),
        el("td", { className: "state" }, ...stateNodes(agent)),
        labelled(el("td", { className: "clients" }, ...clientNodes(health, agent.id)), "Clients"),
        labelled(el("td", { className: "model" }, ...modelNodes(agent)), "Model"),
        cell(today ? String(today.turns) : "—", "Turns today"),
        cell(today ? String(today.errors) : "—", "Errors"),
        cell(today ? formatNumber(today.tokens_prompt + today.tokens_completion) : "—", "Tokens"),
        cell(today ? money(today.cost_usd) : "—", "Cost today", "num cost"),
        labelled(el("td", { className: "budget" }, ...(today ? budgetNodes(today) : [])), "Budget"),
      );
      if (today?.exceeded) row.classList.add("over-budget");
      return row;
    });
    $("overview-agents").tBodies[0].replaceChildren(...rows);
    $("overview-agents").hidden = rows.length === 0;

    const running = agents.filter((a) => a.running).length;
    const parts = [`${agents.length} agent${agents.length === 1 ? "" : "s"}, ${running} running here`];
    if (health) parts.push(`service ${health.status}`);
    if (summary) {
      const t = summary.total;
      parts.push(
        `today ${t.turns} turn${t.turns === 1 ? "" : "s"}, ${t.errors} error${t.errors === 1 ? "" : "s"}, ` +
          `${formatNumber(t.tokens_prompt + t.tokens_completion)} tokens, ${money(t.cost_usd)} ` +
          `(${money(t.month_cost_usd)} this month)`,
      );
      const over = summary.agents.filter((a) => a.exceeded).length;
      if (over) parts.push(`${over} over budget`);
      if (summary.global_exceeded) parts.push(summary.global_exceeded.reason);
      else if (summary.global_budget) parts.push("within the global budget");
    }
    $("overview-line").textContent = `${parts.join(" · ")}.`;
  }

  renderVectors(agents, summary) {
    const name = (id) => agents.find((a) => a.id === id)?.name || id;
    const bars = (summary?.agents || [])
      .filter((a) => a.vectors)
      .map(({ agent_id: id, vectors: v }) => ({
        label: name(id),
        value: v.rows,
        tone: VECTOR_TONES[v.state] ?? 7,
        note: v.bytes ? `${bytes(v.bytes)} · ${v.note}` : v.note,
      }));
    drawBars($("chart-vectors"), { title: VECTORS_TITLE, bars, unit: "rows" });
  }

  renderCharts(agents, { turns, latency, spend, trouble, jobs }) {
    const name = (id) => agents.find((a) => a.id === id)?.name || id || "no agent";
    const perAgent = (body, series) =>
      body.lines.filter((l) => l.name === series).map((l) => ({ label: name(l.agent_id), points: l.points }));
    const stages = (q) =>
      ["turn", ...STAGES]
        .map((s) => ({ label: s === "turn" ? "whole turn" : s, line: lineOf(latency, `latency.${s}.${q}`) }))
        .filter(({ line }) => line && line.points.some(([, v]) => v !== null))
        .map(({ label, line }) => ({ label, points: line.points }));
    const total = (body, series, label) => {
      const line = lineOf(body, series);
      return line ? [{ label, points: line.points }] : [];
    };
    drawChart($("chart-turns"), { title: "Turns per minute (last hour)", lines: total(turns, "turns", "turns") });
    drawChart($("chart-latency-p50"), { title: "Turn latency p50 by stage, ms", lines: stages("p50"), unit: "ms" });
    drawChart($("chart-latency-p95"), { title: "Turn latency p95 by stage, ms", lines: stages("p95"), unit: "ms" });
    drawChart($("chart-cost"), {
      title: `Cost per agent per day, USD (last ${DAYS} days)`,
      lines: perAgent(spend, "cost_usd"),
      kind: "bars",
      unit: "$",
      step: "day",
    });
    const tokens = new Map();
    for (const line of spend.lines.filter((l) => l.name.startsWith("tokens."))) {
      const sum = tokens.get(line.agent_id)?.points.map(([t, v], i) => [t, v + line.points[i][1]]);
      tokens.set(line.agent_id, { label: name(line.agent_id), points: sum || line.points });
    }
    drawChart($("chart-tokens"), {
      title: `Tokens per agent per day (last ${DAYS} days)`,
      lines: [...tokens.values()],
      kind: "bars",
      step: "day",
    });
    drawChart($("chart-errors"), {
      title: "Errors and redactions per minute (last hour)",
      lines: [...total(trouble, "errors", "errors"), ...total(trouble, "redactions", "redactions")],
    });
    drawChart($("chart-jobs"), {
      title: `Job outcomes per day (last ${DAYS} days)`,
      lines: JOBS.flatMap((j) => total(jobs, `jobs.${j}`, j)),
      kind: "bars",
      step: "day",
    });
  }
}
