// The chat panel: one conversation per agent, its history read back from the server (so a reload
// shows what was said), replies streamed in, and a notice that follows the agent's real state.

import { ApiError, chatHistory, streamMessage } from "./api.js";

const $ = (id) => document.getElementById(id);

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props);
  node.append(...children);
  return node;
}

function say(id, text, kind = "") {
  const node = $(id);
  node.textContent = text;
  node.className = `notice ${kind}`.trim();
}

/** What the chat can say about an agent that is not running here ("" when it runs here). */
export function stateHint(agent) {
  if (agent.running) return "";
  if (agent.status === "running") {
    return `${agent.name} runs in another Carrier process, not in this server: chat with it there.`;
  }
  return `${agent.name} is stopped. Start it to chat.`;
}

// A message of the history the agent did not answer says why.
const NOT_ANSWERED = {
  ignored: "not answered",
  failed: "not answered: the turn failed",
  superseded: "not answered: a newer message came in",
  received: "was being answered when this page loaded",
};

function bubble(role, who, text) {
  const body = el("p", { className: "text", textContent: text });
  const node = el("div", { className: `msg ${role}` }, el("span", { className: "who", textContent: who }), body);
  return { node, body };
}

function historyBubble(item) {
  const mine = item.role === "user";
  const { node } = bubble(mine ? "user" : "agent", mine ? "You" : item.speaker, item.text);
  const note = NOT_ANSWERED[item.status];
  if (mine && note) node.append(el("span", { className: "note", textContent: note }));
  return node;
}

export class Chat {
  /**
   * ``describe(error)`` words a failed request; ``onConflict()`` runs when the server says the
   * agent is not running after all (the page then reads the agents' state again).
   */
  constructor({ describe, onConflict }) {
    this.describe = describe;
    this.onConflict = onConflict;
    this.agents = [];
    this.agentsFailed = false;
    this.current = "";
    this.logs = new Map(); // agent id → {node: its conversation's DOM node, history: the load}
    this.sending = false;
    $("chat-agent").addEventListener("change", (event) => this.show(event.target.value, false));
    $("chat-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    $("chat-input").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.send();
      }
    });
  }

  /** The agents as the server last reported them (``failed``: that report failed). */
  setAgents(agents, failed) {
    this.agents = agents;
    this.agentsFailed = failed;
    const options = agents.map((a) => {
      const where = a.running ? "" : a.status === "running" ? " (runs elsewhere)" : " (stopped)";
      return el("option", { value: a.id, textContent: `${a.name}${where}` });
    });
    if (!options.length) options.push(el("option", { value: "", textContent: "no agents" }));
    $("chat-agent").replaceChildren(...options);
    const keep = agents.some((a) => a.id === this.current);
    const running = agents.find((a) => a.running);
    this.show(keep ? this.current : running?.id || agents[0]?.id || "", false);
  }

  /** Drops a deleted agent's conversation. */
  forget(id) {
    this.logs.delete(id);
  }

  conversation(id) {
    if (!this.logs.has(id)) {
      this.logs.set(id, { node: el("div", { className: "conversation" }), history: null });
    }
    return this.logs.get(id);
  }

  /** Shows ``text`` in an empty conversation; a conversation with messages shows none. */
  setEmpty(log, text, kind = "") {
    let note = log.node.querySelector(".empty");
    if (log.node.querySelector(".msg") || !text) {
      note?.remove();
      return;
    }
    if (!note) {
      note = el("p");
      log.node.prepend(note);
    }
    note.className = `empty ${kind}`.trim();
    note.textContent = text;
  }

  scroll() {
    $("chat-log").scrollTop = $("chat-log").scrollHeight;
  }

  /**
   * Loads the conversation's latest messages once (again after a failure) and puts them before
   * anything said since; resolves when done, never rejects.
   */
  loadHistory(id) {
    const log = this.conversation(id);
    if (!id || log.history) return log.history || Promise.resolve();
    this.setEmpty(log, "Loading earlier messages…");
    log.history = chatHistory(id).then(
      (items) => {
        log.node.prepend(...items.map(historyBubble));
        this.setEmpty(log, "No messages yet.");
        if (this.current === id) this.scroll();
      },
      (error) => {
        log.history = null; // the next visit tries again (e.g. once the token is set)
        this.setEmpty(log, `Earlier messages could not be loaded: ${this.describe(error)}`, "error");
      },
    );
    return log.history;
  }

  /** The notice above the conversation and the Send button follow the agent's real state. */
  showState() {
    const agent = this.agents.find((a) => a.id === this.current);
    say("chat-state", agent ? stateHint(agent) : "", "warn");
    $("chat-send").disabled = this.sending || !agent?.running;
  }

  /** Shows the conversation with agent ``id`` ("" when there is none). */
  show(id, focus) {
    this.current = id;
    $("chat-agent").value = id;
    const log = this.conversation(id);
    if (!id) {
      const none = this.agentsFailed
        ? "No agents to chat with."
        : "No agents yet. Create a persona, then start it to chat.";
      this.setEmpty(log, none);
    }
    if ($("chat-log").firstChild !== log.node) {
      $("chat-log").replaceChildren(log.node);
      this.scroll();
    }
    this.loadHistory(id);
    this.showState();
    if (focus) $("chat-input").focus();
  }

  async send() {
    const text = $("chat-input").value.trim();
    const id = this.current;
    const agent = this.agents.find((a) => a.id === id);
    if (!text || !agent || this.sending) return;
    if (!agent.running) {
      this.showState(); // says why nothing was sent; the text stays in the box
      return;
    }
    this.sending = true;
    $("chat-send").disabled = true;
    const log = this.conversation(id);
    await this.loadHistory(id); // what was said before goes first
    this.setEmpty(log, "");
    log.node.append(bubble("user", "You", text).node);
    const reply = bubble("agent", agent.name, "");
    reply.node.classList.add("streaming");
    reply.node.setAttribute("aria-busy", "true");
    log.node.append(reply.node);
    $("chat-input").value = "";
    say("chat-status", `${agent.name} is answering…`);
    this.scroll();
    try {
      const done = await streamMessage(id, text, {
        onChunk: (piece) => {
          reply.body.textContent += piece;
          this.scroll();
        },
      });
      if (done.reply && done.reply !== reply.body.textContent) reply.body.textContent = done.reply;
      if (!done.reply) {
        reply.node.classList.add("quiet");
        reply.body.textContent = `(no reply${done.reason ? `: ${done.reason}` : ""})`;
      }
      if (done.offline) reply.node.append(el("span", { className: "note", textContent: "offline answer" }));
      say("chat-status", "");
    } catch (error) {
      reply.node.classList.add("failed");
      reply.body.textContent = this.describe(error);
      say("chat-status", "The message was not answered.", "error");
      if (error instanceof ApiError && error.status === 409) this.onConflict();
    } finally {
      reply.node.classList.remove("streaming");
      reply.node.removeAttribute("aria-busy");
      this.sending = false;
      this.showState();
      this.scroll();
    }
  }
}
