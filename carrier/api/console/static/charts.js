// Charts for the console: small SVG line and bar charts, drawn from the lines of GET /metrics/series,
// and horizontal bars for sizes that are not series (drawBars: the vector index per agent).
//
// No dependency and nothing fetched: the page's CSP allows its own files only, and no inline style,
// so colours come from classes (.series-0 ... .series-7 in console.css), never from attributes.
// Each chart keeps one fixed aspect ratio (no layout jump when the data changes), says what it
// shows in its <figcaption>, and names each line with its latest value (or its total, for bars)
// in a legend of plain text, which screen readers read (the drawing itself is one labelled image).

// The SVG namespace, as the HTML parser gives it to an <svg> element (no address in the source).
const SVG = (() => {
  const holder = document.createElement("div");
  holder.innerHTML = "<svg></svg>";
  return holder.firstChild.namespaceURI;
})();
const W = 600;
const H = 220;
const PAD = { left: 52, right: 12, top: 12, bottom: 28 };
const COLOURS = 8;

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  node.append(...children);
  return node;
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props);
  node.append(...children);
  return node;
}

/** A round step for about ``count`` ticks between 0 and ``max``. */
function niceStep(max, count = 4) {
  const raw = max / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const unit = raw / power;
  return (unit <= 1 ? 1 : unit <= 2 ? 2 : unit <= 5 ? 5 : 10) * power;
}

/** ``value`` as the axis and caption show it: whole numbers plain, small ones with precision. */
export function formatNumber(value, unit = "") {
  if (value === null || value === undefined) return "—";
  let text;
  if (unit === "$") text = value >= 1 ? value.toFixed(2) : String(Number(value.toPrecision(2)));
  else if (Math.abs(value) >= 1000) text = `${(value / 1000).toFixed(value >= 10_000 ? 0 : 1)}k`;
  else text = Number.isInteger(value) ? String(value) : value.toFixed(value < 10 ? 1 : 0);
  if (unit === "$") return `$${text}`;
  return unit ? `${text} ${unit}` : text;
}

/** An axis label for bucket start ``t`` (seconds, UTC): hh:mm for minutes, the date for days. */
function timeLabel(t, step) {
  const iso = new Date(t * 1000).toISOString();
  return step === "day" ? iso.slice(5, 10) : iso.slice(11, 16);
}

/**
 * Draws ``lines`` ([{label, points: [[t, value|null], ...]}], all on the same times) into
 * ``figure`` (a <figure> with a <figcaption> kept as the chart's title).
 *
 * ``kind``: "line" (one polyline per line; null values leave a gap) or "bars" (stacked per time).
 * ``unit``: "$", "ms" or "" for the axis and the caption. ``step``: "minute" or "day".
 */
export function drawChart(figure, { title, lines, kind = "line", unit = "", step = "minute" }) {
  const times = lines.length ? lines[0].points.map(([t]) => t) : [];
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  let max = 0;
  if (kind === "bars") {
    times.forEach((_, i) => {
      max = Math.max(max, lines.reduce((sum, line) => sum + (line.points[i][1] || 0), 0));
    });
  } else {
    for (const line of lines) for (const [, v] of line.points) if (v !== null) max = Math.max(max, v);
  }
  const tick = max > 0 ? niceStep(max) : 1;
  const top = max > 0 ? Math.ceil(max / tick) * tick : 1;
  const x = (i) => PAD.left + (times.length > 1 ? (i / (times.length - 1)) * plotW : plotW / 2);
  const y = (v) => PAD.top + plotH - (v / top) * plotH;

  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img" });
  chart.setAttribute("aria-label", title);
  const grid = svg("g", { class: "chart-grid" });
  for (let v = 0; v <= top + tick / 2; v += tick) {
    grid.append(svg("line", { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }));
    grid.append(svg("text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end" }, formatNumber(v, unit === "$" ? "$" : "")));
  }
  const every = Math.max(1, Math.ceil(times.length / 6));
  times.forEach((t, i) => {
    if (i % every === 0 || i === times.length - 1) {
      grid.append(svg("text", { x: x(i), y: H - 8, "text-anchor": "middle" }, timeLabel(t, step)));
    }
  });
  chart.append(grid);

  if (kind === "bars") {
    const width = Math.max(2, (plotW / Math.max(1, times.length)) * 0.7);
    const base = times.map(() => 0);
    lines.forEach((line, n) => {
      const group = svg("g", { class: `series series-${n % COLOURS} bars` });
      line.points.forEach(([t, v], i) => {
        if (!v) return;
        const rect = svg("rect", {
          x: x(i) - width / 2,
          y: y(base[i] + v),
          width,
          height: Math.max(0, y(base[i]) - y(base[i] + v)),
        });
        rect.dataset.value = String(v);
        rect.append(svg("title", {}, `${line.label} ${timeLabel(t, step)}: ${formatNumber(v, unit)}`));
        group.append(rect);
        base[i] += v;
      });
      chart.append(group);
    });
  } else {
    lines.forEach((line, n) => {
      const group = svg("g", { class: `series series-${n % COLOURS}${line.dashed ? " dashed" : ""}` });
      let path = "";
      line.points.forEach(([, v], i) => {
        if (v === null) {
          path += " ";
          return;
        }
        path += `${path && !path.endsWith(" ") ? " L" : " M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
      });
      if (path.trim()) group.append(svg("path", { d: path.trim() }));
      // A value with no neighbour draws no line: a dot shows it.
      line.points.forEach(([, v], i) => {
        const alone = v !== null && line.points[i - 1]?.[1] == null && line.points[i + 1]?.[1] == null;
        if (alone) group.append(svg("circle", { cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 3 }));
      });
      chart.append(group);
    });
  }

  const legend = el("ul", { className: "chart-legend" });
  lines.forEach((line, n) => {
    const last = [...line.points].reverse().find(([, v]) => v !== null);
    const value = kind === "bars" ? line.points.reduce((s, [, v]) => s + (v || 0), 0) : last?.[1] ?? null;
    const item = el("li", { className: `series-${n % COLOURS}${line.dashed ? " dashed" : ""}` });
    item.append(el("span", { className: "swatch" }), `${line.label}: `, el("b", { textContent: formatNumber(value, unit) }));
    legend.append(item);
  });
  if (!lines.length) legend.append(el("li", { className: "subtle", textContent: "No data yet." }));

  const caption = figure.querySelector("figcaption") || el("figcaption");
  caption.textContent = title;
  figure.replaceChildren(caption, chart, legend);
}

/** ``text`` cut to ``max`` characters, with an ellipsis. */
function cut(text, max) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * Draws ``bars`` ([{label, value, note, tone}]) as horizontal bars, one row each, into
 * ``figure``: for figures that are a size now, not a series (the vector index's rows per
 * agent). ``tone`` picks the colour (0-7, as the lines'); ``note`` follows the value in the
 * legend, which says everything the drawing shows (nothing is only in a tooltip). At most
 * ``max`` bars are drawn, the largest; the legend names the rest.
 */
export function drawBars(figure, { title, bars, unit = "", max = 8 }) {
  const shown = [...bars].sort((a, b) => (b.value || 0) - (a.value || 0)).slice(0, max);
  const labelW = 130;
  const plotW = W - labelW - PAD.right - 48;
  const rowH = (H - PAD.top - PAD.bottom / 2) / Math.max(4, shown.length);
  const top = Math.max(1, ...shown.map((b) => b.value || 0));
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img" });
  chart.setAttribute("aria-label", title);
  const grid = svg("g", { class: "chart-grid" });
  grid.append(svg("line", { x1: labelW, x2: labelW, y1: PAD.top, y2: PAD.top + rowH * shown.length }));
  shown.forEach((bar, i) => {
    const y = PAD.top + i * rowH;
    grid.append(svg("text", { x: labelW - 8, y: y + rowH / 2 + 4, "text-anchor": "end" }, cut(bar.label, 18)));
    const width = ((bar.value || 0) / top) * plotW;
    grid.append(svg("text", { x: labelW + width + 6, y: y + rowH / 2 + 4 }, formatNumber(bar.value ?? null, unit)));
    const group = svg("g", { class: `series series-${(bar.tone || 0) % COLOURS} bars` });
    const rect = svg("rect", { x: labelW, y: y + rowH * 0.15, width: Math.max(bar.value ? 2 : 0, width), height: rowH * 0.7 });
    rect.dataset.value = String(bar.value ?? 0);
    rect.append(svg("title", {}, `${bar.label}: ${formatNumber(bar.value ?? null, unit)} · ${bar.note}`));
    group.append(rect);
    chart.append(group);
  });
  chart.prepend(grid);

  const legend = el("ul", { className: "chart-legend" });
  for (const bar of bars) {
    const item = el("li", { className: `series-${(bar.tone || 0) % COLOURS}` });
    item.dataset.label = bar.label;
    item.append(el("span", { className: "swatch" }), `${bar.label}: `);
    if (bar.value === null || bar.value === undefined) item.append(bar.note);
    else item.append(el("b", { textContent: formatNumber(bar.value, unit) }), ` · ${bar.note}`);
    legend.append(item);
  }
  if (!bars.length) legend.append(el("li", { className: "subtle", textContent: "No data yet." }));
  const caption = figure.querySelector("figcaption") || el("figcaption");
  caption.textContent = title;
  figure.replaceChildren(caption, chart, legend);
}
