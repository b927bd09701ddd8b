// An agent's history in the editor's History tab: its character's revisions, newest first, what
// each one changed, and a revert; and the words for an edit refused because the character
// changed elsewhere meanwhile (a file imported by a worker, another browser, carrier agents).
// Characters are user data: everything here is set as text, never parsed as HTML.

import { call } from "./api.js";

const $ = (id) => document.getElementById(id);

const PAGE = 20;

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props);
  node.append(...children);
  return node;
}

function revisionsPath(agentId, rest = "") {
  return `/agents/${encodeURIComponent(agentId)}/revisions${rest}`;
}

/** A time from the API as this browser words it, in a <time> element. */
export function timeNode(iso) {
  const date = new Date(iso);
  const text = Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
  const node = el("time", { textContent: text });
  node.dateTime = String(iso);
  return node;
}

function whenText(iso) {
  return timeNode(iso).textContent;
}

/** The agent's head revision as the list shows it: {number, source, actor, note, created_at}. */
export async function headRevision(agentId) {
  const page = await call("GET", revisionsPath(agentId, "?limit=1"));
  return page.items[0] || { number: page.head };
}

/**
 * What the editor says when a save was refused with 409 ``revision_conflict``: the revision it
 * was opened on, and who made the newer one (``head`` as :func:`headRevision` reads it).
 */
export function conflictText(name, opened, head) {
  const by = head.actor ? ` by ${head.actor}` : "";
  const how = [head.source, head.created_at ? whenText(head.created_at) : ""].filter(Boolean);
  const detail = how.length ? ` (${how.join(", ")})` : "";
  return (
    `Not saved: ${name} changed elsewhere since you opened it (revision ${opened}): ` +
    `revision ${head.number}${by}${detail}. Reload to see it, or overwrite it with your version.`
  );
}

/** A value of a changed field, as one line of text. */
function shown(value) {
  return value === null || value === undefined ? "—" : JSON.stringify(value);
}

/** The unified diff's lines, each a span whose class says added, removed or a hunk header. */
function diffLines(text) {
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  return lines.map((line) => {
    let kind = "";
    if (line.startsWith("+++") || line.startsWith("---")) kind = "file";
    else if (line.startsWith("@@")) kind = "hunk";
    else if (line.startsWith("+")) kind = "add";
    else if (line.startsWith("-")) kind = "del";
    return el("span", { className: `line ${kind}`.trim(), textContent: `${line}\n` });
  });
}

export class History {
  /**
   * ``describe(error)`` words a failed request; ``confirm(text)`` asks before a revert;
   * ``onReverted(agent, number)`` gets the agent as the revert answered it (its new head).
   */
  constructor({ describe, confirm, onReverted }) {
    this.describe = describe;
    this.confirm = confirm;
    this.onReverted = onReverted;
    this.agent = null; // {id, name} of the agent shown
    this.head = null;
    this.nextBefore = null;
    this.list = $("rev-list");
    this.diff = $("rev-diff");
    $("rev-more").addEventListener("click", () => this.load(false));
  }

  say(text, kind = "") {
    const node = $("rev-status");
    node.textContent = text;
    node.className = `notice ${kind}`.trim();
  }

  /** Forgets what was shown: the next :meth:`load` reads ``agent``'s history (or none). */
  reset(agent) {
    this.agent = agent ? { id: agent.id, name: agent.name } : null;
    this.head = null;
    this.nextBefore = null;
    this.list.replaceChildren();
    this.diff.replaceChildren();
    this.diff.hidden = true;
    $("rev-more").hidden = true;
    this.say("");
  }

  /** Reads the newest page (``fresh``) or the next older one, and lists it. */
  async load(fresh = true) {
    if (!this.agent) return;
    const agent = this.agent;
    const query = new URLSearchParams({ limit: String(PAGE) });
    if (!fresh && this.nextBefore) query.set("before", String(this.nextBefore));
    try {
      const page = await call("GET", revisionsPath(agent.id, `?${query}`));
      if (this.agent !== agent) return; // another agent was opened meanwhile
      if (fresh) this.list.replaceChildren();
      this.head = page.head;
      this.nextBefore = page.next_before;
      this.list.append(...page.items.map((r) => this.row(r)));
      $("rev-more").hidden = !page.next_before;
      this.say(this.list.children.length ? "" : "No revisions stored yet.");
    } catch (error) {
      this.say(this.describe(error), "error");
    }
  }

  row(revision) {
    const n = revision.number;
    const title = el("strong", { textContent: `Revision ${n}` });
    const head = el("div", { className: "rev-title" }, title);
    if (n === this.head) head.append(" ", el("span", { className: "badge on", textContent: "head" }));
    const meta = el(
      "p",
      { className: "rev-meta" },
      timeNode(revision.created_at),
      " · ",
      el("span", { className: "rev-source", textContent: revision.source }),
      " · ",
      el("span", { className: "rev-actor", textContent: revision.actor || "unknown" }),
    );
    const item = el("li", { className: "revision", id: `rev-${n}` }, head, meta);
    if (revision.note) item.append(el("p", { className: "rev-note", textContent: revision.note }));
    const actions = el("div", { className: "rev-actions" });
    const changes = el("button", { type: "button", textContent: "Changes" });
    changes.setAttribute("aria-label", `Changes in revision ${n}`);
    changes.addEventListener("click", () => this.showDiff(n));
    actions.append(changes);
    if (n !== this.head) {
      const revert = el("button", { type: "button", className: "danger", textContent: "Revert to this" });
      revert.setAttribute("aria-label", `Revert to revision ${n}`);
      revert.addEventListener("click", () => this.revert(n));
      actions.append(revert);
    }
    item.append(actions);
    return item;
  }

  /** What revision ``n`` changed from the one before: each field, then the YAML diff. */
  async showDiff(n) {
    if (!this.agent) return;
    try {
      const diff = await call("GET", revisionsPath(this.agent.id, `/${n}/diff`));
      const from = diff.from_revision ? `revision ${diff.from_revision}` : "nothing";
      const count = diff.changes.length;
      const lead = count
        ? `Revision ${n} against ${from}: ${count} field${count > 1 ? "s" : ""} changed.`
        : `Revision ${n} is the same as ${from}.`;
      const changes = el("ul", { className: "changes" });
      for (const c of diff.changes) {
        const item = el("li", {}, el("code", { textContent: c.path }), ` ${c.kind}`);
        if (c.secret) item.append(" (a secret reference; not shown)");
        else if (c.kind === "changed") item.append(`: ${shown(c.old)} → ${shown(c.new)}`);
        else item.append(`: ${shown(c.kind === "added" ? c.new : c.old)}`);
        changes.append(item);
      }
      const text = el("pre", { className: "diff-text", tabIndex: 0 }, ...diffLines(diff.text));
      text.setAttribute("aria-label", `Unified diff of revision ${n}`);
      const heading = el("h3", { textContent: lead, tabIndex: -1 });
      this.diff.replaceChildren(heading, ...(count ? [changes, text] : []));
      this.diff.hidden = false;
      heading.focus();
    } catch (error) {
      this.say(this.describe(error), "error");
    }
  }

  /** Stores revision ``n``'s character again as a new revision, after asking. */
  async revert(n) {
    if (!this.agent) return;
    const { id, name } = this.agent;
    const question =
      `Revert ${name} to revision ${n}? Its character is stored again as a new revision (the ` +
      "history is kept); unsaved changes in the editor are replaced.";
    if (!this.confirm(question)) return;
    try {
      const agent = await call("POST", revisionsPath(id, `/${n}/revert`));
      this.onReverted(agent, n);
      await this.load(true);
    } catch (error) {
      this.say(this.describe(error), "error");
    }
  }
}
