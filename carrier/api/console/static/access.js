// The "Tools & tokens" view: HTTP tools (register, test once, remove), per-agent API tokens
// (create: the token is shown once; revoke) and platform client configurations (read, set;
// a refused one shows each problem with its path). All of it needs the admin token: with an
// agent's token each panel says so instead.

import { ApiError, call } from "./api.js";

const TOOL_EXAMPLE = {
  name: "get_weather",
  description: "The weather forecast for a city.",
  url: "https://<the tool's host>/weather",
  method: "GET",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

function parseJson(text, what) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} is not valid JSON (${error.message}): fix it and try again`);
  }
}

export function mount(root, ctx) {
  // ctx.el, and data-* attributes from a ``dataset`` prop (a getter-only property on elements)
  const el = (tag, { dataset, ...props } = {}, ...children) => {
    const node = ctx.el(tag, props, ...children);
    if (dataset) Object.assign(node.dataset, dataset);
    return node;
  };

  function panel(id, title, ...body) {
    const notice = el("p", { className: "notice", role: "status", id: `${id}-status` });
    const section = el(
      "section",
      { className: "panel", id },
      el("div", { className: "panel-head" }, el("h2", { textContent: title })),
      notice,
      ...body,
    );
    const say = (text, kind = "") => {
      notice.textContent = text;
      notice.className = `notice ${kind}`.trim();
    };
    return { section, say };
  }

  function problemsList(error) {
    const list = el("ul", { className: "problems" });
    for (const p of error instanceof ApiError ? error.problems : []) {
      list.append(el("li", {}, el("code", { textContent: p.path || "(config)" }), `: ${p.message}`));
    }
    return list;
  }

  function field(id, label, input) {
    input.id = id;
    return el("div", { className: "acc-field" }, el("label", { htmlFor: id, textContent: label }), input);
  }

  async function guarded(button, say, work) {
    button.disabled = true;
    try {
      await work();
    } catch (error) {
      say(ctx.describe(error), "error");
    } finally {
      button.disabled = false;
    }
  }

  // --- tools ---------------------------------------------------------------------------------
  const toolRows = el("tbody");
  const toolSpec = el("textarea", { rows: 8, spellcheck: false, value: JSON.stringify(TOOL_EXAMPLE, null, 2) });
  const toolAdd = el("button", { type: "button", className: "primary", textContent: "Register tool" });
  const toolProblems = el("div");
  const tools = panel(
    "access-tools",
    "Tools",
    el("p", { className: "hint", textContent: 'Header values name environment variables allowed in CARRIER_TOOL_ENV ("$NAME"); a value is never stored.' }),
    el("div", { className: "table-wrap" }, el("table", { className: "agents", id: "tools-table" }, el("thead", {}, el("tr", {}, ...["Tool", "Test with arguments (JSON)", ""].map((t) => el("th", { scope: "col", textContent: t })))), toolRows)),
    field("tool-spec", "New tool (JSON spec)", toolSpec),
    toolProblems,
    el("div", { className: "actions" }, toolAdd),
  );

  function toolRow(spec) {
    const args = el("input", { value: "{}", spellcheck: false });
    args.setAttribute("aria-label", `Arguments for ${spec.name}`);
    const test = el("button", { type: "button", textContent: "Test" });
    const remove = el("button", { type: "button", className: "danger", textContent: "Remove" });
    remove.setAttribute("aria-label", `Remove ${spec.name}`);
    const result = el("pre", { className: "acc-result", hidden: true });
    test.addEventListener("click", () =>
      guarded(test, tools.say, async () => {
        const body = parseJson(args.value || "{}", "The arguments");
        const out = await call("POST", `/tools/${encodeURIComponent(spec.name)}/test`, { body });
        result.hidden = false;
        result.className = `acc-result ${out.ok ? "ok" : "error"}`;
        result.textContent = out.ok ? `OK in ${out.elapsed_ms} ms:\n${out.output}` : `Failed in ${out.elapsed_ms} ms: ${out.error}`;
      }),
    );
    remove.addEventListener("click", () =>
      guarded(remove, tools.say, async () => {
        await call("DELETE", `/tools/${encodeURIComponent(spec.name)}`);
        tools.say(`Removed tool ${spec.name}.`, "ok");
        await loadTools();
      }),
    );
    return el(
      "tr",
      { dataset: { tool: spec.name } },
      el("th", { scope: "row" }, el("span", { className: "agent-name", textContent: spec.name }), el("span", { className: "agent-id", textContent: `${spec.method} ${spec.url}` })),
      el("td", {}, el("div", { className: "acc-test" }, args, test), result),
      el("td", {}, el("div", { className: "row-actions" }, remove)),
    );
  }

  async function loadTools() {
    const list = await call("GET", "/tools");
    toolRows.replaceChildren(
      ...(list.length ? list.map(toolRow) : [el("tr", {}, el("td", { colSpan: 3, className: "empty", textContent: "No tools registered." }))]),
    );
  }

  toolAdd.addEventListener("click", () =>
    guarded(toolAdd, tools.say, async () => {
      toolProblems.replaceChildren();
      try {
        const spec = await call("POST", "/tools", { body: parseJson(toolSpec.value, "The tool spec") });
        tools.say(`Registered tool ${spec.name}.`, "ok");
      } catch (error) {
        toolProblems.replaceChildren(problemsList(error));
        throw error;
      }
      await loadTools();
    }),
  );

  // --- tokens --------------------------------------------------------------------------------
  const tokenRows = el("tbody");
  const tokenName = el("input", { placeholder: "e.g. support-bot", autocomplete: "off" });
  const tokenAgent = el("select");
  const tokenMake = el("button", { type: "button", className: "primary", textContent: "Create token" });
  const shown = el("div", { className: "acc-once", hidden: true, id: "token-once" });
  const tokens = panel(
    "access-tokens",
    "Tokens",
    el("p", { className: "hint", textContent: "A token may message one agent, upload its media and read it and its memories. It is shown once, when made." }),
    el("div", { className: "acc-row" }, field("token-name", "Name", tokenName), field("token-agent", "Agent", tokenAgent), tokenMake),
    shown,
    el("div", { className: "table-wrap" }, el("table", { className: "agents", id: "tokens-table" }, el("thead", {}, el("tr", {}, ...["Name", "Agent", "Created", ""].map((t) => el("th", { scope: "col", textContent: t })))), tokenRows)),
  );

  async function loadTokens(agents) {
    const names = new Map(agents.map((a) => [a.id, a.name]));
    const list = await call("GET", "/tokens");
    tokenRows.replaceChildren(
      ...(list.length
        ? list.map((t) => {
            const revoke = el("button", { type: "button", className: "danger", textContent: "Revoke" });
            revoke.setAttribute("aria-label", `Revoke ${t.name}`);
            revoke.addEventListener("click", () =>
              guarded(revoke, tokens.say, async () => {
                await call("DELETE", `/tokens/${encodeURIComponent(t.name)}`);
                tokens.say(`Revoked ${t.name}: it no longer works.`, "ok");
                await loadTokens(agents);
              }),
            );
            return el(
              "tr",
              { dataset: { token: t.name } },
              el("th", { scope: "row", textContent: t.name }),
              el("td", { textContent: names.get(t.agent_id) || t.agent_id }),
              el("td", { textContent: new Date(t.created_at).toLocaleString() }),
              el("td", {}, el("div", { className: "row-actions" }, revoke)),
            );
          })
        : [el("tr", {}, el("td", { colSpan: 4, className: "empty", textContent: "No tokens." }))]),
    );
  }

  tokenMake.addEventListener("click", () =>
    guarded(tokenMake, tokens.say, async () => {
      const made = await call("POST", "/tokens", { body: { name: tokenName.value.trim(), agent_id: tokenAgent.value } });
      const value = el("code", { className: "acc-secret", textContent: made.token });
      const done = el("button", { type: "button", textContent: "I have copied it" });
      done.addEventListener("click", () => {
        shown.hidden = true;
        shown.replaceChildren();
      });
      shown.replaceChildren(el("p", { textContent: `Token ${made.name}: copy it now, it is not shown again.` }), value, done);
      shown.hidden = false;
      tokenName.value = "";
      tokens.say(`Created ${made.name}.`, "ok");
      await loadTokens(await ctx.agents());
    }),
  );

  // --- client configs ------------------------------------------------------------------------
  const clientId = el("input", { placeholder: "discord, or <agent id>:discord", autocomplete: "off", spellcheck: false });
  const clientLoad = el("button", { type: "button", textContent: "Load" });
  const clientSave = el("button", { type: "button", className: "primary", textContent: "Save" });
  const clientJson = el("textarea", { rows: 6, spellcheck: false, value: "{}" });
  const clientProblems = el("div", { id: "client-problems" });
  const clients = panel(
    "access-clients",
    "Client configs",
    el("p", { className: "hint", textContent: 'Checked against the client\'s own settings; secrets as environment references ("$DISCORD_API_TOKEN"), never values.' }),
    el("div", { className: "acc-row" }, field("client-id", "Client", clientId), clientLoad),
    field("client-config", "Configuration (JSON)", clientJson),
    clientProblems,
    el("div", { className: "actions" }, clientSave),
  );

  function clientPath() {
    const id = clientId.value.trim();
    if (!id) throw new Error("Name a client first: discord, instagram, or <agent id>:discord for one agent's");
    return `/clients/${encodeURIComponent(id)}/config`;
  }

  function showConfig(out, verb) {
    clientJson.value = JSON.stringify(out.config, null, 2);
    const checked = out.validated ? "checked against the client's settings" : "not checked: this client declares no settings model";
    const applied = out.applied_to?.length ? `; applied to ${out.applied_to.length} running agent(s)` : "";
    clients.say(`${verb} ${out.client_id} (${checked}${applied}).`, "ok");
  }

  clientLoad.addEventListener("click", () =>
    guarded(clientLoad, clients.say, async () => {
      clientProblems.replaceChildren();
      showConfig(await call("GET", clientPath()), "Loaded");
    }),
  );
  clientSave.addEventListener("click", () =>
    guarded(clientSave, clients.say, async () => {
      clientProblems.replaceChildren();
      try {
        showConfig(await call("POST", clientPath(), { body: parseJson(clientJson.value, "The configuration") }), "Saved");
      } catch (error) {
        clientProblems.replaceChildren(problemsList(error));
        throw error;
      }
    }),
  );

  root.replaceChildren(tools.section, tokens.section, clients.section);

  return {
    async show() {
      // Tokens are the admin's to make: an agent's token gets no agents here (403), and each
      // panel says what it needs.
      const agents = await ctx.agents().catch((error) => {
        if (error instanceof ApiError && error.status === 403) return [];
        throw error;
      });
      const keep = tokenAgent.value;
      tokenAgent.replaceChildren(...agents.map((a) => el("option", { value: a.id, textContent: a.name })));
      if (agents.some((a) => a.id === keep)) tokenAgent.value = keep;
      await Promise.all([
        loadTools().catch((error) => tools.say(ctx.describe(error), "error")),
        loadTokens(agents).catch((error) => tokens.say(ctx.describe(error), "error")),
      ]);
    },
  };
}
