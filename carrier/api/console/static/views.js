// The console's views: one page, several views, chosen by the address's fragment (#jobs), so
// the back button, a reload and a shared link land on the same view. "Home" holds the overview,
// the agents, the chat and the editor; each other view is a module loaded the first time it is
// shown, which builds itself into its <main data-view> and refreshes each time it is shown again.
//
// A view module exports mount(root, ctx) and returns {show()} (show: read again what it shows).
// ctx: {describe(error) -> text, agents() -> the agents as GET /agents lists them (cached a few
// seconds), el(tag, props, ...children)}.

const VIEWS = [
  { name: "home", label: "Home" },
  { name: "conversations", label: "Conversations", module: "./conversations.js" },
  { name: "instagram", label: "Instagram", module: "./instagram.js" },
  { name: "jobs", label: "Jobs", module: "./jobs.js" },
  { name: "knowledge", label: "Knowledge", module: "./knowledge.js" },
  { name: "access", label: "Tools & tokens", module: "./access.js" },
  { name: "logs", label: "Logs & audit", module: "./logs.js" },
];

const mounted = new Map(); // view name -> the promise of its {show()}

function wanted() {
  const hash = location.hash.slice(1);
  return VIEWS.some((v) => v.name === hash) ? hash : "home";
}

/** Builds the navigation into ``nav`` and shows the view the address names; ``ctx`` is given to
 * each view module. Returns a function that shows a view by name. */
export function startViews(nav, ctx) {
  const links = new Map();
  for (const view of VIEWS) {
    const a = document.createElement("a");
    a.href = `#${view.name}`;
    a.textContent = view.label;
    links.set(view.name, a);
    const item = document.createElement("li");
    item.append(a);
    nav.append(item);
  }

  async function show(name) {
    for (const view of VIEWS) {
      const on = view.name === name;
      for (const node of document.querySelectorAll(`[data-view="${view.name}"]`)) node.hidden = !on;
      const link = links.get(view.name);
      if (on) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    const view = VIEWS.find((v) => v.name === name);
    if (!view?.module) return;
    const root = document.querySelector(`[data-view="${name}"]`);
    if (!mounted.has(name)) {
      mounted.set(
        name,
        import(view.module).then((m) => m.mount(root, ctx)),
      );
    }
    try {
      const shown = await mounted.get(name);
      await shown?.show?.();
    } catch (error) {
      mounted.delete(name); // a failed load is tried again next time
      root.replaceChildren(ctx.el("p", { className: "notice error", textContent: ctx.describe(error) }));
    }
  }

  window.addEventListener("hashchange", () => show(wanted()));
  show(wanted());
  return show;
}
