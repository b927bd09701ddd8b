// The Conversations view: an agent's rooms and people, a room's history with each turn's trace
// (thought, actions, stage timings, model, tokens, cost), memory search by meaning or by words,
// a person's facts and summaries, their data exported, and a person forgotten after a
// confirmation that names what goes (then the report of what went).
//
// Reads GET /agents/{id}/rooms, /rooms/{room}/history, /people, /people/{entity}, /memories
// (q, mode), /memories/export; forgets with DELETE /agents/{id}/entities/{entity}/memories (the
// admin's). Everything is set as text, never parsed as HTML. An agent's token (GET /agents
// refused) works on its own agent, found through GET /metrics/summary.

import { ApiError, call, token, visibleAgents } from "./api.js";
import { messageNode, plural, when } from "./turn_trace.js";

const KINDS = ["message", "fact", "summary", "knowledge", "post", "reflection"];

const enc = encodeURIComponent;

/** A download with the tab's token: the file is fetched, then handed to the browser. */
async function download(path) {
  const headers = { Accept: "application/x-ndjson" };
  if (token.get()) headers.Authorization = `Bearer ${token.get()}`;
  const response = await fetch(path, { headers });
  if (!response.ok) {
    let body;
    try {
      body = await response.json();
    } catch {
      body = { message: `${response.status} ${response.statusText}` };
    }
    throw new ApiError(response.status, body);
  }
  const name = /filename="([^"]+)"/.exec(response.headers.get("content-disposition") || "")?.[1] || "memories.jsonl";
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return name;
}

export function mount(root, ctx) {
  const { el, describe } = ctx;
  const state = { agent: null, room: null, person: null, before: null };

  // --- skeleton: every panel exists from the start, so nothing below moves as content loads ---
  const agentSel = el("select", { id: "conv-agent" });
  const refresh = el("button", { type: "button", id: "conv-refresh", textContent: "Refresh" });
  const exportAll = el("button", { type: "button", id: "conv-export", textContent: "Export memories" });
  const notice = el("p", { className: "notice", id: "conv-notice", role: "status" });
  const head = el(
    "section",
    { className: "panel conv-head", ariaLabel: "Agent" },
    el(
      "div",
      { className: "panel-head" },
      el("h2", { textContent: "Conversations and memory" }),
      el(
        "div",
        { className: "actions" },
        el("label", { htmlFor: "conv-agent", className: "inline-label", textContent: "Agent" }),
        agentSel,
        refresh,
        exportAll,
      ),
    ),
    notice,
  );

  const roomList = el("ul", { className: "conv-list", id: "conv-rooms" });
  const roomsMore = el("button", { type: "button", id: "conv-rooms-more", textContent: "Older rooms", hidden: true });
  const rooms = el(
    "section",
    { className: "panel conv-rooms", ariaLabel: "Rooms" },
    el("div", { className: "panel-head" }, el("h2", { textContent: "Rooms" })),
    roomList,
    roomsMore,
  );

  const peopleList = el("ul", { className: "conv-list", id: "conv-people" });
  const people = el(
    "section",
    { className: "panel conv-people", ariaLabel: "People" },
    el("div", { className: "panel-head" }, el("h2", { textContent: "People" })),
    peopleList,
  );

  const historyTitle = el("h2", { id: "conv-history-title", textContent: "Room history" });
  const historyMeta = el("p", { className: "hint conv-meta", id: "conv-history-meta" });
  const historyLog = el("ol", { className: "conv-history", id: "conv-history" });
  const historyMore = el("button", { type: "button", id: "conv-history-more", textContent: "Earlier messages", hidden: true });
  const history = el(
    "section",
    { className: "panel conv-room" },
    el("div", { className: "panel-head" }, historyTitle),
    historyMeta,
    historyMore,
    historyLog,
  );
  history.setAttribute("aria-labelledby", "conv-history-title");

  const searchInput = el("input", { id: "conv-q", type: "search", placeholder: "What to look for", autocomplete: "off" });
  const modeSel = el(
    "select",
    { id: "conv-mode" },
    el("option", { value: "meaning", textContent: "by meaning" }),
    el("option", { value: "words", textContent: "by words (full text)" }),
  );
  const kindSel = el("select", { id: "conv-kind" }, el("option", { value: "", textContent: "any kind" }));
  for (const k of KINDS) kindSel.append(el("option", { value: k, textContent: k }));
  const searchForm = el(
    "form",
    { className: "conv-search", id: "conv-search" },
    el("label", { htmlFor: "conv-q", className: "sr-only", textContent: "Search memories" }),
    searchInput,
    el("label", { htmlFor: "conv-mode", className: "sr-only", textContent: "Search mode" }),
    modeSel,
    el("label", { htmlFor: "conv-kind", className: "sr-only", textContent: "Kind" }),
    kindSel,
    el("button", { type: "submit", className: "primary", textContent: "Search" }),
  );
  const results = el("ol", { className: "conv-results", id: "conv-results" });
  const search = el(
    "section",
    { className: "panel conv-searchpanel", ariaLabel: "Memory search" },
    el("div", { className: "panel-head" }, el("h2", { textContent: "Memory search" })),
    searchForm,
    results,
  );

  const personBody = el("div", { id: "conv-person" });
  const person = el(
    "section",
    { className: "panel conv-personpanel", ariaLabel: "Person" },
    el("div", { className: "panel-head" }, el("h2", { textContent: "Person" })),
    personBody,
  );

  const grid = el("div", { className: "conv-grid" }, el("div", { className: "conv-side" }, rooms, people), el("div", { className: "conv-main" }, history, person, search));
  root.replaceChildren(head, grid);

  function say(text, kind = "") {
    notice.textContent = text;
    notice.className = `notice ${kind}`.trim();
  }
  const empty = (text) => el("li", { className: "empty", textContent: text });
  const base = () => `/agents/${enc(state.agent)}`;

  // --- rooms ---
  function roomLabel(room) {
    return room.name || room.platform_id || room.room_id;
  }

  function roomItem(room) {
    const names = room.people.map((p) => p.name).join(", ") || "no one else";
    const button = el(
      "button",
      { type: "button", className: "conv-pick" },
      el("span", { className: "conv-pick-title", textContent: roomLabel(room) }),
      el("span", { className: "conv-pick-meta", textContent: `${room.platform || "?"} · ${when(room.last_at)} · ${names}` }),
    );
    button.dataset.roomId = room.room_id;
    if (room.room_id === state.room) button.setAttribute("aria-current", "true");
    button.addEventListener("click", () => openRoom(room.room_id));
    return el("li", {}, button);
  }

  async function loadRooms({ more = false } = {}) {
    const query = new URLSearchParams({ limit: "30" });
    if (more && state.before) query.set("before", state.before);
    const page = await call("GET", `${base()}/rooms?${query}`);
    if (!more) roomList.replaceChildren();
    const shown = new Set([...roomList.querySelectorAll("[data-room-id]")].map((b) => b.dataset.roomId));
    for (const room of page.items) if (!shown.has(room.room_id)) roomList.append(roomItem(room));
    if (!roomList.children.length) roomList.append(empty("No conversations yet. Chat with the agent on Home, or connect a client."));
    state.before = page.next_before;
    roomsMore.hidden = !page.next_before;
    return page.items;
  }

  // --- a room's history, with each turn's trace ---
  async function openRoom(roomId, { earlier = false } = {}) {
    state.room = roomId;
    for (const b of roomList.querySelectorAll("[data-room-id]")) {
      if (b.dataset.roomId === roomId) b.setAttribute("aria-current", "true");
      else b.removeAttribute("aria-current");
    }
    const query = new URLSearchParams({ limit: "50" });
    if (earlier && historyMore.dataset.before) query.set("before", historyMore.dataset.before);
    try {
      const page = await call("GET", `${base()}/rooms/${enc(roomId)}/history?${query}`);
      if (page.room) {
        historyTitle.textContent = `Room: ${roomLabel(page.room)}`;
        const who = page.room.people.map((p) => `${p.name}${p.platform_id ? ` (${p.platform} ${p.platform_id})` : ""}`).join(", ");
        const where = [page.room.platform || "unknown platform"];
        if (page.room.kind && page.room.kind !== page.room.platform) where.push(page.room.kind);
        historyMeta.textContent = `${where.join(" · ")} · people: ${who || "none"}`;
      }
      const nodes = page.items.map((item) => messageNode(el, item));
      if (earlier) historyLog.prepend(...nodes);
      else historyLog.replaceChildren(...nodes);
      if (!historyLog.children.length) historyLog.append(empty("No messages in this room."));
      historyMore.hidden = !page.next_before;
      historyMore.dataset.before = page.next_before || "";
    } catch (error) {
      historyLog.replaceChildren(empty(describe(error)));
    }
  }

  // --- people ---
  function personItem(p) {
    const where = p.platform ? `${p.platform} ${p.platform_id}` : "no record";
    const button = el(
      "button",
      { type: "button", className: "conv-pick" },
      el("span", { className: "conv-pick-title", textContent: p.name }),
      el("span", { className: "conv-pick-meta", textContent: `${where} · ${plural(p.messages, "message")} · ${plural(p.memories, "memory", "memories")} kept` }),
    );
    button.dataset.entityId = p.entity_id;
    if (p.entity_id === state.person) button.setAttribute("aria-current", "true");
    button.addEventListener("click", () => openPerson(p.entity_id));
    return el("li", {}, button);
  }

  async function loadPeople() {
    const list = await call("GET", `${base()}/people`);
    peopleList.replaceChildren(...list.map(personItem));
    if (!list.length) peopleList.append(empty("Nobody yet."));
    return list;
  }

  function memoryList(items, none) {
    const list = el("ul", { className: "conv-memories" });
    for (const m of items) list.append(el("li", {}, el("span", { className: "hint", textContent: `${when(m.created_at)} · ` }), m.text));
    if (!items.length) list.append(el("li", { className: "empty", textContent: none }));
    return list;
  }

  async function openPerson(entityId) {
    state.person = entityId;
    for (const b of peopleList.querySelectorAll("[data-entity-id]")) {
      if (b.dataset.entityId === entityId) b.setAttribute("aria-current", "true");
      else b.removeAttribute("aria-current");
    }
    let p;
    try {
      p = await call("GET", `${base()}/people/${enc(entityId)}`);
    } catch (error) {
      personBody.replaceChildren(el("p", { className: "notice error", textContent: describe(error) }));
      return;
    }
    const where = p.platform ? `${p.platform} ${p.platform_id}` : "no record (only memories)";
    const status = el("p", { className: "notice", role: "status", id: "conv-person-status" });
    const exportBtn = el("button", { type: "button", id: "conv-person-export", textContent: "Export their data" });
    const forgetBtn = el("button", { type: "button", className: "danger", id: "conv-forget", textContent: `Forget ${p.name}…` });
    const confirmBox = el("div", { className: "conflict conv-confirm", id: "conv-confirm", role: "alertdialog", hidden: true });
    confirmBox.setAttribute("aria-labelledby", "conv-confirm-text");
    personBody.replaceChildren(
      el("h3", { className: "conv-person-name", textContent: p.name }),
      el("p", {
        className: "hint",
        textContent: `${p.names.length > 1 ? `also ${p.names.slice(1).join(", ")} · ` : ""}${where} · entity ${p.entity_id} · ${plural(p.messages, "message")}, ${plural(p.memories, "memory", "memories")} kept`,
      }),
      el("h4", { textContent: "Facts" }),
      memoryList(p.facts, "No facts about them."),
      el("h4", { textContent: "Summaries that retell them" }),
      memoryList(p.summaries, "No summaries name them."),
      el("div", { className: "form-actions conv-person-actions" }, exportBtn, forgetBtn),
      confirmBox,
      status,
    );

    exportBtn.addEventListener("click", async () => {
      try {
        const name = await download(`${base()}/memories/export?entity_id=${enc(p.entity_id)}`);
        status.textContent = `Downloaded ${name}.`;
        status.className = "notice ok";
      } catch (error) {
        status.textContent = describe(error);
        status.className = "notice error";
      }
    });

    forgetBtn.addEventListener("click", () => {
      const yes = el("button", { type: "button", className: "danger", id: "conv-forget-yes", textContent: `Forget ${p.name}` });
      const no = el("button", { type: "button", id: "conv-forget-no", textContent: "Cancel" });
      confirmBox.replaceChildren(
        el("p", {
          id: "conv-confirm-text",
          textContent:
            `Forget ${p.name} (${where})? This deletes, for this agent: ${plural(p.messages, "message")} they wrote, ` +
            `the facts and notes about them (${plural(p.memories - p.messages, "other memory", "other memories")}), ` +
            "the agent's replies to them, the summaries that retell them, and their record (names, platform id). " +
            "It cannot be undone; export their data first if they asked for it.",
        }),
        el("div", { className: "form-actions" }, no, yes),
      );
      confirmBox.hidden = false;
      forgetBtn.disabled = true;
      no.focus();
      no.addEventListener("click", () => {
        confirmBox.hidden = true;
        forgetBtn.disabled = false;
        forgetBtn.focus();
      });
      yes.addEventListener("click", async () => {
        yes.disabled = no.disabled = true;
        try {
          const r = await call("DELETE", `${base()}/entities/${enc(p.entity_id)}/memories`);
          confirmBox.hidden = true;
          const report = el(
            "div",
            { className: "conv-report", id: "conv-forget-report", role: "status" },
            el("p", { textContent: `Forgot ${p.name}: ${plural(r.deleted, "memory", "memories")} deleted.` }),
            el(
              "ul",
              {},
              el("li", { textContent: plural(r.messages, "message") + " they wrote" }),
              el("li", { textContent: plural(r.facts, "fact") + " about them" }),
              el("li", { textContent: plural(r.replies, "reply", "replies") + " of the agent to them" }),
              el("li", { textContent: plural(r.summaries, "summary", "summaries") + " that retold them" }),
              el("li", { textContent: plural(r.other, "other memory", "other memories") }),
              el("li", { textContent: r.entity_record ? "their record (names, platform id)" : "no record was kept" }),
            ),
          );
          personBody.replaceChildren(el("h3", { className: "conv-person-name", textContent: p.name }), report);
          state.person = null;
          const [, left] = await Promise.all([loadPeople(), loadRooms()]);
          // A room that held only their messages is gone with them.
          if (state.room && left.some((room) => room.room_id === state.room)) await openRoom(state.room);
          else clearRoom();
        } catch (error) {
          const refused = error instanceof ApiError && error.status === 403;
          status.textContent = refused
            ? `${describe(error)}. Enter the admin token at the top to forget someone; this token may read only.`
            : describe(error);
          status.className = "notice error";
          if (refused) {
            confirmBox.hidden = true;
            forgetBtn.disabled = false;
          } else {
            yes.disabled = no.disabled = false;
          }
        }
      });
    });
  }

  // --- memory search ---
  function resultNode(m) {
    const score = m.score == null ? "" : ` · score ${m.score.toFixed(3)}`;
    return el(
      "li",
      { className: "conv-result" },
      el("span", { className: "badge off", textContent: m.kind }),
      " ",
      el("span", { className: "hint", textContent: `${when(m.created_at)}${score}` }),
      el("p", { className: "text", textContent: m.text || "(no text)" }),
    );
  }

  searchForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const q = searchInput.value.trim();
    if (!q) {
      results.replaceChildren(empty("Type what to look for: a topic (by meaning) or a word (by words)."));
      return;
    }
    const query = new URLSearchParams({ q, mode: modeSel.value, limit: "20" });
    if (kindSel.value) query.set("kind", kindSel.value);
    results.replaceChildren(empty("Searching…"));
    try {
      const page = await call("GET", `${base()}/memories?${query}`);
      results.replaceChildren(...page.items.map(resultNode));
      if (!page.items.length) {
        const tip = modeSel.value === "words" ? " Try by meaning, or another word." : "";
        results.append(empty(`Nothing found.${tip}`));
      }
    } catch (error) {
      results.replaceChildren(empty(describe(error)));
    }
  });

  // --- the agent ---
  function clearRoom() {
    state.room = null;
    historyTitle.textContent = "Room history";
    historyMeta.textContent = "";
    historyLog.replaceChildren(empty("Choose a room to read its history and each turn's trace."));
    historyMore.hidden = true;
  }

  function reset() {
    state.person = state.before = null;
    clearRoom();
    personBody.replaceChildren(el("p", { className: "empty", textContent: "Choose a person to see their facts, export their data or forget them." }));
    results.replaceChildren();
  }

  async function loadAgent() {
    state.agent = agentSel.value || null;
    exportAll.disabled = !state.agent;
    if (!state.agent) return;
    const keepRoom = state.room;
    const keepPerson = state.person;
    try {
      const [roomItems, peopleItems] = await Promise.all([loadRooms(), loadPeople()]);
      say("");
      if (keepRoom && roomItems.some((r) => r.room_id === keepRoom)) await openRoom(keepRoom);
      else if (roomItems.length && !keepRoom) await openRoom(roomItems[0].room_id);
      if (keepPerson && peopleItems.some((p) => p.entity_id === keepPerson)) await openPerson(keepPerson);
    } catch (error) {
      say(describe(error), "error");
    }
  }

  agentSel.addEventListener("change", () => {
    reset();
    loadAgent();
  });
  refresh.addEventListener("click", () => show());
  roomsMore.addEventListener("click", () => loadRooms({ more: true }).catch((e) => say(describe(e), "error")));
  historyMore.addEventListener("click", () => state.room && openRoom(state.room, { earlier: true }));
  exportAll.addEventListener("click", async () => {
    try {
      say(`Downloaded ${await download(`${base()}/memories/export`)}.`, "ok");
    } catch (error) {
      say(describe(error), "error");
    }
  });

  async function show() {
    let agents;
    try {
      agents = await visibleAgents(ctx);
    } catch (error) {
      say(describe(error), "error");
      return;
    }
    const chosen = agentSel.value;
    agentSel.replaceChildren(...agents.map((a) => el("option", { value: a.id, textContent: a.name })));
    if (!agents.length) {
      say("No agents yet: create a persona on Home.");
      exportAll.disabled = true;
      return;
    }
    agentSel.value = agents.some((a) => a.id === chosen) ? chosen : agents[0].id;
    if (agentSel.value !== state.agent) reset();
    await loadAgent();
  }

  reset();
  return { show };
}
