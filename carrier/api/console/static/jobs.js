// The Jobs view: durable jobs filtered by kind, state and agent (GET /jobs), one job's history
// (its attempts, errors and the time between its events), cancel and retry; and the schedules
// that make jobs (GET /jobs/schedules) with their next runs. Everything is set as text.

import { ApiError, call } from "./api.js";

const STATES = ["pending", "claimed", "running", "awaiting_approval", "succeeded", "failed", "cancelled"];
const UNFINISHED = new Set(["pending", "claimed", "running", "awaiting_approval"]);
const RETRYABLE = new Set(["failed", "cancelled"]);
const LIMIT = 100;

/** "12:04:05" today, "25 Nov 12:04" this year, else "1 Jan 2027 09:00"; the full time goes
 * in the title. */
export function when(iso) {
  if (!iso) return "—";
  const at = new Date(iso);
  const now = new Date();
  if (now.toDateString() === at.toDateString()) return at.toLocaleTimeString([], { hour12: false });
  const format = { day: "numeric", month: "short", hour: "2-digit", minute: "2-digit", hour12: false };
  if (at.getFullYear() !== now.getFullYear()) format.year = "numeric";
  return at.toLocaleString([], format);
}

/** A duration in words: "350 ms", "4.2 s", "3 min", "2 h 5 min". */
export function span(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.round(ms / 60_000);
  if (minutes < 60) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

export function stateBadge(el, value) {
  const tone = value === "succeeded" ? "on" : value === "failed" ? "warn" : "off";
  return el("span", { className: `badge ${tone} job-state`, textContent: value.replace("_", " ") });
}

/** The agents this token may see: all (admin), or, for an agent's token (403 on GET /agents),
 * the agents its jobs and schedules name. */
export async function visibleAgents(ctx) {
  try {
    return await ctx.agents();
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 403) throw error;
  }
  const [jobs, schedules] = await Promise.all([call("GET", "/jobs?limit=50"), call("GET", "/jobs/schedules")]);
  const ids = new Set([...jobs, ...schedules].map((x) => x.agent_id).filter(Boolean));
  return Promise.all([...ids].map((id) => call("GET", `/agents/${encodeURIComponent(id)}`)));
}

export function mount(root, ctx) {
  const { el } = ctx;
  let agents = [];
  let open = null; // the id of the job whose history is shown

  const notice = el("p", { className: "notice", role: "status", id: "jobs-notice" });
  const kind = el("input", { id: "jobs-kind", type: "text", placeholder: "any kind", autocomplete: "off" });
  kind.setAttribute("list", "jobs-kinds");
  const kinds = el("datalist", { id: "jobs-kinds" });
  const stateSel = el("select", { id: "jobs-state" }, el("option", { value: "", textContent: "any state" }));
  for (const s of STATES) stateSel.append(el("option", { value: s, textContent: s.replace("_", " ") }));
  const agentSel = el("select", { id: "jobs-agent" }, el("option", { value: "", textContent: "any agent" }));
  const form = el(
    "form",
    { className: "jobs-filters", id: "jobs-filters" },
    el("label", {}, el("span", { textContent: "Kind" }), kind, kinds),
    el("label", {}, el("span", { textContent: "State" }), stateSel),
    el("label", {}, el("span", { textContent: "Agent" }), agentSel),
    el("button", { type: "submit", textContent: "Filter" }),
  );
  const summary = el("p", { className: "subtle jobs-count", id: "jobs-count", textContent: "Loading jobs…" });
  const tbody = el("tbody");
  const table = el(
    "table",
    { className: "jobs-table", id: "jobs-list" },
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        ...["Job", "Agent", "State", "Attempts", "Runs at", "Last error", ""].map((t) => el("th", { scope: "col", textContent: t })),
      ),
    ),
    tbody,
  );
  const scroller = el("div", { className: "table-scroll" }, table);
  const detail = el("section", { className: "panel job-detail", id: "job-detail", hidden: true });
  detail.setAttribute("aria-live", "polite");
  const schedules = el("ul", { className: "schedule-list", id: "jobs-schedules" });

  root.append(
    el(
      "section",
      { className: "panel" },
      el("div", { className: "panel-head" }, el("h2", { textContent: "Jobs" })),
      notice,
      form,
      summary,
      scroller,
    ),
    detail,
    el(
      "section",
      { className: "panel" },
      el("div", { className: "panel-head" }, el("h2", { textContent: "Schedules" })),
      schedules,
    ),
  );

  const agentName = (id) => agents.find((a) => a.id === id)?.name || id || "—";
  const say = (text, tone = "") => {
    notice.className = `notice ${tone}`;
    notice.textContent = text;
  };

  function query() {
    const params = new URLSearchParams({ limit: String(LIMIT) });
    if (kind.value.trim()) params.set("kind", kind.value.trim());
    if (stateSel.value) params.set("state", stateSel.value);
    if (agentSel.value) params.set("agent_id", agentSel.value);
    return `/jobs?${params}`;
  }

  async function act(job, verb) {
    try {
      const changed = await call("POST", `/jobs/${encodeURIComponent(job.id)}/${verb}`, { body: {} });
      say(`Job ${job.kind} ${verb === "retry" ? "queued again" : "cancelled"}: it is ${changed.state.replace("_", " ")}.`, "ok");
      open = job.id;
      await refresh();
    } catch (error) {
      const text = ctx.describe(error);
      const hint = error instanceof ApiError && error.status === 403 && !text.includes("admin token") ? " Cancel and retry need the admin token." : "";
      say(`Could not ${verb} job ${job.id}: ${text}${hint}`, "error");
    }
  }

  function row(job) {
    const tr = el("tr", { id: `job-${job.id}` });
    tr.dataset.state = job.state;
    const show = el("button", { type: "button", textContent: "History" });
    show.setAttribute("aria-controls", "job-detail");
    show.addEventListener("click", () => {
      open = job.id;
      showDetail(job);
      detail.querySelector("h2")?.focus();
    });
    const buttons = [show];
    if (UNFINISHED.has(job.state)) {
      const cancel = el("button", { type: "button", className: "danger", textContent: "Cancel" });
      cancel.addEventListener("click", () => act(job, "cancel"));
      buttons.push(cancel);
    }
    if (RETRYABLE.has(job.state)) {
      const retry = el("button", { type: "button", textContent: "Retry" });
      retry.addEventListener("click", () => act(job, "retry"));
      buttons.push(retry);
    }
    const cell = (label, ...children) => {
      const td = el("td", {}, ...children);
      td.dataset.label = label;
      return td;
    };
    tr.append(
      el("th", { scope: "row" }, el("span", { className: "job-kind", textContent: job.kind }), el("span", { className: "agent-id", textContent: job.id })),
      cell("Agent", agentName(job.agent_id)),
      cell("State", stateBadge(el, job.state)),
      cell("Attempts", `${job.attempts} of ${job.max_attempts}${job.crashes ? `, ${job.crashes} crashed` : ""}`),
      cell("Runs at", el("time", { dateTime: job.run_at, title: job.run_at, textContent: when(job.run_at) })),
      cell("Last error", el("span", { className: "job-error", textContent: job.last_error || "—" })),
      el("td", {}, el("div", { className: "row-actions" }, ...buttons)),
    );
    return tr;
  }

  function showDetail(job) {
    const events = el("ol", { className: "job-events" });
    let previous = null;
    for (const event of job.history) {
      const at = new Date(event.at);
      const gap = previous ? ` · +${span(at - previous)}` : "";
      previous = at;
      events.append(
        el(
          "li",
          { className: `job-event s-${event.state}` },
          stateBadge(el, event.state),
          el("time", { dateTime: event.at, title: event.at, textContent: ` ${when(event.at)}${gap}` }),
          event.worker ? el("span", { className: "meta", textContent: ` on ${event.worker}` }) : "",
          event.note ? el("span", { className: "job-note", textContent: event.note }) : "",
        ),
      );
    }
    const facts = el("dl", { className: "job-facts" });
    const fact = (term, value) => facts.append(el("dt", { textContent: term }), el("dd", { textContent: value }));
    fact("Kind", job.kind);
    fact("Agent", agentName(job.agent_id));
    fact("State", job.state.replace("_", " "));
    fact("Attempts", `${job.attempts} of ${job.max_attempts} (crashes: ${job.crashes} of ${job.max_crashes})`);
    fact("Created", new Date(job.created_at).toLocaleString());
    fact("Last change", `${new Date(job.updated_at).toLocaleString()} (${span(new Date(job.updated_at) - new Date(job.created_at))} after it was created)`);
    if (job.last_error) fact("Last error", job.last_error);
    if (job.result) fact("Result", JSON.stringify(job.result));
    const close = el("button", { type: "button", textContent: "Close" });
    close.addEventListener("click", () => {
      open = null;
      detail.hidden = true;
      document.getElementById(`job-${job.id}`)?.querySelector("button")?.focus();
    });
    const title = el("h2", { textContent: `History of ${job.kind}`, tabIndex: -1 });
    detail.replaceChildren(
      el("div", { className: "panel-head" }, el("div", { className: "title" }, title, el("span", { className: "agent-id", textContent: job.id })), close),
      facts,
      events,
    );
    detail.hidden = false;
  }

  // Each read is numbered: an answer to an older read (other filters, before an action) that
  // arrives after a newer one is dropped, so the list always shows the latest filters.
  let reads = 0;
  async function refresh() {
    const read = ++reads;
    let jobs;
    try {
      jobs = await call("GET", query());
    } catch (error) {
      if (read === reads) summary.textContent = `Jobs could not be read: ${ctx.describe(error)}`;
      return;
    }
    if (read !== reads) return;
    const known = new Set([...kinds.options].map((o) => o.value));
    for (const job of jobs) {
      if (!known.has(job.kind)) {
        known.add(job.kind);
        kinds.append(el("option", { value: job.kind }));
      }
    }
    tbody.replaceChildren(...jobs.map(row));
    table.hidden = !jobs.length;
    summary.textContent = jobs.length
      ? `${jobs.length === LIMIT ? `The newest ${LIMIT}` : jobs.length} job${jobs.length === 1 ? "" : "s"}, newest first.`
      : "No job matches these filters.";
    const shown = jobs.find((j) => j.id === open);
    if (shown) showDetail(shown);
    else if (open) {
      try {
        showDetail(await call("GET", `/jobs/${encodeURIComponent(open)}`));
      } catch {
        detail.hidden = true;
      }
    }
  }

  async function refreshSchedules() {
    let listed;
    try {
      listed = await call("GET", "/jobs/schedules");
    } catch (error) {
      schedules.replaceChildren(el("li", { className: "empty error", textContent: ctx.describe(error) }));
      return;
    }
    if (!listed.length) {
      schedules.replaceChildren(el("li", { className: "empty", textContent: "No schedules: a posting plan makes one." }));
      return;
    }
    schedules.replaceChildren(
      ...listed.map((s) => {
        const next = s.finished ? "done" : s.next_at ? `next ${when(s.next_at)}` : "not queued yet";
        const later = s.upcoming.length ? `, then ${s.upcoming.map(when).join(", ")}` : "";
        return el(
          "li",
          { className: "schedule" },
          el("b", { textContent: s.kind }),
          `${s.agent_id ? ` for ${agentName(s.agent_id)}` : " (the host's)"}: ${s.describe}`,
          el("span", { className: "meta", textContent: `${s.enabled ? "" : "disabled · "}${next}${later}` }),
        );
      }),
    );
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    say("");
    refresh();
  });

  return {
    async show() {
      try {
        agents = await visibleAgents(ctx);
      } catch (error) {
        say(`The agents could not be read: ${ctx.describe(error)}`, "error");
      }
      const chosen = agentSel.value;
      agentSel.replaceChildren(el("option", { value: "", textContent: "any agent" }), ...agents.map((a) => el("option", { value: a.id, textContent: a.name })));
      agentSel.value = agents.some((a) => a.id === chosen) ? chosen : "";
      await Promise.all([refresh(), refreshSchedules()]);
    },
  };
}
