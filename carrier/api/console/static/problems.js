// Problems and warnings shown next to the controls they are about: "path: message" under the
// control (or fieldset), tied to it with aria-describedby. A problem marks the control invalid
// (a save is refused); a warning does not (the character loads, but will not act as written).

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props);
  node.append(...children);
  return node;
}

const KINDS = { problem: "field-error", warning: "field-warning" };

function mark(kind, target, path, message, whole) {
  const holder = target.closest(".field") || target;
  const id = `${target.id}-${kind === "problem" ? "error" : "warning"}`;
  let note = document.getElementById(id);
  if (!note) {
    note = el("p", { id, className: KINDS[kind] });
    holder.append(note);
    const described = target.getAttribute("aria-describedby");
    target.setAttribute("aria-describedby", described ? `${described} ${id}` : id);
  }
  if (note.childNodes.length) note.append(el("br"));
  if (kind === "warning") note.append(el("span", { className: "sr-only", textContent: "Warning: " }));
  note.append(el("code", { textContent: path || whole }), ` ${message}`);
  // A note in a folded section would go unseen: unfold it.
  for (let up = target.closest("details"); up; up = up.parentElement?.closest("details")) up.open = true;
}

/** Puts "path: message" under a control (or fieldset) and marks it invalid. */
export function markProblem(target, path, message, whole = "(whole character)") {
  mark("problem", target, path, message, whole);
  if (target.matches("input, textarea, select")) target.setAttribute("aria-invalid", "true");
}

/** Puts "path: message" under a control (or fieldset) as a warning: shown, not refused. */
export function markWarning(target, path, message, whole = "(whole character)") {
  mark("warning", target, path, message, whole);
}

function clear(root, kind) {
  for (const note of root.querySelectorAll(`.${KINDS[kind]}`)) {
    const owner = root.querySelector(`[aria-describedby~="${note.id}"]`);
    if (owner) {
      const rest = owner.getAttribute("aria-describedby").split(" ").filter((i) => i !== note.id);
      if (rest.length) owner.setAttribute("aria-describedby", rest.join(" "));
      else owner.removeAttribute("aria-describedby");
    }
    note.remove();
  }
}

/** Removes every mark made by markProblem under ``root``. */
export function clearProblems(root) {
  clear(root, "problem");
  for (const node of root.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
}

/** Removes every mark made by markWarning under ``root``. */
export function clearWarnings(root) {
  clear(root, "warning");
}

/** A list of {path, message} as <li>s: "path message" (``whole`` when the path is empty). */
export function problemItems(list, whole = "(whole character)") {
  return list.map((p) => el("li", {}, el("code", { textContent: p.path || whole }), ` ${p.message}`));
}
