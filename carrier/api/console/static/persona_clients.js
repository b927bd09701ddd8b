// The persona form's clients: which platforms the persona runs on (``clients``) and each one's
// options (``clientConfig.<name>``, edited as JSON; the server checks them against the client's
// own settings on save). The clients installed on the server are offered; a client the
// character names that is not installed here is shown too, so nothing is dropped unseen.

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props);
  node.append(...children);
  return node;
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

let serial = 0;

export class ClientsEditor {
  constructor(fieldset) {
    this.fieldset = fieldset;
    this.rows = fieldset.querySelector(".client-rows");
    this.installed = null; // [{name, config_schema}] from GET /clients, null until read
    this.listed = []; // ``clients`` as loaded, as spelt there
    this.configs = {}; // ``clientConfig`` as loaded
    this.written = []; // ``clients`` as read() last wrote it: problems' indexes point here
  }

  /** The clients the server has (GET /clients); the rows are drawn again, edits kept. */
  setInstalled(kinds) {
    const current = this.rows.children.length ? this.read([]) : null;
    this.installed = kinds;
    if (current) {
      this.listed = current.clients || [];
      this.configs = current.clientConfig || {};
    }
    this.render();
  }

  fill(clients, configs) {
    this.listed = Array.isArray(clients) ? clients.filter((c) => typeof c === "string") : [];
    this.configs = isObject(configs) ? structuredClone(configs) : {};
    this.hadClients = Array.isArray(clients);
    this.written = [...this.listed];
    this.render();
  }

  names() {
    const seen = new Map(); // lowercase → as spelt
    for (const kind of this.installed || []) seen.set(kind.name.toLowerCase(), kind.name);
    for (const name of [...this.listed, ...Object.keys(this.configs)]) {
      if (!seen.has(name.toLowerCase())) seen.set(name.toLowerCase(), name);
    }
    return [...seen.values()];
  }

  render() {
    const listed = new Set(this.listed.map((c) => c.toLowerCase()));
    const rows = this.names().map((name) => this.row(name, listed.has(name.toLowerCase())));
    this.rows.replaceChildren(...rows);
    if (!rows.length) {
      const why = this.installed ? "No client is installed on this server." : "Reading the installed clients…";
      this.rows.append(el("p", { className: "hint", textContent: why }));
    }
  }

  row(name, on) {
    const n = serial++;
    const kind = (this.installed || []).find((k) => k.name === name.toLowerCase());
    const box = el("input", { type: "checkbox", id: `cl-${n}-on`, checked: on });
    const label = el("label", { htmlFor: box.id, className: "check" }, box, ` Run on ${name}`);
    if (this.installed && !kind) label.append(" ", el("span", { className: "hint", textContent: "(not installed here)" }));
    const config = this.configs[name];
    const text = isObject(config) && Object.keys(config).length ? JSON.stringify(config, null, 2) : "";
    const rows = Math.min(12, Math.max(3, text.split("\n").length));
    const area = el("textarea", { id: `cl-${n}-config`, rows, spellcheck: false, value: text, placeholder: "{}" });
    const keys = Object.keys(kind?.config_schema?.properties || {});
    const hint = keys.length ? `known options: ${keys.join(", ")}` : "a JSON object";
    const configField = el(
      "div",
      { className: "field client-config" },
      el("label", { htmlFor: area.id }, `${name} options `, el("span", { className: "hint", textContent: "JSON" })),
      area,
      el("p", { className: "hint", textContent: `${hint}. Secret options are kept as stored, out of sight; write "$ENV_VAR" to replace one.` }),
    );
    const show = () => {
      configField.hidden = !box.checked && !area.value.trim();
    };
    box.addEventListener("change", show);
    show();
    const row = el("div", { className: "client-row" }, label, configField);
    row.dataset.name = name;
    return row;
  }

  /**
   * {clients, clientConfig} as the rows say; ``problems`` gets options that are not a JSON
   * object (the stored ones are written back for those, so nothing is lost).
   */
  read(problems) {
    const clients = [];
    const clientConfig = structuredClone(this.configs);
    for (const row of this.rows.querySelectorAll(".client-row")) {
      const name = row.dataset.name;
      const box = row.querySelector("input[type=checkbox]");
      const area = row.querySelector("textarea");
      if (box.checked) clients.push(this.listed.find((c) => c.toLowerCase() === name.toLowerCase()) || name);
      const text = area.value.trim();
      if (!text) {
        delete clientConfig[name];
        continue;
      }
      let parsed;
      try {
        parsed = JSON.parse(text);
      } catch (error) {
        problems.push({ target: area, path: `clientConfig.${name}`, message: `not JSON (${error.message}); write an object such as {"allowedChannels": ["general"]}` });
        continue;
      }
      if (!isObject(parsed)) {
        problems.push({ target: area, path: `clientConfig.${name}`, message: "expected a JSON object of options, e.g. {}" });
        continue;
      }
      clientConfig[name] = parsed;
    }
    this.written = clients;
    const out = { clientConfig };
    if (clients.length || this.hadClients) out.clients = clients;
    return out;
  }

  summary() {
    const on = [...this.rows.querySelectorAll(".client-row")].filter((r) => r.querySelector("input").checked);
    return on.map((r) => r.dataset.name).join(", ") || "none";
  }

  /** The checkbox of ``clients.<index>`` as last written, or the fieldset. */
  targetClient(index) {
    const name = this.written[Number(index)];
    const row = name && this.rowOf(name);
    return row ? row.querySelector("input") : this.fieldset;
  }

  /** The options of client ``name`` (shown), or its checkbox. */
  targetConfig(name) {
    const row = this.rowOf(name);
    if (!row) return this.fieldset;
    const area = row.querySelector("textarea");
    area.closest(".field").hidden = false;
    return area;
  }

  rowOf(name) {
    return [...this.rows.querySelectorAll(".client-row")].find((r) => r.dataset.name.toLowerCase() === name.toLowerCase()) || null;
  }
}
