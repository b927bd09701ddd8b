// A turn as the Conversations view shows it: a room's message, and under the turn's first reply
// its trace (the model's thought, the actions and their outcomes, the time by stage as bars, the
// model, tokens and cost), folded in a <details> so a long history stays short. Everything is
// set as text; the bars' widths are classes (w0..w20), as the CSP allows no inline style.

const STAGES = ["receive", "message", "state", "generate", "actions"];

export function when(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? "" : date.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
}

export function plural(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}

export function usd(value) {
  if (!value) return "$0";
  return value < 0.01 ? `$${value.toPrecision(2)}` : `$${value.toFixed(4)}`;
}

function traceNode(el, item) {
  const usage = item.usage || {};
  const tokens = (usage.prompt_tokens || 0) + (usage.completion_tokens || 0);
  const total = Object.values(item.timings_ms).reduce((a, b) => a + b, 0);
  const actions = item.actions.map((a) => a.action).join(", ") || "no action";
  const summary = el("summary", {
    textContent: `Trace: ${actions} · ${Math.round(total)} ms · ${plural(tokens, "token")} · ${usd(usage.cost_usd || 0)}`,
  });
  const parts = [summary];
  parts.push(el("p", { className: "trace-thought" }, el("b", { textContent: "Thought: " }), item.thought || "none recorded"));
  const list = el("ul", { className: "trace-actions" });
  for (const a of item.actions) {
    list.append(el("li", { className: a.ok ? "ok" : "failed", textContent: `${a.action}: ${a.ok ? "ok" : a.error || "failed"}` }));
  }
  if (!item.actions.length) list.append(el("li", { textContent: "no actions recorded" }));
  parts.push(el("div", {}, el("b", { textContent: "Actions" }), list));
  const rows = el("tbody");
  const stages = [...STAGES.filter((s) => s in item.timings_ms), ...Object.keys(item.timings_ms).filter((s) => !STAGES.includes(s))];
  for (const stage of stages) {
    const ms = item.timings_ms[stage];
    const bar = el("span", { className: "trace-bar" });
    bar.dataset.share = total ? String(Math.round((ms / total) * 100)) : "0";
    // The bar's width: one of twenty steps set by class (no inline style under the CSP).
    bar.classList.add(`w${Math.min(20, Math.round((ms / (total || 1)) * 20))}`);
    rows.append(el("tr", {}, el("th", { scope: "row", textContent: stage }), el("td", { className: "num", textContent: `${ms.toFixed(1)} ms` }), el("td", { className: "bar-cell" }, bar)));
  }
  parts.push(
    el(
      "table",
      { className: "trace-timings" },
      el("caption", { textContent: "Time by stage" }),
      rows,
    ),
  );
  const model = item.model || "unknown model";
  parts.push(
    el("p", {
      className: "trace-cost",
      textContent: `${model} · ${plural(usage.calls || 0, "call")} · ${usage.prompt_tokens || 0} prompt + ${usage.completion_tokens || 0} completion tokens · ${usd(usage.cost_usd || 0)}`,
    }),
  );
  return el("details", { className: "turn-trace" }, ...parts);
}

export function messageNode(el, item) {
  const node = el(
    "li",
    { className: `conv-msg ${item.role}` },
    el("span", { className: "who", textContent: `${item.speaker} · ${when(item.created_at)}` }),
    el("p", { className: "text", textContent: item.text || "(no text)" }),
  );
  node.dataset.id = item.id;
  const quiet = item.role === "user" && !["processed", "pending", "received"].includes(item.status);
  if (quiet || item.status === "failed") {
    node.append(el("span", { className: "note", textContent: `${item.status}${item.error ? `: ${item.error}` : ""}` }));
  }
  if (item.role === "agent" && (item.usage || item.actions.length || item.thought)) node.append(traceNode(el, item));
  return node;
}
