// The persona editor: the form and raw tabs, saving on the revision it read (an edit made
// elsewhere meanwhile is never overwritten silently), the History tab, and the server's
// problems and warnings (POST /characters/validate: carrier validate's) next to the fields.

import { ApiError, call } from "./api.js";
import { PersonaForm } from "./persona.js";
import { clearProblems, problemItems } from "./problems.js";
import { History, conflictText, headRevision } from "./revisions.js";

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

const TABS = ["form", "raw", "history"];
const MOVES = { ArrowLeft: -1, ArrowRight: 1 };

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/**
 * Wires the editor in the page. ``ctx``: {describe(error), say(id, text, kind), agents() (the
 * agents Home lists), replaceAgent(agent), deleteAgent(agent)}. Returns {edit(id),
 * newPersona(), editing (getter), loadClients()}.
 */
export function startEditor(ctx) {
  const { describe, say } = ctx;
  const persona = new PersonaForm($("pane-form"));
  const history = new History({
    describe,
    confirm: (text) => window.confirm(text),
    onReverted: (agent, number) => reverted(agent, number),
  });
  const state = {
    editing: null, // the id of the agent in the editor, or null for a new one
    rawDirty: false, // the raw editor holds text the form has not seen
    revision: null, // the head revision the editor loaded: a save is refused if it moved since
    conflict: null, // a save refused as made on an older revision: {body, contentType, head}
    clients: null, // GET /clients once it answered
  };

  /** The installed clients, read once (the admin token is needed: until then, tried again). */
  async function loadClients() {
    if (state.clients) return;
    try {
      state.clients = await call("GET", "/clients");
      persona.setInstalledClients(state.clients);
    } catch {
      // an agent's token, or none yet: the character's own clients are shown meanwhile
    }
  }

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

  function fillForm(agent) {
    persona.fill(agent.character, agent.secrets);
    if (state.clients) persona.setInstalledClients(state.clients);
  }

  /** Shows an agent's stored character in the editor, in both tabs. */
  function loadIntoEditor(agent) {
    setEditing(agent);
    fillForm(agent);
    $("raw").value = JSON.stringify(agent.character, null, 2);
    state.rawDirty = false;
    clearRawNotes();
  }

  function newPersona() {
    setEditing(null);
    persona.fill({});
    if (state.clients) persona.setInstalledClients(state.clients);
    $("raw").value = TEMPLATE;
    state.rawDirty = false;
    clearRawNotes();
    say("editor-status", "");
  }

  async function edit(id) {
    try {
      const agent = await call("GET", `/agents/${encodeURIComponent(id)}`);
      loadIntoEditor(agent);
      ctx.replaceAgent(agent);
      say("editor-status", "");
      $("editor").scrollIntoView({ block: "start" });
      $({ raw: "raw", form: "f-name", history: "tab-history" }[activeTab()]).focus();
      await warnAbout(agent, "");
    } catch (error) {
      say("agents-status", describe(error), "error");
    }
  }

  /**
   * carrier validate's warnings for a stored agent, next to the fields (and under the raw
   * text); ``done`` is what the status says, to which the count is added. ``sent``: the body
   * just saved ({body, contentType}: raw YAML's text shows values a comment cut short),
   * else the stored character. A character stored before a check it now fails (a client's
   * settings) shows its problems instead.
   */
  async function warnAbout(agent, done, sent = { body: agent.character }) {
    let warnings;
    try {
      const path = `/characters/validate?agent_id=${encodeURIComponent(agent.id)}`;
      ({ warnings } = await call("POST", path, sent));
    } catch (error) {
      if (state.editing !== agent.id) return;
      if (error instanceof ApiError && error.problems.length) {
        persona.show(error, "A save will be refused until these are fixed:");
      }
      return;
    }
    if (state.editing !== agent.id) return; // another agent was opened meanwhile
    persona.showWarnings(warnings);
    showRawWarnings(warnings);
    if (warnings.length) {
      const text = `${done ? `${done} ` : ""}${plural(warnings.length, "warning")}: shown next to the fields.`;
      say("editor-status", text, "warn");
    }
  }

  /**
   * Creates the persona, or saves the edit on the revision the editor read (``revision``: the
   * one it is made on; "overwrite" passes the newer head on purpose). An edit refused because
   * the character changed elsewhere meanwhile is never retried by itself: the editor says who
   * changed it and waits (resolves with null). Other failures reject.
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
    ctx.replaceAgent(agent);
    fillForm(agent);
    state.rawDirty = false;
    const done = `${agent.name} ${id ? "saved" : "created"}.`;
    say("editor-status", done, "ok");
    warnAbout(agent, done, { body, contentType }); // the status gains the count, if any
    return agent;
  }

  // --- an edit made on an older revision ------------------------------------------------------

  function hideConflict() {
    state.conflict = null;
    $("editor-conflict").hidden = true;
    $("conflict-text").textContent = "";
  }

  /** Says who changed the character since the editor read it; "overwrite" is a choice. */
  async function showConflict(id, body, contentType) {
    const name = ctx.agents().find((a) => a.id === id)?.name || id;
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
    if (state.editing) edit(state.editing);
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
    ctx.replaceAgent(agent);
    const text =
      agent.revision === before
        ? `Nothing to revert: ${agent.name}'s character is revision ${number}'s already.`
        : `${agent.name} reverted to revision ${number}: its character is now revision ${agent.revision}.`;
    say("editor-status", text, "ok");
  }

  // --- the form -----------------------------------------------------------------------------

  /** The form's character, or null when something in it cannot be sent (shown at its field). */
  function formCharacter() {
    persona.clear();
    const local = [];
    const body = persona.read(local);
    if (!local.length) return body;
    say("editor-status", "");
    persona.show({ message: "", problems: local }, "Not sent: fix these first.");
    return null;
  }

  function formFailed(error, lead) {
    say("editor-status", "");
    persona.show(error instanceof ApiError ? error : new ApiError(0, { message: describe(error) }), lead);
  }

  $("pane-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = formCharacter();
    if (!body) return;
    try {
      await save(body);
    } catch (error) {
      formFailed(error);
    }
  });

  // "Check": what a save would say, without saving (problems, else warnings).
  $("form-check").addEventListener("click", async () => {
    const body = formCharacter();
    if (!body) return;
    const id = state.editing;
    const path = `/characters/validate${id ? `?agent_id=${encodeURIComponent(id)}` : ""}`;
    try {
      const { warnings } = await call("POST", path, { body });
      persona.showWarnings(warnings);
      const found = warnings.length ? `; ${plural(warnings.length, "warning")}, shown next to the fields` : "";
      say("editor-status", `No problems: a save would take it${found}.`, warnings.length ? "warn" : "ok");
    } catch (error) {
      formFailed(error, "A save would refuse it: fix these problems too.");
    }
  });

  // --- the raw text -----------------------------------------------------------------------------

  function clearRawNotes() {
    clearProblems($("pane-raw"));
    $("raw-problems").replaceChildren();
    $("raw-problems").hidden = true;
    showRawWarnings([]);
  }

  function showRawWarnings(warnings) {
    const list = $("raw-warnings");
    list.replaceChildren();
    if (warnings.length) {
      list.append(Object.assign(document.createElement("li"), { className: "lead", textContent: `${plural(warnings.length, "warning")} (saved all the same):` }));
      list.append(...problemItems(warnings, "(whole file)"));
    }
    list.hidden = warnings.length === 0;
  }

  $("raw").addEventListener("input", () => {
    state.rawDirty = true;
  });

  $("pane-raw").addEventListener("submit", async (event) => {
    event.preventDefault();
    clearRawNotes();
    const text = $("raw").value;
    const json = /^\s*[{[]/.test(text);
    try {
      await save(text, json ? "application/json" : "application/yaml");
    } catch (error) {
      say("editor-status", "");
      const list = $("raw-problems");
      const problems = error instanceof ApiError ? error.problems : [];
      const lead = problems.length
        ? `Not saved: ${plural(problems.length, "problem")} in the character.`
        : describe(error);
      list.append(Object.assign(document.createElement("li"), { className: "lead", textContent: lead }));
      list.append(...problems.map((p) => {
        const item = problemItems([p], "(whole file)")[0];
        if (p.file) item.lastChild.textContent = ` ${p.file}: ${p.message}`;
        return item;
      }));
      list.hidden = false;
      $("raw").setAttribute("aria-invalid", "true");
      $("raw").focus();
    }
  });

  // --- tabs: arrow keys move between them; the form and the raw text follow each other; the
  // history is read again each time it is shown.

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
        const secrets = ctx.agents().find((a) => a.id === state.editing)?.secrets;
        persona.fill(JSON.parse($("raw").value), secrets);
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

  $("editor-delete").addEventListener("click", () => {
    const agent = ctx.agents().find((a) => a.id === state.editing);
    if (agent) ctx.deleteAgent(agent);
  });

  newPersona();
  return {
    edit,
    newPersona,
    loadClients,
    get editing() {
      return state.editing;
    },
  };
}
