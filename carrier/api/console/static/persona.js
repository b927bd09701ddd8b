// The persona form: the whole character in and out (keys it lacks are kept as they are), and
// the server's problems and warnings next to the fields they are about.

import { ClientsEditor } from "./persona_clients.js";
import { SecretsEditor, TemplatesEditor } from "./persona_rows.js";
import { clearProblems, clearWarnings, markProblem, markWarning, problemItems } from "./problems.js";

const USER = "{{user1}}";
const LISTS = { bio: "f-bio", lore: "f-lore", topics: "f-topics" }; // one item a line
const STYLES = ["all", "chat", "post"];
const SECRET_PLACES = ["secrets", "settings.secrets"];

function lines(text) {
  return text.split("\n").map((s) => s.trim()).filter(Boolean);
}

/** Items separated by blank lines (a post or a fact may run over several lines). */
function paragraphs(text) {
  return text.split(/\n\s*\n/).map((s) => s.trim()).filter(Boolean);
}

function asList(value) {
  if (Array.isArray(value)) return value.filter((v) => typeof v === "string");
  return typeof value === "string" && value ? [value] : [];
}

/** An example the form can show: two text-only messages, someone then the persona. */
function isSimplePair(example) {
  if (!Array.isArray(example) || example.length !== 2) return false;
  return example.every((m) => {
    const content = m?.content;
    return content && typeof content.text === "string" && Object.keys(content).length === 1;
  });
}

/** A knowledge item the paths field can show: {path} or {directory} alone (not shared). */
function pathOf(item) {
  if (!item || typeof item !== "object") return null;
  const keys = Object.keys(item);
  if (keys.length !== 1) return null;
  if (typeof item.path === "string") return item.path;
  if (typeof item.directory === "string") return `${item.directory.replace(/\/+$/, "")}/`;
  return null;
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props);
  node.append(...children);
  return node;
}

export class PersonaForm {
  constructor(form) {
    this.form = form;
    this.rows = form.querySelector("#example-rows");
    this.summary = form.querySelector("#form-problems");
    this.warnings = form.querySelector("#form-warnings");
    this.keptNote = form.querySelector("#examples-kept");
    this.knowledgeNote = form.querySelector("#knowledge-kept");
    this.templates = new TemplatesEditor(form.querySelector("#f-templates"));
    this.secrets = new SecretsEditor(form.querySelector("#f-secrets"));
    this.clients = new ClientsEditor(form.querySelector("#f-clients"));
    this.base = {};
    this.kept = [];
    this.keptKnowledge = [];
    this.nextRow = 0;
    form.querySelector("#example-add").addEventListener("click", () => {
      this.addRow("", "").querySelector("input").focus();
    });
    form.addEventListener("input", () => this.summarize());
    form.addEventListener("click", () => this.summarize());
    this.fill({});
  }

  field(id) {
    return this.form.querySelector(`#${id}`);
  }

  addRow(said, replied) {
    const n = this.nextRow++;
    const user = el("input", { id: `ex-${n}-user`, value: said, autocomplete: "off" });
    const reply = el("input", { id: `ex-${n}-reply`, value: replied, autocomplete: "off" });
    const remove = el("button", { type: "button", className: "link", textContent: "Remove" });
    const set = el(
      "fieldset",
      { id: `ex-${n}` },
      el("legend", { textContent: "Example" }),
      el(
        "div",
        { className: "example-grid" },
        el("div", { className: "field" }, el("label", { htmlFor: user.id, textContent: "Someone says" }), user),
        el("div", { className: "field" }, el("label", { htmlFor: reply.id, textContent: "The persona replies" }), reply),
        remove,
      ),
    );
    const row = el("li", { className: "example" }, set);
    remove.addEventListener("click", () => {
      const next = row.nextElementSibling || row.previousElementSibling;
      row.remove();
      this.renumber();
      (next?.querySelector("input") || this.form.querySelector("#example-add")).focus();
    });
    this.rows.append(row);
    this.renumber();
    return row;
  }

  renumber() {
    [...this.rows.children].forEach((row, i) => {
      row.querySelector("legend").textContent = `Example ${i + 1}`;
      row.querySelector("button").setAttribute("aria-label", `Remove example ${i + 1}`);
    });
  }

  /** Installed clients (GET /clients), offered in the Clients section. */
  setInstalledClients(kinds) {
    this.clients.setInstalled(kinds);
    this.summarize();
  }

  /**
   * Shows ``data`` (a character as the API returns it; keys the form lacks are kept as-is) and
   * ``secrets`` (name → "set" | "unset", as AgentOut gives them).
   */
  fill(data, secrets = {}) {
    this.base = structuredClone(data || {});
    const b = this.base;
    const settings = b.settings && typeof b.settings === "object" ? b.settings : {};
    this.field("f-name").value = b.name || "";
    for (const [key, id] of Object.entries(LISTS)) this.field(id).value = asList(b[key]).join("\n");
    this.field("f-adjectives").value = asList(b.adjectives).join(", ");
    this.field("f-system").value = typeof b.system === "string" ? b.system : "";
    this.field("f-model").value = typeof settings.model === "string" ? settings.model : "";
    this.field("f-fallbacks").value = asList(settings.modelFallbacks).join("\n");
    this.field("f-provider").value = typeof b.modelProvider === "string" ? b.modelProvider : "";
    this.field("f-post-examples").value = asList(b.postExamples).join("\n\n");
    const knowledge = Array.isArray(b.knowledge) ? b.knowledge : [];
    this.field("f-knowledge").value = knowledge.filter((k) => typeof k === "string").join("\n\n");
    this.field("f-knowledge-files").value = knowledge.map(pathOf).filter((p) => p !== null).join("\n");
    this.keptKnowledge = knowledge.filter((k) => typeof k !== "string" && pathOf(k) === null);
    const fieldOf = (k) => (typeof k === "string" ? "f-knowledge" : pathOf(k) === null ? null : "f-knowledge-files");
    this.knowledgeOf = knowledge.map(fieldOf); // until read() writes the list again
    this.knowledgeNote.hidden = this.keptKnowledge.length === 0;
    this.knowledgeNote.textContent = `${this.keptKnowledge.length} shared knowledge item(s) are kept as they are; edit them in the raw editor.`;
    const style = b.style || {};
    for (const part of STYLES) this.field(`f-style-${part}`).value = asList(style[part]).join("\n");
    const examples = Array.isArray(b.messageExamples) ? b.messageExamples : [];
    const pairs = examples.filter(isSimplePair);
    this.kept = examples.filter((e) => !isSimplePair(e));
    this.rows.replaceChildren();
    for (const [said, replied] of pairs) this.addRow(said.content.text, replied.content.text);
    while (this.rows.children.length < 2) this.addRow("", "");
    this.keptNote.hidden = this.kept.length === 0;
    this.keptNote.textContent = `${this.kept.length} longer example(s) are kept as they are; edit them in the raw editor.`;
    this.templates.fill(b.templates);
    this.secrets.fill(secrets);
    this.clients.fill(b.clients, b.clientConfig);
    this.clear();
    this.summarize();
  }

  /** Whether the user typed anything into a new persona. */
  isEmpty() {
    return [...this.form.querySelectorAll("input:not([type=checkbox]), textarea")].every((c) => !c.value.trim());
  }

  /**
   * The character: the loaded data with the form's fields written over it. ``problems`` (when
   * given) gets what cannot be sent as typed: {target, path, message}.
   */
  read(problems = []) {
    const data = structuredClone(this.base);
    const name = this.field("f-name").value;
    data.name = name;
    const set = (key, value, into = data) => {
      const empty = Array.isArray(value) ? !value.length : !value;
      if (!empty || key in into) into[key] = value;
      if (empty && typeof value === "string") delete into[key]; // an unset text is left out
    };
    for (const [key, id] of Object.entries(LISTS)) set(key, lines(this.field(id).value));
    set("adjectives", this.field("f-adjectives").value.split(",").map((s) => s.trim()).filter(Boolean));
    set("system", this.field("f-system").value.trim() ? this.field("f-system").value : "");
    set("modelProvider", this.field("f-provider").value.trim());
    const settings = data.settings && typeof data.settings === "object" ? { ...data.settings } : {};
    set("model", this.field("f-model").value.trim(), settings);
    set("modelFallbacks", lines(this.field("f-fallbacks").value), settings);
    if (Object.keys(settings).length || "settings" in data) data.settings = settings;
    set("postExamples", paragraphs(this.field("f-post-examples").value));
    this.readKnowledge(data, set);
    const style = { ...(data.style || {}) };
    for (const part of STYLES) {
      const rules = lines(this.field(`f-style-${part}`).value);
      if (rules.length || part in style) style[part] = rules;
    }
    if (Object.keys(style).length) data.style = style;
    this.readExamples(data, name, set);
    const templates = this.templates.read(problems);
    if (Object.keys(templates).length || "templates" in data) data.templates = templates;
    const clients = this.clients.read(problems);
    if ("clients" in clients) data.clients = clients.clients;
    if (Object.keys(clients.clientConfig).length || "clientConfig" in data) data.clientConfig = clients.clientConfig;
    const secrets = this.secrets.read(problems);
    if (Object.keys(secrets).length) data.secrets = { ...(data.secrets || {}), ...secrets };
    return data;
  }

  readKnowledge(data, set) {
    const facts = paragraphs(this.field("f-knowledge").value);
    const files = lines(this.field("f-knowledge-files").value).map((p) =>
      p.endsWith("/") ? { directory: p.replace(/\/+$/, "") || "/" } : { path: p },
    );
    // knowledge.<i> of a problem or warning: which field wrote item i.
    this.knowledgeOf = [...facts.map(() => "f-knowledge"), ...files.map(() => "f-knowledge-files")];
    set("knowledge", [...facts, ...files, ...this.keptKnowledge]);
  }

  readExamples(data, name, set) {
    // Row i of the form becomes messageExamples[rowOf.indexOf(i)]: empty rows are skipped.
    const key = this.kept.some((e) => e.some((m) => "user" in m)) ? "user" : "name";
    const pairs = [];
    this.rowOf = [];
    [...this.rows.children].forEach((row, i) => {
      const [said, replied] = [...row.querySelectorAll("input")].map((c) => c.value.trim());
      if (!said && !replied) return;
      pairs.push([
        { [key]: USER, content: { text: said } },
        { [key]: name.trim() || "{{char}}", content: { text: replied } },
      ]);
      this.rowOf.push(i);
    });
    set("messageExamples", [...pairs, ...this.kept]);
  }

  /** The folded sections say what they hold. */
  summarize() {
    const say = (id, text) => {
      this.field(id).textContent = text;
    };
    const model = this.field("f-model").value.trim();
    const fallbacks = lines(this.field("f-fallbacks").value).length;
    say("sum-model", (model || "default") + (fallbacks ? ` + ${fallbacks} fallback(s)` : ""));
    say("sum-prompt", [this.field("f-system").value.trim() && "system prompt", this.templates.count() && `${this.templates.count()} template(s)`].filter(Boolean).join(", ") || "built-in");
    const facts = paragraphs(this.field("f-knowledge").value).length + lines(this.field("f-knowledge-files").value).length;
    say("sum-knowledge", `${facts} item(s), ${paragraphs(this.field("f-post-examples").value).length} post example(s)`);
    say("sum-clients", this.clients.summary());
    say("sum-secrets", this.secrets.summary());
  }

  clear() {
    clearProblems(this.form);
    clearWarnings(this.form);
    this.summary.hidden = true;
    this.summary.replaceChildren();
    this.warnings.hidden = true;
    this.warnings.replaceChildren();
  }

  /** The control (or fieldset) a problem's path belongs to, or null. */
  target(path) {
    const [head, second, ...rest] = path.split(".");
    if (head === "name") return this.field("f-name");
    if (head in LISTS) return this.field(LISTS[head]);
    if (head === "adjectives") return this.field("f-adjectives");
    if (head === "system") return this.field("f-system");
    if (head === "modelProvider") return this.field("f-provider");
    if (head === "postExamples") return this.field("f-post-examples");
    if (head === "knowledge") return this.field(this.knowledgeOf?.[Number(second)] || "f-knowledge");
    if (head === "templates") return (second && this.templates.target(second)) || this.field("f-templates");
    if (head === "clients") return second === undefined ? this.field("f-clients") : this.clients.targetClient(second);
    if (head === "clientConfig") return second ? this.clients.targetConfig(second) : this.field("f-clients");
    for (const place of SECRET_PLACES) {
      if (path.startsWith(`${place}.`)) return this.secrets.target(path.slice(place.length + 1)) || this.field("f-secrets");
    }
    if (head === "settings" && second === "model") return this.field("f-model");
    if (head === "settings" && second === "modelFallbacks") return this.field("f-fallbacks");
    if (head === "settings" && second) return this.secrets.target(second);
    if (head === "style") return STYLES.includes(second) ? this.field(`f-style-${second}`) : this.field("f-style");
    if (head === "messageExamples") {
      const index = Number(second);
      if (second === undefined) return this.field("f-examples");
      const row = this.rows.children[this.rowOf?.[index]];
      if (!row) return null;
      const which = rest[0] === "1" ? "reply" : "user";
      return row.querySelector(`input[id$="-${which}"]`);
    }
    return null;
  }

  /**
   * Shows each problem next to its field; the rest in the summary above the form. ``error``:
   * an ApiError, or {message, problems} with problems {path, message, target?}. ``lead`` heads
   * the summary.
   */
  show(error, lead = "Not saved: fix these problems too.") {
    clearProblems(this.form);
    this.summary.replaceChildren();
    const unplaced = [];
    let first = null;
    for (const problem of error.problems) {
      const target = problem.target || this.target(problem.path || "");
      if (target) {
        markProblem(target, problem.path, problem.message);
        first ??= target;
      } else {
        unplaced.push(problem);
      }
    }
    if (unplaced.length || !error.problems.length) {
      const list = el("ul", { className: "problems" }, ...problemItems(unplaced));
      this.summary.append(el("p", { textContent: error.problems.length ? lead : error.message }), ...(unplaced.length ? [list] : []));
      this.summary.hidden = false;
    } else {
      this.summary.hidden = true;
    }
    (first && first.matches("input, textarea") ? first : this.summary).focus?.();
  }

  /** Shows ``carrier validate``'s warnings next to their fields (a save is not refused). */
  showWarnings(warnings) {
    clearWarnings(this.form);
    this.warnings.replaceChildren();
    const unplaced = [];
    for (const warning of warnings) {
      const target = this.target(warning.path || "");
      if (target) markWarning(target, warning.path, warning.message);
      else unplaced.push(warning);
    }
    if (unplaced.length) {
      const lead = el("p", { textContent: "Warnings (saved all the same):" });
      this.warnings.append(lead, el("ul", { className: "warnings" }, ...problemItems(unplaced)));
    }
    this.warnings.hidden = unplaced.length === 0;
  }
}
