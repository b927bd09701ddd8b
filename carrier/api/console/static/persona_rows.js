// The persona form's row lists: prompt templates (name → text) and secrets (name → an
// environment reference; the server says whether each is set, never its value).

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props);
  node.append(...children);
  return node;
}

function field(control, label, hint = "") {
  const text = el("label", { htmlFor: control.id, textContent: label });
  if (hint) text.append(" ", el("span", { className: "hint", textContent: hint }));
  return el("div", { className: "field" }, text, control);
}

/** Removes ``row`` and puts the focus on a neighbour's first control, or on ``fallback``. */
function removeRow(row, fallback) {
  const next = row.nextElementSibling || row.previousElementSibling;
  row.remove();
  (next?.querySelector("input, textarea") || fallback).focus();
}

let serial = 0; // ids of controls made here: unique on the page

/** ``templates``: the prompt templates the persona overrides, by name (one row each). */
export class TemplatesEditor {
  constructor(fieldset) {
    this.rows = fieldset.querySelector("ol");
    this.add = fieldset.querySelector("button.add-row");
    this.add.addEventListener("click", () => this.addRow("", "").querySelector("input").focus());
  }

  fill(templates) {
    this.rows.replaceChildren();
    const map = templates && typeof templates === "object" ? templates : {};
    for (const [name, text] of Object.entries(map)) this.addRow(name, typeof text === "string" ? text : "");
  }

  addRow(name, text) {
    const n = serial++;
    const nameInput = el("input", { id: `tpl-${n}-name`, value: name, autocomplete: "off", spellcheck: false });
    nameInput.setAttribute("list", "template-names");
    const rows = Math.min(12, Math.max(4, Math.ceil(text.length / 60) + text.split("\n").length - 1));
    const body = el("textarea", { id: `tpl-${n}-text`, value: text, rows, spellcheck: false });
    const remove = el("button", { type: "button", className: "link", textContent: "Remove" });
    const row = el(
      "li",
      { className: "row-item" },
      field(nameInput, "Template name", "the prompt it replaces"),
      field(body, "Template text", "{{placeholders}} as in the built-in one"),
      remove,
    );
    const label = () => remove.setAttribute("aria-label", `Remove template ${nameInput.value.trim() || n + 1}`);
    nameInput.addEventListener("input", label);
    label();
    remove.addEventListener("click", () => removeRow(row, this.add));
    this.rows.append(row);
    return row;
  }

  /** {name: text} of the rows with a name; ``problems`` gets rows with text but no name. */
  read(problems) {
    const out = {};
    for (const row of this.rows.children) {
      const [name, text] = [row.querySelector("input").value.trim(), row.querySelector("textarea").value];
      if (name) out[name] = text;
      else if (text.trim()) problems.push({ target: row.querySelector("input"), path: "templates", message: "give the template a name (e.g. messageHandlerTemplate), or remove it" });
    }
    return out;
  }

  count() {
    return [...this.rows.children].filter((r) => r.querySelector("input").value.trim()).length;
  }

  /** The text of the template called ``name``, or null. */
  target(name) {
    const row = [...this.rows.children].find((r) => r.querySelector("input").value.trim() === name);
    return row ? row.querySelector("textarea") : null;
  }
}

const SECRET_HINT = '"$ENV_VAR"; empty: keep';

/**
 * Secrets by reference. Each secret the character names comes with its state here (set or
 * unset: whether its environment variable has a value on the server); a reference typed in
 * replaces the stored one (written under top-level ``secrets``, which wins over the others),
 * "Clear" stores "" (unset), and a new row names a new secret. Nothing typed: kept as stored.
 */
export class SecretsEditor {
  constructor(fieldset) {
    this.rows = fieldset.querySelector("ul");
    this.add = fieldset.querySelector("button.add-row");
    this.add.addEventListener("click", () => this.addRow(null).querySelector("input").focus());
    this.status = {};
  }

  fill(status) {
    this.status = { ...(status || {}) };
    this.rows.replaceChildren();
    for (const [name, state] of Object.entries(this.status)) this.addRow(name, state);
  }

  /** A row for a secret the character names (``name``, ``state``), or a new one (null). */
  addRow(name, state) {
    const n = serial++;
    const ref = el("input", { id: `sec-${n}-ref`, autocomplete: "off", spellcheck: false, placeholder: "$ENV_VAR" });
    const row = el("li", { className: "row-item secret" });
    row.dataset.name = name ?? "";
    if (name === null) {
      const nameInput = el("input", { id: `sec-${n}-name`, autocomplete: "off", spellcheck: false, placeholder: "OPENAI_API_KEY" });
      const remove = el("button", { type: "button", className: "link", textContent: "Remove" });
      remove.setAttribute("aria-label", "Remove this new secret");
      remove.addEventListener("click", () => removeRow(row, this.add));
      row.append(field(nameInput, "New secret's name"), field(ref, "Its reference", '"$ENV_VAR"'), remove);
    } else {
      const badge = el("span", { className: `badge ${state === "set" ? "on" : "off"}`, textContent: state });
      badge.title = state === "set" ? "its environment variable has a value on the server" : "no value on the server";
      const head = el("p", { className: "secret-name" }, el("code", { textContent: name }), " ", badge);
      const clear = el("button", { type: "button", className: "link", textContent: "Clear" });
      clear.setAttribute("aria-pressed", "false");
      clear.setAttribute("aria-label", `Clear ${name} (stored as unset)`);
      clear.addEventListener("click", () => {
        const on = clear.getAttribute("aria-pressed") !== "true";
        clear.setAttribute("aria-pressed", String(on));
        ref.disabled = on;
        ref.placeholder = on ? "cleared on save" : "$ENV_VAR";
        if (on) ref.value = "";
      });
      row.append(head, field(ref, `New reference for ${name}`, SECRET_HINT), clear);
    }
    this.rows.append(row);
    return row;
  }

  /** {name: reference} of what changes: typed references, "" for cleared ones. */
  read(problems) {
    const out = {};
    for (const row of this.rows.children) {
      const ref = row.querySelector('input[id$="-ref"]');
      const name = row.dataset.name || row.querySelector('input[id$="-name"]').value.trim();
      const cleared = row.querySelector("[aria-pressed]")?.getAttribute("aria-pressed") === "true";
      const value = ref.value.trim();
      if (!name && value) {
        problems.push({ target: row.querySelector("input"), path: "secrets", message: "name the secret (e.g. OPENAI_API_KEY), or remove the row" });
      } else if (name && (value || cleared)) {
        out[name] = cleared ? "" : value;
      }
    }
    return out;
  }

  summary() {
    const names = Object.keys(this.status);
    const unset = names.filter((n) => this.status[n] !== "set").length;
    if (!names.length) return "none";
    return `${names.length} named, ${unset ? `${unset} unset` : "all set"}`;
  }

  /** The reference field of secret ``name``, or null. */
  target(name) {
    for (const row of this.rows.children) {
      const typed = row.querySelector('input[id$="-name"]')?.value.trim();
      if (row.dataset.name === name || typed === name) return row.querySelector('input[id$="-ref"]');
    }
    return null;
  }
}
