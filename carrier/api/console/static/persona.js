// The persona form: character data in and out, and the validator's problems next to the fields.

const USER = "{{user1}}";
const LISTS = { bio: "f-bio", lore: "f-lore", topics: "f-topics" };
const STYLES = ["all", "chat", "post"];

function lines(text) {
  return text.split("\n").map((s) => s.trim()).filter(Boolean);
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

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props);
  node.append(...children);
  return node;
}

/** Puts "path: message" under a control (or fieldset) and marks it invalid. */
export function markProblem(target, path, message) {
  const holder = target.closest(".field") || target;
  const id = `${target.id}-error`;
  let note = document.getElementById(id);
  if (!note) {
    note = el("p", { id, className: "field-error" });
    holder.append(note);
    const described = target.getAttribute("aria-describedby");
    target.setAttribute("aria-describedby", described ? `${described} ${id}` : id);
  }
  if (note.childNodes.length) note.append(el("br"));
  note.append(el("code", { textContent: path || "(whole character)" }), ` ${message}`);
  if (target.matches("input, textarea, select")) target.setAttribute("aria-invalid", "true");
}

/** Removes every mark made by markProblem under ``root``. */
export function clearProblems(root) {
  for (const note of root.querySelectorAll(".field-error")) {
    const owner = root.querySelector(`[aria-describedby~="${note.id}"]`);
    if (owner) {
      const rest = owner.getAttribute("aria-describedby").split(" ").filter((i) => i !== note.id);
      if (rest.length) owner.setAttribute("aria-describedby", rest.join(" "));
      else owner.removeAttribute("aria-describedby");
    }
    note.remove();
  }
  for (const node of root.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
}

export class PersonaForm {
  constructor(form) {
    this.form = form;
    this.rows = form.querySelector("#example-rows");
    this.summary = form.querySelector("#form-problems");
    this.keptNote = form.querySelector("#examples-kept");
    this.base = {};
    this.kept = [];
    this.nextRow = 0;
    form.querySelector("#example-add").addEventListener("click", () => {
      this.addRow("", "").querySelector("input").focus();
    });
    this.fill({});
  }

  field(id) {
    return this.form.querySelector(`#${id}`);
  }

  addRow(said, replied) {
    const n = this.nextRow++;
    const number = this.rows.children.length + 1;
    const user = el("input", { id: `ex-${n}-user`, value: said, autocomplete: "off" });
    const reply = el("input", { id: `ex-${n}-reply`, value: replied, autocomplete: "off" });
    const remove = el("button", { type: "button", className: "link", textContent: "Remove" });
    const legend = el("legend", { textContent: `Example ${number}` });
    const set = el(
      "fieldset",
      { id: `ex-${n}` },
      legend,
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

  /** Shows ``data`` (a character as the API returns it); keys the form lacks are kept as-is. */
  fill(data) {
    this.base = structuredClone(data || {});
    this.field("f-name").value = this.base.name || "";
    for (const [key, id] of Object.entries(LISTS)) this.field(id).value = asList(this.base[key]).join("\n");
    this.field("f-adjectives").value = asList(this.base.adjectives).join(", ");
    const style = this.base.style || {};
    for (const part of STYLES) this.field(`f-style-${part}`).value = asList(style[part]).join("\n");
    const examples = Array.isArray(this.base.messageExamples) ? this.base.messageExamples : [];
    const pairs = examples.filter(isSimplePair);
    this.kept = examples.filter((e) => !isSimplePair(e));
    this.rows.replaceChildren();
    for (const [said, replied] of pairs) this.addRow(said.content.text, replied.content.text);
    while (this.rows.children.length < 2) this.addRow("", "");
    this.keptNote.hidden = this.kept.length === 0;
    this.keptNote.textContent = `${this.kept.length} longer example(s) are kept as they are; edit them in the raw editor.`;
    this.clear();
  }

  /** Whether the user typed anything into a new persona. */
  isEmpty() {
    return [...this.form.querySelectorAll("input, textarea")].every((c) => !c.value.trim());
  }

  /** The character: the loaded data with the form's fields written over it. */
  read() {
    const data = structuredClone(this.base);
    const name = this.field("f-name").value;
    data.name = name;
    const set = (key, value) => {
      if (value.length || key in data) data[key] = value;
    };
    for (const [key, id] of Object.entries(LISTS)) set(key, lines(this.field(id).value));
    set("adjectives", this.field("f-adjectives").value.split(",").map((s) => s.trim()).filter(Boolean));
    const style = { ...(data.style || {}) };
    for (const part of STYLES) {
      const rules = lines(this.field(`f-style-${part}`).value);
      if (rules.length || part in style) style[part] = rules;
    }
    if (Object.keys(style).length) data.style = style;
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
    return data;
  }

  clear() {
    clearProblems(this.form);
    this.summary.hidden = true;
    this.summary.replaceChildren();
  }

  /** The control (or fieldset) a problem's path belongs to, or null. */
  target(path) {
    const [head, second, ...rest] = path.split(".");
    if (head === "name") return this.field("f-name");
    if (head in LISTS) return this.field(LISTS[head]);
    if (head === "adjectives") return this.field("f-adjectives");
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

  /** Shows each problem next to its field; the rest in the summary above the form. */
  show(error) {
    this.clear();
    const unplaced = [];
    let first = null;
    for (const problem of error.problems) {
      const target = this.target(problem.path || "");
      if (target) {
        markProblem(target, problem.path, problem.message);
        first ??= target;
      } else {
        unplaced.push(problem);
      }
    }
    if (unplaced.length || !error.problems.length) {
      const list = el("ul", { className: "problems" });
      for (const p of unplaced) {
        list.append(el("li", {}, el("code", { textContent: p.path || "(whole character)" }), ` ${p.message}`));
      }
      const lead = error.problems.length ? "Not saved: fix these problems too." : error.message;
      this.summary.append(el("p", { textContent: lead }), ...(unplaced.length ? [list] : []));
      this.summary.hidden = false;
    }
    (first && first.matches("input, textarea") ? first : this.summary).focus?.();
  }
}
