// worldfs ui: each page asks the server's JSON endpoints, which answer
// through the same views and read-only gate as worldfs sql, and draws
// what they answer. Charts are uPlot (assets/vendor/uplot).
"use strict";

const body = document.body;
const page = body.dataset.page;
const world = body.dataset.world;
const run = body.dataset.run || "main";
// window.__ui holds what the page shows, for tests and the curious.
const ui = (window.__ui = {});

function $(id) { return document.getElementById(id); }

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k == null ? "" : String(k)));
  return e;
}

function status(msg, isError) {
  const s = $("status");
  s.textContent = msg || "";
  s.className = isError ? "error" : "";
}

// api fetches a JSON endpoint; an aborted fetch cancels the server's work.
async function api(path, params, signal) {
  const u = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== "") u.searchParams.set(k, v);
  const r = await fetch(u, { signal, credentials: "same-origin" });
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || r.statusText);
  return j;
}

function worldPath(w, rest) { return "/w/" + encodeURIComponent(w) + (rest || ""); }

// entityPath is the page of an entity's history in (w, r)'s table,
// showing tick (optional) selected.
function entityPath(w, r, table, id, tick) {
  const q = new URLSearchParams({ run: r, table, id });
  if (tick != null && tick !== "") q.set("tick", tick);
  return worldPath(w, "/entity?" + q);
}

// Times show in the reader's local time, to the second; the UTC time is
// on hover (timeEl).
const pad = (n, w) => String(n).padStart(w || 2, "0");
function fmtTime(ms) { return ms ? fmtLocal(ms) : "–"; } // 0: not recorded
function fmtLocal(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}
// fmtUTC writes ms in UTC to the second, then frac (the fraction of a
// second as a time was written, if any).
function fmtUTC(ms, frac) { return ms ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, (frac || "") + " UTC") : ""; }

// zonedTime reads a TIMESTAMPTZ as DuckDB writes it ("2026-12-08
// 01:07:43.617+00", "…+05:30") for a table cell: its local time, and its
// UTC time to the digit written for the title; null for anything else
// (a TIMESTAMP without a zone is shown as written).
function zonedTime(v) {
  const m = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(\.\d+)?([+-]\d{2})(?::?(\d{2}))?$/.exec(v);
  if (!m) return null;
  const ms = Date.parse(`${m[1]}T${m[2]}${(m[3] || "").slice(0, 4)}${m[4]}:${m[5] || "00"}`);
  if (isNaN(ms)) return null;
  return { local: fmtLocal(ms), utc: fmtUTC(ms, m[3]) };
}

// timeEl is a time as a <time> element: local, UTC on hover.
function timeEl(ms, prefix) {
  return el("time", ms ? { datetime: new Date(ms).toISOString(), title: fmtUTC(ms) } : {}, (prefix || "") + fmtTime(ms));
}

// fmtInt writes a count with thousands separators.
function fmtInt(n) { return n == null ? "" : Number(n).toLocaleString("en-US"); }

// fmtValue writes a value as DuckDB renders it (sql.Run's csv) for a
// person: integers with thousands separators, other numbers to 6
// significant digits (enough to tell neighbours apart at a glance; the
// exact value is the cell's title and the downloads'), the rest as it is.
const sig6 = new Intl.NumberFormat("en-US", { maximumSignificantDigits: 6 });
function fmtValue(v) {
  if (typeof v !== "string" || v === "NULL") return v;
  if (/^-?\d+$/.test(v)) return v.replace("-", "").length > 3 ? BigInt(v).toLocaleString("en-US") : v;
  if (/^-?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(v)) return fmtNum(Number(v));
  return v;
}
function fmtNum(x) {
  if (x == null || !isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-4 || a >= 1e15)) return x.toExponential(5).replace(/\.?0+e/, "e");
  return sig6.format(x);
}

function fmtBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? String(n) : n.toFixed(n < 10 ? 1 : 0)) + " " + units[i];
}

const isNum = (s) => s !== "NULL" && s !== "" && !isNaN(Number(s));

// numericCols returns the indexes of the columns whose values are all numbers.
function numericCols(res) {
  return res.columns.map((_, i) => i).filter((i) => res.rows.length > 0 && res.rows.every((r) => r[i] === "NULL" || r[i] === "–" || isNum(r[i])));
}

// renderTable draws a Result into a <table>; sortable headers call onSort.
function renderTable(table, res, opts) {
  opts = opts || {};
  const thead = table.tHead, tbody = table.tBodies[0];
  thead.replaceChildren();
  tbody.replaceChildren();
  const nums = new Set(numericCols(res));
  const hr = el("tr");
  res.columns.forEach((c, i) => {
    let label = c;
    if (opts.order === c) label += opts.desc ? " ▼" : " ▲";
    const th = el("th", { "data-col": c, class: nums.has(i) ? "num" : "" }, label);
    if (opts.onSort) { th.classList.add("sortable"); th.addEventListener("click", () => opts.onSort(c)); }
    hr.append(th);
  });
  if (opts.extra) hr.append(el("th", {}, opts.extra.header));
  thead.append(hr);
  const frag = document.createDocumentFragment();
  const idCol = opts.entity ? res.columns.indexOf("entity_id") : -1;
  const shown = Math.min(res.rows.length, opts.max || 1000);
  for (let r = 0; r < shown; r++) {
    const row = res.rows[r];
    const tr = el("tr");
    row.forEach((v, i) => {
      const time = nums.has(i) ? null : zonedTime(v);
      const shown = nums.has(i) ? fmtValue(v) : time ? time.local : v;
      const attrs = { class: (nums.has(i) ? "num" : "") + (v === "NULL" ? " null" : "") };
      if (time) attrs.title = time.utc; // local time shown, UTC on hover
      else if (shown !== v || v.length > 24) attrs.title = v; // the exact value on hover
      if (i === idCol && v !== "NULL") {
        // One click from a row to its history.
        const e = opts.entity.of ? opts.entity.of(row) : opts.entity;
        tr.append(el("td", attrs, el("a", { class: "entity", href: entityPath(e.world, e.run, e.table, v, e.tick), title: `the history of entity ${v}` }, shown)));
        return;
      }
      tr.append(el("td", attrs, shown));
    });
    if (opts.extra) { const td = el("td"); td.append(opts.extra.cell(row, res.columns)); tr.append(td); }
    frag.append(tr);
  }
  tbody.append(frag);
}

const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

function chartWidth(div) { return Math.max(300, div.clientWidth || 800); }

// ---------- worlds ----------

async function worldsPage() {
  status("loading worlds…");
  const ws = await api("/api/worlds");
  ui.worlds = ws;
  const tbody = $("worlds").tBodies[0];
  for (const w of ws) {
    const runs = el("td");
    if (w.runs.length === 0) runs.append("–");
    w.runs.forEach((r, i) => {
      if (i) runs.append(" ");
      runs.append(el("a", { href: worldPath(w.id, "?run=" + encodeURIComponent(r.name)), class: "run-link", "data-world": w.id, "data-run": r.name }, `${r.name}@${fmtInt(r.head_tick)}`));
    });
    const forkText = w.parent && `${w.parent} ${w.fork_run}@${w.fork_tick}`;
    const fork = w.parent ? el("a", { href: worldPath(w.parent, "?run=" + encodeURIComponent(w.fork_run) + "&tick=" + w.fork_tick), title: forkText }, forkText) : "–";
    tbody.append(el("tr", { "data-world": w.id },
      el("td", { class: "clip", title: w.id }, el("a", { href: worldPath(w.id) }, w.id)), el("td", { class: "clip" }, fork), runs,
      el("td", {}, w.status), el("td", {}, w.writer_mode), el("td", { class: "num" }, fmtInt(w.fence_epoch)),
      el("td", {}, timeEl(w.last_publish_unix_ms)), el("td", {}, timeEl(w.created_unix_ms)),
      el("td", { class: "num size", title: fmtInt(w.size_bytes) + " bytes" }, fmtBytes(w.size_bytes)),
      el("td", { class: "meta clip", title: metaText(w) }, metaText(w) || "–")));
  }
  drawLineage($("lineage"), ws);
  // The worlds with forks: each the root of a lineage to sweep.
  const parents = [...new Set(ws.map((w) => w.parent).filter((p) => p && ws.some((w) => w.id === p)))].sort();
  if (parents.length) {
    $("sweep-lineage").elements.lineage.replaceChildren(...parents.map((p) => el("option", { value: p }, p)));
    $("sweep-lineage").hidden = false;
  }
  status(ws.length + " worlds");
  body.dataset.ready = "1";
}

// metaText is a world's run parameters as KEY=VALUE pairs, by key.
function metaText(w) { return Object.keys(w.meta || {}).sort().map((k) => `${k}=${w.meta[k]}`).join(" "); }

// drawLineage draws the forks as a tree: each world right of its parent,
// the edge labelled with the run and tick it forked at.
function drawLineage(div, ws) {
  const byId = new Map(ws.map((w) => [w.id, w]));
  const kids = new Map();
  const roots = [];
  for (const w of ws) {
    if (w.parent && byId.has(w.parent)) {
      if (!kids.has(w.parent)) kids.set(w.parent, []);
      kids.get(w.parent).push(w);
    } else roots.push(w);
  }
  // Each node is a box of a fixed width: the world's name (cut to fit,
  // whole on hover) over its runs' head ticks.
  const W = 260, H = 34, DX = 290, DY = 46;
  const pos = new Map();
  let row = 0;
  const place = (w, depth) => {
    pos.set(w.id, { x: 20 + depth * DX, y: 16 + row * DY });
    row++;
    for (const k of kids.get(w.id) || []) place(k, depth + 1);
  };
  roots.forEach((r) => place(r, 0));
  const maxX = Math.max(0, ...[...pos.values()].map((p) => p.x));
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("width", maxX + W + 20);
  svg.setAttribute("height", 16 + row * DY);
  const make = (tag, attrs, text) => {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  for (const w of ws) {
    const p = pos.get(w.id), pp = w.parent && pos.get(w.parent);
    if (!pp) continue;
    svg.append(make("path", { d: `M${pp.x + 10} ${pp.y + H} V${p.y + H / 2} H${p.x}`, class: "edge" }));
    svg.append(make("text", { x: pp.x + 16, y: p.y + H / 2 - 4, class: "edge-label" }, `${w.fork_run}@${fmtInt(w.fork_tick)}`));
  }
  const names = [];
  for (const w of ws) {
    const p = pos.get(w.id);
    const a = make("a", { href: worldPath(w.id), class: "lineage-node", "data-world": w.id });
    const head = w.runs.map((r) => `${r.name}@${fmtInt(r.head_tick)}`).join(" ") || "no ticks";
    const name = make("text", { x: p.x + 8, y: p.y + 14, class: "name" }, w.id);
    a.append(make("title", {}, `${w.id}: ${head}`), make("rect", { x: p.x, y: p.y, width: W, height: H, rx: 4, class: "node " + w.status }),
      name, make("text", { x: p.x + 8, y: p.y + 28, class: "head" }, head));
    svg.append(a);
    names.push(name);
  }
  div.replaceChildren(svg);
  for (const t of names) fitText(t, W - 16);
  for (const t of svg.querySelectorAll("text.head")) fitText(t, W - 16);
}

// fitText cuts an SVG text to maxPx wide, ending it with an ellipsis.
function fitText(t, maxPx) {
  const full = t.textContent;
  if (t.getComputedTextLength() <= maxPx) return;
  let lo = 0, hi = full.length;
  while (lo < hi) {
    const m = (lo + hi + 1) >> 1;
    t.textContent = full.slice(0, m) + "…";
    if (t.getComputedTextLength() <= maxPx) lo = m; else hi = m - 1;
  }
  t.textContent = full.slice(0, lo) + "…";
}

// ---------- a run: timeline and tick ----------

const runState = { table: "", order: "", desc: false, offset: 0, limit: 50, tick: null, x: "", y: "", columns: {}, ctl: null, charts: {} };
ui.run = runState;

async function runPage() {
  status("loading the timeline…");
  const [tl, cols] = await Promise.all([api(`/api/w/${encodeURIComponent(world)}/timeline`, { run }), api(`/api/w/${encodeURIComponent(world)}/tables`, { run })]);
  ui.timeline = tl;
  for (const [t, c, type] of cols.rows) (runState.columns[t] = runState.columns[t] || []).push({ name: c, type });
  runState.spans = tl.spans;
  const sc = $("scrubber");
  if (tl.ticks === 0) { status("this run has no visible tick"); body.dataset.ready = "1"; return; }
  sc.min = firstTick();
  sc.max = lastTick();
  $("timeline-info").textContent = `ticks ${fmtInt(firstTick())}–${fmtInt(lastTick())} (${fmtInt(tl.ticks)} ticks)`;
  showMarks(tl);
  wallClock(tl);
  drawEvents(tl);
  // Tables: the particle simulation's first, then by name.
  const tables = tl.views.slice();
  runState.table = tables.includes("particle") ? "particle" : tables[0] || "";
  const tabs = $("table-tabs");
  for (const t of tables) tabs.append(el("button", { "data-table": t, onclick: () => chooseTable(t) }, t));
  setAxes();
  sc.addEventListener("input", () => selectTick(Number(sc.value)));
  $("tick-input").addEventListener("change", () => selectPoint($("tick-input").value));
  $("prev").addEventListener("click", () => step(-1));
  $("next").addEventListener("click", () => step(1));
  $("play").addEventListener("click", play);
  $("page-prev").addEventListener("click", () => { runState.offset = Math.max(0, runState.offset - runState.limit); loadTick(); });
  $("page-next").addEventListener("click", () => { if (runState.offset + runState.limit < runState.total) { runState.offset += runState.limit; loadTick(); } });
  $("scatter-x").addEventListener("change", () => { runState.x = $("scatter-x").value; loadTick(); });
  $("scatter-y").addEventListener("change", () => { runState.y = $("scatter-y").value; loadTick(); });
  loadRows();
  if (body.dataset.tick !== "") await selectPoint(body.dataset.tick);
  else await selectTick(lastTick());
}

// selectPoint selects the tick a point names as typed (a tick, head~10,
// 10:00, -1m, a token: the server's one parser resolves it); a point that
// names no tick leaves the selection as it was and says why.
async function selectPoint(text) {
  text = text.trim();
  if (/^\d+$/.test(text)) return selectTick(Number(text));
  try {
    const res = await api(`/api/w/${encodeURIComponent(world)}/point`, { run, at: text });
    await selectTick(res.tick);
  } catch (e) {
    if (runState.tick != null) $("tick-input").value = runState.tick;
    else await selectTick(lastTick());
    status(e.message, true);
  }
}

function chooseTable(t) {
  runState.table = t;
  runState.order = "";
  runState.desc = false;
  runState.offset = 0;
  setAxes();
  loadTick();
}

// scatterAxes picks a table's scatter plot columns among its numeric ones
// (not tick): a pair NAME_x and NAME_y (position_x and position_y first),
// else x and y, else the first two that are not entity_id.
function scatterAxes(cols) {
  const numeric = cols.filter((c) => /INT|DOUBLE|FLOAT|DECIMAL|REAL/.test(c.type) && c.name !== "tick").map((c) => c.name);
  const has = (n) => numeric.includes(n);
  const pairs = ["position_x", ...numeric.filter((n) => n.endsWith("_x"))].filter((n) => has(n) && has(n.slice(0, -2) + "_y"));
  if (pairs.length) return { numeric, x: pairs[0], y: pairs[0].slice(0, -2) + "_y" };
  if (has("x") && has("y")) return { numeric, x: "x", y: "y" };
  const rest = numeric.filter((n) => n !== "entity_id");
  return rest.length >= 2 ? { numeric, x: rest[0], y: rest[1] } : { numeric, x: "", y: "" };
}

// setAxes sets the scatter plot's columns for the table shown.
function setAxes() {
  const { numeric, x, y } = scatterAxes(runState.columns[runState.table] || []);
  runState.x = x;
  runState.y = y;
  for (const [id, v] of [["scatter-x", x], ["scatter-y", y]]) {
    const s = $(id);
    s.replaceChildren(...numeric.map((n) => el("option", { value: n }, n)));
    s.value = v;
  }
  for (const b of $("table-tabs").children) b.classList.toggle("here", b.dataset.table === runState.table);
}

// The visible ticks are spans of consecutive numbers, [first, last].
function firstTick() { return runState.spans[0][0]; }
function lastTick() { return runState.spans[runState.spans.length - 1][1]; }

// nearestTick returns the visible tick at or after t (else the last).
function nearestTick(t) {
  const spans = runState.spans;
  let lo = 0, hi = spans.length - 1;
  while (lo < hi) { const m = (lo + hi) >> 1; if (spans[m][1] < t) lo = m + 1; else hi = m; }
  return Math.min(Math.max(t, spans[lo][0]), spans[lo][1]);
}

// prevTick returns the visible tick at or before t (else the first).
function prevTick(t) {
  const spans = runState.spans;
  let lo = 0, hi = spans.length - 1;
  while (lo < hi) { const m = (lo + hi + 1) >> 1; if (spans[m][0] > t) hi = m - 1; else lo = m; }
  return Math.min(Math.max(t, spans[lo][0]), spans[lo][1]);
}

function step(d) {
  const t = runState.tick;
  return selectTick(d > 0 ? nearestTick(Math.min(t + 1, lastTick())) : prevTick(t - 1));
}

async function play() {
  const b = $("play");
  if (runState.playing) { runState.playing = false; return; }
  runState.playing = true;
  b.textContent = "stop";
  while (runState.playing && runState.tick < lastTick()) await step(1);
  runState.playing = false;
  b.textContent = "play";
}

async function selectTick(t) {
  t = nearestTick(t);
  runState.tick = t;
  $("scrubber").value = t;
  $("tick-input").value = t;
  $("tick-label").textContent = t;
  const u = new URL(location.href);
  u.searchParams.set("tick", t);
  history.replaceState(null, "", u);
  for (const c of Object.values(runState.charts)) c.redraw(false);
  await loadTick();
}

// loadTick asks for the selected tick's page of rows and its points; a
// newer request aborts the one in flight, which cancels its query.
async function loadTick() {
  if (runState.ctl) runState.ctl.abort();
  const ctl = (runState.ctl = new AbortController());
  const t = runState.tick;
  status(`tick ${t}…`);
  let res;
  try {
    res = await api(`/api/w/${encodeURIComponent(world)}/tick`, {
      run, tick: t, table: runState.table, order: runState.order, desc: runState.desc ? "1" : "", limit: runState.limit, offset: runState.offset,
      x: runState.x, y: runState.y, id: runState.x && hasColumn(runState.table, "entity_id") ? "entity_id" : "",
    }, ctl.signal);
  } catch (e) {
    if (e.name === "AbortError") return;
    status(e.message, true);
    return;
  }
  if (ctl !== runState.ctl) return;
  runState.total = res.total;
  runState.tickMs = res.published_unix_ms;
  $("tick-time").replaceChildren(res.published_unix_ms ? timeEl(res.published_unix_ms, "published ") : "");
  if (runState.charts.ticks) runState.charts.ticks.redraw(false);
  ui.tick = res;
  renderTable($("tick-rows"), res.page, { order: runState.order, desc: runState.desc, onSort: sortBy, entity: { world, run, table: res.table, tick: t } });
  const last = Math.min(res.offset + res.page.rows.length, res.total);
  $("page-info").textContent = res.total ? `rows ${fmtInt(res.offset + 1)}–${fmtInt(last)} of ${fmtInt(res.total)}` : "no rows";
  $("tick-sql").href = worldPath(world, "/sql?run=" + encodeURIComponent(run) + "&q=" + encodeURIComponent(res.page.sql));
  drawScatter(res.points);
  status(`tick ${fmtInt(t)}: ${fmtInt(res.total)} rows of ${res.table}`);
  body.dataset.shownTick = String(t);
  body.dataset.ready = "1";
}

function sortBy(col) {
  if (runState.order === col) runState.desc = !runState.desc;
  else { runState.order = col; runState.desc = false; }
  runState.offset = 0;
  loadTick();
}

function hasColumn(table, col) { return (runState.columns[table] || []).some((c) => c.name === col); }

function drawScatter(points) {
  const div = $("scatter");
  if (!points) { div.replaceChildren(el("p", { class: "note" }, "no two numeric columns to plot")); ui.scatter = null; return; }
  const pts = points.rows.filter((r) => isNum(r[0]) && isNum(r[1])).map((r) => [Number(r[0]), Number(r[1]), r[2]]);
  pts.sort((a, b) => a[0] - b[0]);
  const data = [pts.map((p) => p[0]), pts.map((p) => p[1])];
  ui.scatter = { columns: points.columns.slice(0, 2), data };
  runState.pointIds = points.columns.length > 2 ? pts.map((p) => p[2]) : null;
  let u = runState.charts.scatter;
  if (u && u.series[1].label === points.columns[1] && u.__x === points.columns[0]) { u.setData(data); return; }
  if (u) u.destroy();
  u = new uPlot({
    width: Math.min(chartWidth(div), 520), height: 420, mode: 1,
    scales: { x: { time: false } },
    axes: [{ label: points.columns[0] }, { label: points.columns[1] }],
    series: [{ label: points.columns[0] }, { label: points.columns[1], stroke: palette[0], fill: palette[0], paths: () => null, points: { show: true, size: 4, fill: palette[0] } }],
    legend: { show: false },
  }, data, div);
  u.__x = points.columns[0];
  // A click on a point opens that entity's history.
  u.over.title = "click a point to follow its entity";
  u.over.addEventListener("click", () => {
    const i = nearestPoint(u);
    if (i != null && runState.pointIds) location.href = entityPath(world, run, runState.table, runState.pointIds[i], runState.tick);
  });
  runState.charts.scatter = u;
}

// wallClock sets up the chart of ticks over wall-clock time: secondary to
// the rows chart, it is open (and small) only when the run took a minute
// or more; otherwise it is collapsed, saying how long the run took, and
// drawn when opened.
function wallClock(tl) {
  const ts = tl.published.filter((t) => t[1] > 0);
  const box = $("wallclock-box");
  if (ts.length === 0) { $("wallclock-info").textContent = "(no publish times recorded)"; return; }
  const first = Math.min(...ts.map((t) => t[1])), last = Math.max(...ts.map((t) => t[1]));
  const took = last - first;
  $("wallclock-info").textContent = `(the run's ticks were published over ${fmtDuration(took)}, ${fmtTime(first)} to ${fmtTime(last)})`;
  box.open = took >= 60_000;
  body.dataset.wallclock = box.open ? "open" : "collapsed";
  const draw = () => { if (box.open && !runState.charts.ticks) drawTicksChart(tl); };
  box.addEventListener("toggle", draw);
  draw();
}

function fmtDuration(ms) {
  if (ms < 1000) return `${fmtInt(ms)} ms`;
  if (ms < 120_000) return `${fmtNum(ms / 1000)} s`;
  if (ms < 7_200_000) return `${fmtNum(Math.round(ms / 6000) / 10)} min`;
  return `${fmtNum(Math.round(ms / 360_000) / 10)} h`;
}

// nearestPoint is the index of the scatter point nearest the cursor
// (within 12 px), or null.
function nearestPoint(u) {
  const { left, top } = u.cursor;
  if (left == null || left < 0) return null;
  let best = null, bd = 144;
  const xs = u.data[0], ys = u.data[1];
  for (let i = 0; i < xs.length; i++) {
    if (ys[i] == null) continue;
    const dx = u.valToPos(xs[i], "x") - left, dy = u.valToPos(ys[i], "y") - top;
    if (dx * dx + dy * dy < bd) { bd = dx * dx + dy * dy; best = i; }
  }
  return best;
}

// drawTicksChart: each tick at the wall-clock time it was published, the
// commit events as marks on the same axis, the selected tick as a line.
function drawTicksChart(tl) {
  const ts = tl.published.filter((t) => t[1] > 0).sort((a, b) => a[1] - b[1]);
  const div = $("ticks-chart");
  const data = [ts.map((t) => t[1] / 1000), ts.map((t) => t[0])];

  const kindColor = (k) => k.startsWith("claim") ? "#2ca02c" : k === "fragments.rewrite" ? "#9467bd" : k === "fence.acquire" ? "#d62728" : "#7f7f7f";
  const u = new uPlot({
    title: "ticks over wall-clock time (drag to zoom, double-click to reset; marks at the top: commit events)",
    width: chartWidth(div), height: 160,
    scales: { x: { time: true } },
    series: [{}, { label: "tick", stroke: palette[0], width: 1.5, points: { show: ts.length < 200 } }],
    axes: [{}, { label: "tick" }],
    hooks: {
      draw: [(u) => {
        const ctx = u.ctx;
        ctx.save();
        for (const e of tl.events) {
          if (!e.unix_ms) continue;
          const x = u.valToPos(e.unix_ms / 1000, "x", true);
          if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
          ctx.strokeStyle = kindColor(e.kind);
          ctx.lineWidth = 1;
          ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + 10 * devicePixelRatio); ctx.stroke();
        }
        // Tags: a flag at the publish time of the tick each names (the
        // nearest sampled tick at or before it), labelled with its name.
        for (const tg of tl.tags || []) {
          let at = null;
          for (const t of ts) if (t[0] <= tg.tick && (at === null || t[0] > at[0])) at = t;
          if (!at) continue;
          const x = u.valToPos(at[1] / 1000, "x", true);
          if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
          ctx.strokeStyle = "#1f77b4"; ctx.fillStyle = "#1f77b4"; ctx.lineWidth = 1;
          const y = u.bbox.top + u.bbox.height;
          ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x, y - 14 * devicePixelRatio); ctx.stroke();
          ctx.font = `${10 * devicePixelRatio}px sans-serif`;
          ctx.fillText(tg.name, x + 2 * devicePixelRatio, y - 6 * devicePixelRatio);
        }
        if (runState.tickMs) {
          const x = u.valToPos(runState.tickMs / 1000, "x", true);
          ctx.strokeStyle = "#ff7f0e"; ctx.lineWidth = 2;
          ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
        }
        ctx.restore();
      }],
    },
  }, data, div);
  u.over.addEventListener("click", () => {
    if (u.cursor.idx != null) selectTick(data[1][u.cursor.idx]);
  });
  runState.charts.ticks = u;
}

// The rows chart: rows per table per tick, binned by the server for the
// range it shows (each bin's last value as the line, its min and max as a
// band); a zoom asks again for the zoomed range, down to every tick, and
// a double-click for the whole run.
const rowsState = { ctl: null, res: null, timer: null, reset: false };

async function loadRows(from, to) {
  if (rowsState.ctl) rowsState.ctl.abort();
  const ctl = (rowsState.ctl = new AbortController());
  const bins = Math.min(2000, Math.max(200, Math.round(chartWidth($("rows-chart")))));
  let res;
  try {
    res = await api(`/api/w/${encodeURIComponent(world)}/counts`, { run, from, to, bins }, ctl.signal);
  } catch (e) {
    if (e.name !== "AbortError") status("rows per tick: " + e.message, true);
    return;
  }
  if (ctl !== rowsState.ctl) return;
  drawRowsChart(res);
}

// drawBands fills each table's min-to-max band behind its line.
function drawBands(u, res) {
  const ctx = u.ctx;
  ctx.save();
  ctx.beginPath(); ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height); ctx.clip();
  res.tables.forEach((t, i) => {
    ctx.fillStyle = palette[i % palette.length] + "2a";
    const xs = res.x.map((x) => u.valToPos(x, "x", true));
    let open = false;
    const flush = (from, to) => {
      if (to < from) return;
      ctx.beginPath();
      for (let k = from; k <= to; k++) ctx.lineTo(xs[k], u.valToPos(t.max[k], "y", true));
      for (let k = to; k >= from; k--) ctx.lineTo(xs[k], u.valToPos(t.min[k], "y", true));
      ctx.closePath(); ctx.fill();
    };
    let start = 0;
    for (let k = 0; k <= res.x.length; k++) {
      const has = k < res.x.length && t.min[k] != null;
      if (has && !open) { start = k; open = true; }
      if (!has && open) { flush(start, k - 1); open = false; }
    }
  });
  ctx.restore();
}

// timelineMarks are what the timeline marks on the tick axis: where the
// run's lineage forks (each ancestor's last tick), the world's
// compactions (the ticks each rewrote) and its tags.
function timelineMarks(tl) {
  const marks = [];
  tl.lineage.forEach((seg, i) => {
    if (seg.up_to == null) return;
    const next = tl.lineage[i + 1];
    marks.push({ kind: "fork", tick: seg.up_to, label: `${next.world} forks from ${seg.world} (run ${seg.run}) after tick ${fmtInt(seg.up_to)}` });
  });
  for (const e of tl.events) {
    if (e.kind === "fragments.rewrite" && e.tick != null) marks.push({ kind: "compaction", from: e.from ?? e.tick, tick: e.tick, label: `compaction: ${e.detail}` });
  }
  for (const t of tl.tags || []) marks.push({ kind: "tag", tick: t.tick, label: `tag ${t.name}` });
  return marks;
}

// showMarks lists the timeline's marks above the rows chart and draws
// them on it.
function showMarks(tl) {
  runState.marks = timelineMarks(tl);
  ui.marks = runState.marks;
  $("timeline-marks").replaceChildren(...runState.marks.filter((m) => m.kind !== "compaction").map((m) =>
    el("span", { class: "mark " + m.kind, "data-kind": m.kind, "data-tick": m.tick }, m.label)));
  const compactions = runState.marks.filter((m) => m.kind === "compaction").length;
  if (compactions) $("timeline-marks").append(el("span", { class: "mark compaction", "data-kind": "compaction" }, `${compactions} compaction${compactions > 1 ? "s" : ""} (bars under the ticks each rewrote)`));
  if (runState.charts.rows) runState.charts.rows.redraw(false);
}

const markColor = { fork: "#d62728", compaction: "#9467bd", tag: "#2ca02c" };

// drawMarks draws the timeline's marks on a chart whose x is ticks: a
// fork as a dashed line, a compaction as a bar under the ticks it
// rewrote, a tag as a flag.
function drawMarks(u) {
  const ctx = u.ctx, top = u.bbox.top, bottom = u.bbox.top + u.bbox.height, dpr = devicePixelRatio;
  const left = u.bbox.left, right = u.bbox.left + u.bbox.width;
  ctx.save();
  ctx.font = `${11 * dpr}px system-ui, sans-serif`;
  for (const m of runState.marks || []) {
    const x = u.valToPos(m.tick, "x", true);
    ctx.strokeStyle = ctx.fillStyle = markColor[m.kind];
    if (m.kind === "compaction") {
      const x0 = Math.max(left, u.valToPos(m.from - 0.5, "x", true)), x1 = Math.min(right, u.valToPos(m.tick + 0.5, "x", true));
      if (x1 < left || x0 > right) continue;
      ctx.globalAlpha = 0.5;
      ctx.fillRect(x0, bottom - 6 * dpr, Math.max(x1 - x0, 2 * dpr), 6 * dpr);
      ctx.globalAlpha = 1;
      continue;
    }
    if (x < left || x > right) continue;
    ctx.lineWidth = 1.5 * dpr;
    ctx.setLineDash(m.kind === "fork" ? [5 * dpr, 4 * dpr] : []);
    ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, bottom); ctx.stroke();
    ctx.setLineDash([]);
    const text = m.kind === "fork" ? "fork" : m.label;
    const w = ctx.measureText(text).width;
    ctx.fillText(text, x + 3 * dpr + w > right ? x - 3 * dpr - w : x + 3 * dpr, top + 12 * dpr);
  }
  ctx.restore();
}

function drawRowsChart(res) {
  ui.counts = res;
  rowsState.res = res;
  const div = $("rows-chart");
  // One line per table (each bin's last value); a bin's min to max is a
  // band drawn behind it, not a series of its own.
  const data = [res.x];
  const series = [{ label: "tick", value: (u, v) => (v == null ? "–" : fmtInt(v)) }];
  res.tables.forEach((t, i) => {
    data.push(t.last);
    series.push({ label: t.table, stroke: palette[i % palette.length], width: 1.5, points: { show: res.x.length < 200 },
      value: (u, v) => (v == null ? "–" : fmtInt(v)) });
  });
  const title = `rows per table per tick, ${res.width === 1 ? "every tick" : fmtInt(res.width) + " ticks a bin (line: the bin's last tick; band: its min to max)"}` +
    " — drag to zoom, double-click for the whole run, click to select a tick";
  if (runState.charts.rows) runState.charts.rows.destroy();
  clearTimeout(rowsState.timer);
  rowsState.reset = false;
  // The x scale is the range asked; a zoom (drag) sets another, which is
  // asked of the server.
  const xmin = res.from, xmax = Math.max(res.to, res.from + 1);
  const u = new uPlot({
    title, width: chartWidth(div), height: 240,
    scales: { x: { time: false, auto: false, min: xmin, max: xmax } },
    series,
    axes: [{ label: "tick", values: (u, vals) => vals.map(fmtInt) }, { label: "rows", values: (u, vals) => vals.map(fmtInt) }],
    hooks: {
      drawAxes: [(u) => { if (res.width > 1) drawBands(u, res); }], // after the grid, under every line
      draw: [(u) => {
        drawMarks(u);
        if (runState.tick == null) return;
        const x = u.valToPos(runState.tick, "x", true);
        const ctx = u.ctx;
        ctx.save(); ctx.strokeStyle = "#ff7f0e"; ctx.lineWidth = 2;
        ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
        ctx.restore();
      }],
      setScale: [(u, key) => {
        if (key !== "x" || rowsState.reset) return;
        const { min, max } = u.scales.x;
        if (min === xmin && max === xmax) return;
        const from = Math.ceil(min), to = Math.max(Math.ceil(min), Math.floor(max));
        clearTimeout(rowsState.timer);
        rowsState.timer = setTimeout(() => loadRows(from, to), 50);
      }],
    },
  }, data, div);
  u.over.addEventListener("click", () => { if (u.cursor.idx != null) selectTick(nearestTick(data[0][u.cursor.idx])); });
  u.over.addEventListener("dblclick", () => { rowsState.reset = true; clearTimeout(rowsState.timer); loadRows(); });
  runState.charts.rows = u;
  body.dataset.rowsFrom = String(res.from);
  body.dataset.rowsTo = String(res.to);
  body.dataset.rowsWidth = String(res.width);
}

// eventGroup is what an event of the log is about: the writer (world
// creation, fences, status), claims, commands, compactions, tags, or
// maintenance (intents that protect work in flight from collection).
function eventGroup(kind) {
  if (kind.startsWith("intent.")) return "maintenance";
  if (kind.startsWith("claim.")) return "claim";
  if (kind.startsWith("tag.")) return "tag";
  if (kind === "fragments.rewrite") return "compaction";
  if (kind === "command.enqueue") return "command";
  return "writer";
}

// drawEvents lists the commit events read so far, newest first; older
// ones are asked for page by page (the server reads the log backward).
function drawEvents(tl) {
  // What the count counts: the entries read of this world's own log, the
  // events among them by group, and the rest (tick publications).
  const groups = {};
  for (const e of tl.events) groups[eventGroup(e.kind)] = (groups[eventGroup(e.kind)] || 0) + 1;
  const read = tl.log_to >= tl.log_from ? tl.log_to - tl.log_from + 1 : 0;
  const order = ["writer", "claim", "command", "compaction", "tag", "maintenance"];
  const parts = order.filter((g) => groups[g]).map((g) => `${fmtInt(groups[g])} ${g}`);
  $("events-summary").textContent = `commit events: ${fmtInt(tl.events.length)}${parts.length ? " (" + parts.join(", ") + ")" : ""} ` +
    `among ${fmtInt(read)} entries of ${world}'s log ${tl.log_from > 1 ? `(seq ${fmtInt(tl.log_from)}–${fmtInt(tl.log_to)}; older ones not read yet)` : "(the whole log)"}; ` +
    `the other ${fmtInt(read - tl.events.length)} publish ticks`;
  body.dataset.events = String(tl.events.length);
  body.dataset.logEntries = String(read);
  body.dataset.logFrom = String(tl.log_from);
  const older = $("older-events");
  older.hidden = !(tl.log_from > 1);
  older.onclick = async () => {
    older.disabled = true;
    try {
      const p = await api(`/api/w/${encodeURIComponent(world)}/events`, { before: tl.log_from });
      tl.events = p.events.concat(tl.events);
      tl.log_from = p.log_from;
      drawEvents(tl);
      showMarks(tl);
      if (runState.charts.ticks) runState.charts.ticks.redraw(false);
    } catch (e) {
      status("older events: " + e.message, true);
    } finally {
      older.disabled = false;
    }
  };
  const tbody = $("events").tBodies[0];
  tbody.replaceChildren();
  for (const e of tl.events.slice(-1000).reverse()) {
    const tick = e.tick != null ? el("a", { href: "#", onclick: (ev) => { ev.preventDefault(); selectTick(e.tick); } }, e.tick) : "";
    const g = eventGroup(e.kind);
    tbody.append(el("tr", { class: "event " + g, "data-group": g }, el("td", { class: "num" }, fmtInt(e.seq)), el("td", {}, timeEl(e.unix_ms, e.approx ? "≈ " : "")),
      el("td", {}, g), el("td", {}, e.kind),
      el("td", {}, e.run || ""), el("td", {}, tick), el("td", {}, e.claim || ""), el("td", {}, e.detail || "")));
  }
}

// ---------- SQL ----------

const sqlState = { ctl: null, res: null, chart: null, runs: 0 };
ui.sql = sqlState;

function sqlPage() {
  const form = $("query-form");
  form.addEventListener("submit", (e) => { e.preventDefault(); runQuery(); });
  $("query").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); runQuery(); } });
  $("cancel-query").addEventListener("click", () => { if (sqlState.ctl) sqlState.ctl.abort(); });
  for (const id of ["chart-x", "chart-split", "chart-kind"]) $(id).addEventListener("change", () => { saveURL(); drawQueryChart(); });
  const p = new URL(location.href).searchParams;
  if (p.get("kind")) $("chart-kind").value = p.get("kind");
  sqlState.wantX = p.get("x");
  sqlState.wantY = p.getAll("y");
  sqlState.wantSplit = p.get("split");
  const schema = loadSchema();
  if ($("query").value.trim() !== "") runQuery();
  else schema.finally(() => { body.dataset.ready = "1"; });
}

// loadSchema lists the views with their columns and types, and the
// macros with their parameters; a click inserts a name at the cursor.
async function loadSchema() {
  let res;
  try {
    res = await api(`/api/w/${encodeURIComponent(world)}/schema`, { run });
  } catch (e) {
    $("schema-views").replaceChildren(el("p", { class: "error" }, e.message));
    return;
  }
  ui.schema = res;
  const views = new Map();
  const macros = [];
  for (const [kind, name, detail, type] of res.rows) {
    if (kind === "view") { if (!views.has(name)) views.set(name, []); views.get(name).push([detail, type]); }
    else macros.push([name, detail, type]);
  }
  const ins = (text, label, cls, type) => el("span", { class: cls, "data-insert": text, title: `insert ${text}`, onclick: () => insertText(text) },
    label, type ? el("span", { class: "type" }, type) : "");
  $("schema-views").replaceChildren(...[...views].map(([name, cols]) => {
    const d = el("details", { "data-view": name }, el("summary", {}, el("button", { class: "ins", type: "button", onclick: (e) => { e.preventDefault(); insertText(quoteName(name)); } }, name),
      el("span", { class: "type" }, ` ${cols.length} columns`)));
    for (const [c, type] of cols) d.append(ins(quoteName(c), c, "col", type));
    return d;
  }));
  $("schema-macros").replaceChildren(...macros.map(([name, params, type]) =>
    ins(`${name}(${params})`, `${name}(${params})`, "macro", type === "table_macro" ? "table" : "")));
}

// quoteName quotes a name for SQL when it is not a plain lower-case one.
function quoteName(n) { return /^[a-z_][a-z0-9_]*$/.test(n) ? n : '"' + n.replaceAll('"', '""') + '"'; }

// insertText puts text at the query box's cursor.
function insertText(text) {
  const q = $("query");
  const a = q.selectionStart ?? q.value.length, b = q.selectionEnd ?? a;
  q.value = q.value.slice(0, a) + text + q.value.slice(b);
  q.focus();
  q.selectionStart = q.selectionEnd = a + text.length;
}

function saveURL() {
  const u = new URL(location.href);
  u.searchParams.set("q", $("query").value);
  u.searchParams.set("run", run);
  u.searchParams.delete("y");
  if (sqlState.res) {
    u.searchParams.set("x", $("chart-x").value);
    for (const y of chosenYs()) u.searchParams.append("y", y);
    u.searchParams.set("split", $("chart-split").value);
    u.searchParams.set("kind", $("chart-kind").value);
  }
  history.replaceState(null, "", u);
}

async function runQuery() {
  const q = $("query").value;
  if (sqlState.ctl) sqlState.ctl.abort();
  const ctl = (sqlState.ctl = new AbortController());
  $("cancel-query").disabled = false;
  $("run-query").disabled = true;
  $("query-error").hidden = true;
  $("downloads").hidden = true;
  saveURL();
  const t0 = performance.now();
  $("query-info").textContent = "running…";
  try {
    const res = await api(`/api/w/${encodeURIComponent(world)}/query`, { run, q }, ctl.signal);
    sqlState.res = res;
    renderTable($("query-result"), res, { max: 2000 });
    // The query's time: the server's, and the whole round trip.
    $("query-info").textContent = `${fmtInt(res.rows.length)} rows${res.truncated ? " (truncated: download the whole result)" : ""} · ` +
      `query ${fmtNum(res.elapsed_ms || 0)} ms on the server, ${fmtInt(Math.round(performance.now() - t0))} ms in all` + (res.notes ? " · " + res.notes : "");
    body.dataset.elapsedMs = String(res.elapsed_ms);
    const dl = (format) => `/api/w/${encodeURIComponent(world)}/download?` + new URLSearchParams({ run, q, format });
    $("download-csv").href = dl("csv");
    $("download-parquet").href = dl("parquet");
    $("downloads").hidden = false;
    chartChoices(res);
    drawQueryChart();
    saveURL();
  } catch (e) {
    sqlState.res = null;
    if (e.name === "AbortError") {
      $("query-info").textContent = "cancelled";
    } else {
      $("query-info").textContent = "";
      $("query-error").textContent = e.message;
      $("query-error").hidden = false;
    }
  } finally {
    if (ctl === sqlState.ctl) { $("cancel-query").disabled = true; $("run-query").disabled = false; sqlState.ctl = null; }
    sqlState.runs++;
    body.dataset.queries = String(sqlState.runs);
    body.dataset.ready = "1";
  }
}

function chosenYs() { return [...$("chart-ys").querySelectorAll("input:checked")].map((i) => i.value); }

// chartChoices offers the result's columns: x any, y any numeric ones
// (several), and a column whose values each get a series of their own.
function chartChoices(res) {
  const nums = numericCols(res).map((i) => res.columns[i]);
  $("chart-box").hidden = res.columns.length < 2 || nums.length === 0;
  const x = res.columns.includes(sqlState.wantX) ? sqlState.wantX : res.columns[0];
  $("chart-x").replaceChildren(...res.columns.map((c) => el("option", { value: c }, c)));
  $("chart-x").value = x;
  const want = (sqlState.wantY || []).filter((y) => nums.includes(y));
  const ys = want.length ? want : [nums.find((c) => c !== x) || nums[0]];
  $("chart-ys").replaceChildren(...nums.map((c) => {
    const box = el("input", { type: "checkbox", value: c, onchange: () => { saveURL(); drawQueryChart(); } });
    box.checked = ys.includes(c);
    return el("label", {}, box, " " + c);
  }));
  $("chart-split").replaceChildren(el("option", { value: "" }, "(none)"), ...res.columns.map((c) => el("option", { value: c }, c)));
  $("chart-split").value = res.columns.includes(sqlState.wantSplit) ? sqlState.wantSplit : "";
  sqlState.wantX = sqlState.wantY = sqlState.wantSplit = null;
}

// drawQueryChart: a line or bar chart of result columns against x: each
// chosen y a series, or, split by a column, each y for each of its
// values a series. An x column that is not numeric becomes the x axis's
// categories.
function drawQueryChart() {
  const res = sqlState.res;
  const div = $("query-chart");
  if (sqlState.chart) { sqlState.chart.destroy(); sqlState.chart = null; }
  if (!res || $("chart-box").hidden) return;
  const xc = $("chart-x").value, xi = res.columns.indexOf(xc);
  const ys = chosenYs();
  const split = $("chart-split").value, si = split ? res.columns.indexOf(split) : -1;
  if (ys.length === 0) { ui.chart = null; return; }
  const numX = res.rows.every((r) => isNum(r[xi]));
  // The x values, in order: numbers ascending, else as they come.
  const keys = [];
  const seen = new Map();
  for (const r of res.rows) if (!seen.has(r[xi])) { seen.set(r[xi], keys.length); keys.push(r[xi]); }
  if (numX) keys.sort((a, b) => Number(a) - Number(b));
  const at = new Map(keys.map((k, i) => [k, i]));
  const groups = si < 0 ? [null] : [...new Set(res.rows.map((r) => r[si]))];
  const series = [{ label: xc, value: (u, v) => (v == null ? "–" : numX ? fmtNum(v) : keys[v]) }];
  const data = [keys.map((k, i) => (numX ? Number(k) : i))];
  const bar = $("chart-kind").value === "bar";
  let n = 0;
  for (const g of groups) {
    for (const y of ys) {
      const yi = res.columns.indexOf(y);
      const col = new Array(keys.length).fill(null);
      for (const r of res.rows) if ((g === null || r[si] === g) && isNum(r[yi])) col[at.get(r[xi])] = Number(r[yi]);
      const c = palette[n++ % palette.length];
      const label = g === null ? y : ys.length > 1 ? `${y} (${split}=${g})` : `${split}=${g}`;
      series.push({ label, stroke: c, fill: bar ? c + "99" : undefined, width: 1.5, spanGaps: true,
        paths: bar ? uPlot.paths.bars({ size: [0.7 / Math.max(1, groups.length * ys.length), 60] }) : undefined,
        points: { show: !bar && keys.length < 100 }, value: (u, v) => (v == null ? "–" : fmtNum(v)) });
      data.push(col);
    }
  }
  ui.chart = { x: xc, ys, split, kind: bar ? "bar" : "line", labels: series.slice(1).map((s) => s.label), data };
  sqlState.chart = new uPlot({
    width: chartWidth(div), height: 300,
    scales: { x: { time: false } },
    series,
    axes: [{ label: xc, values: numX ? (u, vals) => vals.map(fmtNum) : (u, vals) => vals.map((v) => (Number.isInteger(v) ? keys[v] ?? "" : "")) },
      { label: ys.join(", "), values: (u, vals) => vals.map(fmtNum) }],
  }, data, div);
}

// ---------- facts and receipts ----------

async function factsPage() {
  status("loading…");
  const f = await api(`/api/w/${encodeURIComponent(world)}/facts`, { run });
  ui.facts = f;
  const tickLink = (w, r, t) => el("a", { href: worldPath(w, "?run=" + encodeURIComponent(r) + "&tick=" + encodeURIComponent(t)), class: "tick-link" }, "tick " + t);
  renderTable($("receipts"), f.receipts, {
    extra: { header: "graded snapshot", cell: (row, cols) => {
      const g = (n) => row[cols.indexOf(n)];
      return g("graded_tick") === "NULL" ? "" : tickLink(g("subject_world"), g("subject_run"), g("graded_tick"));
    } },
  });
  renderTable($("facts"), f.facts, { extra: { header: "at", cell: (row, cols) => tickLink(world, run, row[cols.indexOf("tick")]) } });
  status(`${f.facts.rows.length} facts, ${f.receipts.rows.length} receipts`);
  body.dataset.ready = "1";
}

// ---------- compare ----------

const cmp = { table: "", offset: 0, limit: 50, x: "", y: "", columns: {}, ctl: null, chart: null };
ui.compare = cmp;

// comparePage: two ticks of this run, or this world against another (a
// fork against its parent by default when asked), through <table>_diff
// and worldfs_diff; the URL holds the sides.
async function comparePage() {
  const p = new URL(location.href).searchParams;
  const [ws, tl, cols] = await Promise.all([api("/api/worlds"), api(`/api/w/${encodeURIComponent(world)}/timeline`, { run }),
    api(`/api/w/${encodeURIComponent(world)}/tables`, { run })]);
  for (const [t, c, type] of cols.rows) (cmp.columns[t] = cmp.columns[t] || []).push({ name: c, type });
  const me = ws.find((w) => w.id === world);
  if (tl.ticks === 0) { status("this run has no visible tick"); body.dataset.ready = "1"; return; }
  const first = tl.spans[0][0], head = tl.spans[tl.spans.length - 1][1];
  const vs = $("vs-world");
  for (const w of ws) vs.append(el("option", { value: w.id }, w.id + (me && w.id === me.parent ? " (parent)" : "")));
  vs.value = p.get("vs") || world;
  $("tick-a").value = p.get("a") || Math.max(first, head - 1);
  $("tick-b").value = p.get("b") || head;
  cmp.vsrun = p.get("vsrun") || "";
  if (me && me.parent) {
    // The parent → this fork at the newest tick both have, as worldfs
    // diff PARENT@T FORK@T: inserted means only in the fork.
    const parent = ws.find((w) => w.id === me.parent);
    const run0 = parent && parent.runs.find((r) => r.name === me.fork_run);
    const t = Math.min(head, run0 ? run0.head_tick : head);
    const a = $("vs-parent");
    a.hidden = false;
    a.href = worldPath(me.parent, `/compare?run=${encodeURIComponent(me.fork_run)}&a=${t}&vs=${encodeURIComponent(world)}&vsrun=${encodeURIComponent(run)}&b=${t}`);
  }
  $("swap").addEventListener("click", () => {
    const bw = $("vs-world").value, brun = bw === world ? run : cmp.vsrun || run;
    const q = new URLSearchParams({ run: brun, a: $("tick-b").value, vs: world, vsrun: run, b: $("tick-a").value, table: cmp.table });
    location.href = worldPath(bw, "/compare?" + q);
  });
  const tables = tl.views.slice();
  cmp.table = p.get("table") || (tables.includes("particle") ? "particle" : tables[0] || "");
  for (const t of tables) $("table-tabs").append(el("button", { "data-table": t, onclick: () => { cmp.table = t; cmp.offset = 0; axes(); loadCompare(); } }, t));
  axes();
  $("compare-form").addEventListener("submit", (e) => { e.preventDefault(); cmp.offset = 0; if ($("vs-world").value === world) cmp.vsrun = ""; loadCompare(); });
  $("page-prev").addEventListener("click", () => { cmp.offset = Math.max(0, cmp.offset - cmp.limit); loadCompare(); });
  $("page-next").addEventListener("click", () => { if (cmp.offset + cmp.limit < cmp.changed) { cmp.offset += cmp.limit; loadCompare(); } });
  $("scatter-x").addEventListener("change", () => { cmp.x = $("scatter-x").value; loadCompare(); });
  $("scatter-y").addEventListener("change", () => { cmp.y = $("scatter-y").value; loadCompare(); });
  await loadCompare();
}

function axes() {
  const { numeric, x, y } = scatterAxes(cmp.columns[cmp.table] || []);
  [cmp.x, cmp.y] = [x, y];
  for (const [id, v] of [["scatter-x", cmp.x], ["scatter-y", cmp.y]]) {
    $(id).replaceChildren(...numeric.map((n) => el("option", { value: n }, n)));
    $(id).value = v;
  }
  for (const b of $("table-tabs").children) b.classList.toggle("here", b.dataset.table === cmp.table);
}

async function loadCompare() {
  if (cmp.ctl) cmp.ctl.abort();
  const ctl = (cmp.ctl = new AbortController());
  const params = { run, a: $("tick-a").value, b: $("tick-b").value, vs: $("vs-world").value, vsrun: cmp.vsrun, table: cmp.table,
    limit: cmp.limit, offset: cmp.offset, x: cmp.x, y: cmp.y };
  const u = new URL(location.href);
  for (const k of ["a", "b", "vs", "vsrun", "table"]) { if (params[k]) u.searchParams.set(k, params[k]); else u.searchParams.delete(k); }
  history.replaceState(null, "", u);
  status("comparing…");
  let res;
  try {
    res = await api(`/api/w/${encodeURIComponent(world)}/compare`, params, ctl.signal);
  } catch (e) {
    if (e.name !== "AbortError") { status(e.message, true); body.dataset.ready = "1"; }
    return;
  }
  if (ctl !== cmp.ctl) return;
  ui.comparison = res;
  drawReport(res);
  cmp.changed = res.counts.rows.reduce((n, r) => n + Number(r[1]), 0);
  $("rows-table").textContent = res.table;
  // A row's entity opens its history in the side the row shows: a for a
  // deleted row and an update's preimage, b for the rest.
  const kind = res.rows.columns.indexOf("change_type");
  const historyIn = (s) => ({ world: s.world, run: s.run, table: res.table, tick: s.tick });
  renderTable($("compare-rows"), res.rows, { entity: { of: (row) => historyIn(["delete", "update_preimage"].includes(row[kind]) ? res.a : res.b) } });
  $("page-info").textContent = cmp.changed ? `rows ${fmtInt(res.offset + 1)}–${fmtInt(res.offset + res.rows.rows.length)} of ${fmtInt(cmp.changed)}` : "no changes";
  $("compare-sql").textContent = res.rows.sql;
  drawOverlay(res);
  const side = (s) => `${s.world}@${s.tick}`;
  status(`${side(res.a)} → ${side(res.b)}: ${fmtInt(cmp.changed)} changed rows of ${res.table}`);
  body.dataset.compared = `${side(res.a)} ${side(res.b)}`;
  body.dataset.ready = "1";
}

// drawReport shows worldfs diff's report of a → b: per table its
// entities inserted, deleted, updated and unchanged (a click shows that
// table), and per column of the table shown how many updates changed it
// and the largest change.
function drawReport(res) {
  const r = res.report;
  const side = (p) => `${p.world}@${p.tick}`;
  $("diff-head").textContent = `${side(r.a)} → ${side(r.b)}${r.differ ? "" : ": no differences"}`;
  $("diff-cli").textContent = `worldfs diff ${side(r.a)} ${side(r.b)}`;
  const tables = {
    columns: ["table", "inserted", "deleted", "updated", "unchanged"],
    rows: r.tables.map((t) => [t.table + (t.only_in ? ` (only in ${t.only_in})` : ""), String(t.inserted), String(t.deleted), String(t.updated), String(t.unchanged)]),
  };
  renderTable($("diff-tables"), tables);
  [...$("diff-tables").tBodies[0].rows].forEach((tr, i) => {
    const t = r.tables[i];
    tr.dataset.table = t.table;
    tr.classList.toggle("here", t.table === res.table);
    if (!t.only_in) {
      tr.classList.add("pick");
      tr.addEventListener("click", () => { cmp.table = t.table; cmp.offset = 0; axes(); loadCompare(); });
    }
  });
  const td = r.tables.find((t) => t.table === res.table) || { columns: [] };
  renderTable($("diff-columns"), {
    columns: [`column of ${res.table}`, "changed", "max |change|"],
    rows: (td.columns || []).map((c) => [c.column, String(c.changed), c.max_abs_change == null ? "–" : String(c.max_abs_change)]),
  });
}

// drawOverlay: both sides' points on one plot, a in blue, b in red.
function drawOverlay(res) {
  const div = $("scatter");
  if (cmp.chart) { cmp.chart.destroy(); cmp.chart = null; }
  if (!res.points_a) { div.replaceChildren(el("p", { class: "note" }, "no two numeric columns to plot")); return; }
  const pts = [];
  for (const [k, r] of [[0, res.points_a], [1, res.points_b]]) for (const row of r.rows) if (isNum(row[0]) && isNum(row[1])) pts.push([Number(row[0]), Number(row[1]), k]);
  pts.sort((p, q) => p[0] - q[0]);
  const data = [pts.map((p) => p[0]), pts.map((p) => (p[2] === 0 ? p[1] : null)), pts.map((p) => (p[2] === 1 ? p[1] : null))];
  ui.overlay = data;
  // a as rings, b as dots: where both sides hold a point, the dot sits in the ring.
  const pointSeries = (label, color, size, fill) => ({ label, stroke: color, fill: color, paths: () => null, points: { show: true, size, width: 1.5, fill }, spanGaps: false });
  $("overlay-legend").replaceChildren(el("span", { class: "ring", title: `a: ${res.a.world}@${res.a.tick}` }, `○ a: ${res.a.world}@${fmtInt(res.a.tick)}`),
    el("span", { class: "dot", title: `b: ${res.b.world}@${res.b.tick}` }, `● b: ${res.b.world}@${fmtInt(res.b.tick)}`));
  cmp.chart = new uPlot({
    width: Math.min(chartWidth(div), 520), height: 420, scales: { x: { time: false } }, legend: { show: false },
    axes: [{ label: res.points_a.columns[0] }, { label: res.points_a.columns[1] }],
    series: [{ label: res.points_a.columns[0] }, pointSeries(`${res.a.world}@${res.a.tick}`, palette[0], 8, "#fff0"), pointSeries(`${res.b.world}@${res.b.tick}`, palette[1], 4, palette[1])],
  }, data, div);
}

// ---------- an entity's history ----------

// entityPage: every row of one entity through the run's lineage
// (TrajectorySQL), each numeric column over ticks as a small chart with
// the timeline's marks, and its path on the scatter plot.
async function entityPage() {
  const p = new URL(location.href).searchParams;
  const table = p.get("table") || "", id = p.get("id") || "", sel = p.get("tick");
  $("entity-id").textContent = id;
  $("entity-table").textContent = table;
  status("loading the history…");
  const w = encodeURIComponent(world);
  const [tl, res, cols] = await Promise.all([api(`/api/w/${w}/timeline`, { run }), api(`/api/w/${w}/entity`, { run, table, id }),
    api(`/api/w/${w}/tables`, { run })]);
  ui.timeline = tl;
  ui.trajectory = res;
  for (const [t, c, type] of cols.rows) (runState.columns[t] = runState.columns[t] || []).push({ name: c, type });
  runState.tick = sel != null && sel !== "" ? Number(sel) : null;
  showMarks(tl);
  // The history comes typed (res.values: numbers as JSON numbers, NULL as
  // null); its table shows the first rows as text.
  const vals = res.values || [];
  const ti = res.columns.indexOf("tick");
  const ticks = vals.map((r) => r[ti]);
  const from = tl.lineage.length > 1 ? " · " + tl.lineage.map((seg, i) => (seg.up_to != null ? `ticks to ${fmtInt(seg.up_to)} from ${seg.world}` : i ? `then ${seg.world}'s own` : "")).join(", ") : "";
  $("entity-info").textContent = vals.length ? `${fmtInt(vals.length)} rows, ticks ${fmtInt(ticks[0])}–${fmtInt(ticks[ticks.length - 1])}${from}` +
    (res.truncated ? " (truncated: the server's bound on a result)" : "") :
    res.truncated ? `its first row is larger than the server's bound on a result: query it in SQL` : `no rows of ${table} have entity_id ${id}`;
  $("entity-sql").href = worldPath(world, "/sql?run=" + encodeURIComponent(run) + "&q=" + encodeURIComponent(res.sql));
  const text = (v) => (v === null ? "NULL" : String(v));
  renderTable($("entity-rows"), { columns: res.columns, rows: vals.slice(0, 1000).map((r) => r.map(text)) }, { max: 1000 });
  // Small multiples: each numeric column over ticks.
  const isNumber = (v) => typeof v === "number";
  const numeric = res.columns.map((_, i) => i).filter((i) => i !== ti && res.columns[i] !== "entity_id" &&
    vals.length > 0 && vals.every((r) => r[i] === null || isNumber(r[i])));
  const box = $("entity-charts");
  const width = Math.max(260, Math.floor((box.clientWidth - 32) / 3));
  ui.multiples = {};
  for (const i of numeric) {
    const name = res.columns[i];
    const data = [ticks, vals.map((r) => r[i])];
    ui.multiples[name] = data;
    const div = el("div", { class: "chart", "data-col": name });
    box.append(div);
    new uPlot({
      title: name, width, height: 150, legend: { show: false }, cursor: { points: { show: false } },
      scales: { x: { time: false } },
      series: [{}, { stroke: palette[0], width: 1.5, points: { show: ticks.length < 60 } }],
      axes: [{ values: (u, vals) => vals.map(fmtInt), size: 30 }, { values: (u, vals) => vals.map(fmtNum), size: 56 }],
      hooks: { draw: [(u) => { drawMarks(u); selectedLine(u); }] },
    }, data, div);
  }
  // Its path on the scatter plot, the selected tick as a ring.
  const { numeric: nc, x, y } = scatterAxes(runState.columns[table] || []);
  const fill = (sid, v, on) => { $(sid).replaceChildren(...nc.map((n) => el("option", { value: n }, n))); $(sid).value = v; $(sid).onchange = on; };
  const path = () => drawPath(res.columns, vals, $("scatter-x").value, $("scatter-y").value, ticks);
  fill("scatter-x", x, path);
  fill("scatter-y", y, path);
  if (x) path();
  status(`${fmtInt(vals.length)} rows of entity ${id}`);
  body.dataset.ready = "1";
}

// selectedLine draws the selected tick on a chart over ticks.
function selectedLine(u) {
  if (runState.tick == null) return;
  const x = u.valToPos(runState.tick, "x", true);
  if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) return;
  const ctx = u.ctx;
  ctx.save(); ctx.strokeStyle = "#ff7f0e"; ctx.lineWidth = 2;
  ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
  ctx.restore();
}

// drawPath draws an entity's path through two of its columns (vals: its
// typed rows of columns): its points, joined in tick order, the selected
// tick as a ring.
function drawPath(columns, vals, xc, yc, ticks) {
  const div = $("scatter");
  if (runState.charts.path) runState.charts.path.destroy();
  const xi = columns.indexOf(xc), yi = columns.indexOf(yc);
  const pts = []; // [x, y, tick], in tick order
  vals.forEach((r, k) => { if (typeof r[xi] === "number" && typeof r[yi] === "number") pts.push([r[xi], r[yi], ticks[k]]); });
  ui.path = { x: xc, y: yc, data: [pts.map((p) => p[0]), pts.map((p) => p[1])] };
  const sorted = pts.slice().sort((a, b) => a[0] - b[0]);
  const at = pts.find((p) => p[2] === runState.tick);
  runState.charts.path = new uPlot({
    width: Math.min(chartWidth(div), 420), height: 380, legend: { show: false },
    scales: { x: { time: false } },
    axes: [{ label: xc, values: (u, vals) => vals.map(fmtNum) }, { label: yc, values: (u, vals) => vals.map(fmtNum) }],
    series: [{}, { stroke: palette[0], fill: palette[0], paths: () => null, points: { show: true, size: 3, fill: palette[0] } }],
    hooks: { draw: [(u) => {
      const ctx = u.ctx;
      ctx.save();
      ctx.beginPath(); ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height); ctx.clip();
      ctx.strokeStyle = palette[0] + "99"; ctx.lineWidth = 1.2 * devicePixelRatio;
      ctx.beginPath();
      pts.forEach((p, k) => { const X = u.valToPos(p[0], "x", true), Y = u.valToPos(p[1], "y", true); if (k) ctx.lineTo(X, Y); else ctx.moveTo(X, Y); });
      ctx.stroke();
      if (at) {
        ctx.strokeStyle = "#ff7f0e"; ctx.lineWidth = 2 * devicePixelRatio;
        ctx.beginPath(); ctx.arc(u.valToPos(at[0], "x", true), u.valToPos(at[1], "y", true), 6 * devicePixelRatio, 0, 2 * Math.PI); ctx.stroke();
      }
      ctx.restore();
    }] },
  }, [sorted.map((p) => p[0]), sorted.map((p) => p[1])], div);
}

// ---------- a sweep: many worlds as one table ----------

// The sweep page: a column's aggregate per tick for every world of a sweep
// (one query over them all, as worldfs sql --worlds answers it), as lines
// over the band of their min to max, or a small chart per world; the
// worlds' records and run parameters as a table to filter and sort; two
// ticked rows compared on the compare page.
const sw = { mode: "overlay", sort: "world", desc: false, picked: [], res: null, ctl: null, charts: [], focus: null };
ui.sweepState = sw;

async function sweepPage() {
  const p = new URL(location.href).searchParams;
  sw.mode = p.get("view") === "multiples" ? "multiples" : "overlay";
  const pick = p.get("lineage") && !p.get("worlds") ? "lineage" : "worlds";
  $("pick").value = pick;
  $("pick-value").value = p.get(pick) || "";
  $("sweep-filter").value = p.get("filter") || "";
  if (p.get("sort")) { sw.sort = p.get("sort"); sw.desc = p.get("desc") === "1"; }
  $("sweep-form").addEventListener("submit", (e) => { e.preventDefault(); sw.picked = []; loadSweep({ agg: $("sweep-agg").value }); });
  for (const id of ["sweep-table", "sweep-column", "sweep-agg"]) {
    $(id).addEventListener("change", () => loadSweep({ table: $("sweep-table").value, column: id === "sweep-table" ? "" : $("sweep-column").value, agg: $("sweep-agg").value }));
  }
  for (const b of $("sweep-mode").children) b.addEventListener("click", () => { sw.mode = b.dataset.mode; saveSweepURL(); drawSweep(); });
  $("sweep-filter").addEventListener("input", () => { saveSweepURL(); drawWorldsTable(); drawSweep(); });
  if (!$("pick-value").value) {
    status("name the worlds of the sweep: a glob of their ids, or a world whose lineage to sweep");
    body.dataset.ready = "1";
    return;
  }
  await loadSweep({ table: p.get("table"), column: p.get("column"), agg: p.get("agg") });
}

// saveSweepURL keeps what the page shows in its URL.
function saveSweepURL() {
  const u = new URL(location.href);
  const set = (k, v) => { if (v) u.searchParams.set(k, v); else u.searchParams.delete(k); };
  const pick = $("pick").value;
  set("worlds", pick === "worlds" ? $("pick-value").value.trim() : "");
  set("lineage", pick === "lineage" ? $("pick-value").value.trim() : "");
  if (sw.res) { set("table", sw.res.table); set("column", sw.res.column); set("agg", sw.res.agg); }
  set("view", sw.mode === "multiples" ? "multiples" : "");
  set("filter", $("sweep-filter").value.trim());
  set("sort", sw.sort !== "world" || sw.desc ? sw.sort : "");
  set("desc", sw.desc ? "1" : "");
  history.replaceState(null, "", u);
}

function sweepError(msg) {
  $("sweep-error").textContent = msg;
  $("sweep-error").hidden = !msg;
}

async function loadSweep(params) {
  if (sw.ctl) sw.ctl.abort();
  const ctl = (sw.ctl = new AbortController());
  const pick = $("pick").value, value = $("pick-value").value.trim();
  status("sweeping…");
  let res;
  try {
    res = await api("/api/sweep", { run: run === "main" ? "" : run, [pick]: value, table: params.table, column: params.column, agg: params.agg }, ctl.signal);
  } catch (e) {
    if (e.name === "AbortError") return;
    sweepError(e.message);
    $("sweep-body").hidden = true;
    status("no sweep", true);
    body.dataset.sweepError = e.message;
    body.dataset.ready = "1";
    return;
  }
  if (ctl !== sw.ctl) return;
  sweepError("");
  $("sweep-body").hidden = false;
  delete body.dataset.sweepError;
  sw.res = res;
  ui.sweep = res;
  // Each world's series: [ticks, values], from the query's rows (world,
  // tick, value, ordered by world and tick); x is every tick any has.
  const series = {};
  const ticks = new Set();
  for (const [w, t, v] of res.series.rows) {
    const s = (series[w] = series[w] || [[], []]);
    s[0].push(Number(t));
    s[1].push(isNum(v) ? Number(v) : null);
    ticks.add(Number(t));
  }
  sw.series = series;
  sw.x = [...ticks].sort((a, b) => a - b);
  ui.series = series;
  const fill = (id, opts, v) => { $(id).replaceChildren(...opts.map((o) => el("option", { value: o }, o))); $(id).value = v; };
  fill("sweep-table", Object.keys(res.tables).sort(), res.table);
  fill("sweep-column", res.tables[res.table], res.column);
  fill("sweep-agg", ["avg", "min", "max", "sum", "count"], res.agg);
  const how = res.glob ? `worlds matching ${res.glob}` : `the lineage of ${res.lineage}`;
  $("sweep-of").textContent = `${fmtInt(res.worlds.length)} ${how} · run ${res.run}`;
  $("sweep-of").title = res.worlds.join(" ");
  const pickFlag = res.glob ? `--worlds '${res.glob}'` : `--lineage ${res.lineage}`;
  $("sweep-cli").textContent = `worldfs sql ${pickFlag}${res.run !== "main" ? " --run " + res.run : ""}`;
  $("sweep-sql").textContent = res.series.sql;
  sw.picked = sw.picked.filter((w) => res.worlds.includes(w));
  saveSweepURL();
  drawWorldsTable();
  drawSweep();
  status(`${res.agg}(${res.column}) of ${res.table} per tick, ${fmtInt(res.worlds.length)} worlds, ${fmtInt(res.series.rows.length)} points` +
    (res.series.truncated ? " (truncated: the server's bound on a result)" : "") + ` · ${fmtNum(res.series.elapsed_ms)} ms`);
  body.dataset.swept = `${res.table}.${res.column} ${res.agg} ${res.worlds.length}`;
  body.dataset.ready = "1";
}

// sweepRows are the worlds' rows as the table shows them: the records,
// the aggregate at each world's last tick, filtered, sorted.
function sweepRows() {
  const res = sw.res, m = res.meta;
  const valueCol = `${res.agg}(${res.column}) at head`;
  const cols = [...m.columns, valueCol];
  let rows = m.rows.map((r) => {
    const s = sw.series[r[0]];
    const last = s && s[1].length ? s[1][s[1].length - 1] : null;
    return [...r, last == null ? "NULL" : String(last)];
  });
  const test = sweepFilter($("sweep-filter").value, cols);
  rows = rows.filter(test);
  const i = Math.max(0, cols.indexOf(sw.sort));
  const cmpv = (a, b) => {
    const x = a[i], y = b[i];
    if (x === y) return 0;
    if (x === "NULL") return 1;
    if (y === "NULL") return -1;
    const d = isNum(x) && isNum(y) ? Number(x) - Number(y) : x < y ? -1 : 1;
    return sw.desc ? -d : d;
  };
  rows.sort((a, b) => cmpv(a, b) || (a[0] < b[0] ? -1 : 1));
  return { cols, rows };
}

// sweepFilter is a row test for the filter's terms, each of which a row
// must match: COLUMN=VALUE, !=, <, <=, >, >= (numbers as numbers), or
// text anywhere in the row.
function sweepFilter(text, cols) {
  const tests = text.trim().split(/\s+/).filter(Boolean).map((term) => {
    const m = /^([^=!<>]+)(=|!=|<=|>=|<|>)(.*)$/.exec(term);
    const ci = m ? cols.indexOf(m[1]) : -1;
    if (ci < 0) return (r) => r.some((v) => v.toLowerCase().includes(term.toLowerCase()));
    const [, , op, want] = m;
    return (r) => {
      const v = r[ci];
      const num = isNum(v) && isNum(want);
      const d = num ? Number(v) - Number(want) : v < want ? -1 : v > want ? 1 : 0;
      return { "=": d === 0, "!=": d !== 0, "<": d < 0, "<=": d <= 0, ">": d > 0, ">=": d >= 0 }[op] && (v !== "NULL" || op === "!=");
    };
  });
  return (r) => tests.every((t) => t(r));
}

// sweepShown are the worlds the filter keeps, in the table's order.
function sweepShown() { return sweepRows().rows.map((r) => r[0]); }

// drawWorldsTable draws the worlds' table: a tick box to pick two to
// compare, each world linked to its run, the columns sortable.
function drawWorldsTable() {
  const res = sw.res;
  if (!res) return;
  const { cols, rows } = sweepRows();
  const table = $("sweep-worlds");
  const nums = new Set(cols.map((_, i) => i).filter((i) => i > 0 && rows.length && rows.every((r) => r[i] === "NULL" || isNum(r[i]))));
  const hr = el("tr", {}, el("th", { title: "tick two to compare" }, "compare"));
  cols.forEach((c, i) => {
    const th = el("th", { "data-col": c, class: "sortable" + (nums.has(i) ? " num" : "") + (i >= cols.length - 1 - res.params.length && i < cols.length - 1 ? " param" : "") },
      c + (sw.sort === c ? (sw.desc ? " ▼" : " ▲") : ""));
    th.addEventListener("click", () => { sw.desc = sw.sort === c ? !sw.desc : false; sw.sort = c; saveSweepURL(); drawWorldsTable(); drawSweep(); });
    hr.append(th);
  });
  table.tHead.replaceChildren(hr);
  const frag = document.createDocumentFragment();
  for (const r of rows) {
    const w = r[0];
    const box = el("input", { type: "checkbox", "aria-label": `compare ${w}` });
    box.checked = sw.picked.includes(w);
    box.addEventListener("change", () => {
      sw.picked = sw.picked.filter((x) => x !== w);
      if (box.checked) sw.picked.push(w);
      if (sw.picked.length > 2) sw.picked.shift();
      drawWorldsTable();
      if (sw.mode === "overlay" && sw.chart) sw.chart.redraw(false);
    });
    const tr = el("tr", { "data-world": w, class: sw.picked.includes(w) ? "here" : "" }, el("td", {}, box));
    r.forEach((v, i) => {
      const shown = nums.has(i) ? fmtValue(v) : v;
      const attrs = { class: (nums.has(i) ? "num" : "") + (v === "NULL" ? " null" : "") + (i === 0 ? " clip" : "") };
      if (shown !== v || v.length > 24) attrs.title = v;
      if (i === 0) tr.append(el("td", attrs, el("a", { href: worldPath(w, "?run=" + encodeURIComponent(res.run)) }, v)));
      else tr.append(el("td", attrs, shown));
    });
    frag.append(tr);
  }
  table.tBodies[0].replaceChildren(frag);
  $("sweep-worlds-info").textContent = rows.length === res.worlds.length ? `${fmtInt(rows.length)} worlds` : `${fmtInt(rows.length)} of ${fmtInt(res.worlds.length)} worlds (filtered)`;
  compareLink();
}

// compareLink points the compare link at the two ticked worlds, first →
// second, at their common head tick: the newer of the two heads' lower.
function compareLink() {
  const a = $("compare-two"), res = sw.res;
  const head = (w) => { const r = res.meta.rows.find((r) => r[0] === w); return r ? r[res.meta.columns.indexOf("head_tick")] : "NULL"; };
  if (sw.picked.length !== 2) {
    a.setAttribute("aria-disabled", "true");
    a.href = "#";
    a.textContent = "compare two worlds";
    $("compare-note").textContent = sw.picked.length ? `and one more: ${sw.picked[0]} →` : "tick two rows to compare them at their common head tick";
    return;
  }
  const [wa, wb] = sw.picked, ha = head(wa), hb = head(wb);
  if (!isNum(ha) || !isNum(hb)) {
    a.setAttribute("aria-disabled", "true");
    a.href = "#";
    $("compare-note").textContent = `${isNum(ha) ? wb : wa} has no visible tick`;
    return;
  }
  const t = Math.min(Number(ha), Number(hb));
  const q = new URLSearchParams({ run: res.run, a: t, vs: wb, vsrun: res.run, b: t, table: res.table });
  a.href = worldPath(wa, "/compare?" + q);
  a.removeAttribute("aria-disabled");
  a.textContent = `compare ${wa} → ${wb} at tick ${fmtInt(t)}`;
  a.title = a.textContent;
  $("compare-note").textContent = "";
}

// sweepBand is, per tick of x, the least and greatest value among the
// worlds' (null where none has one).
function sweepBand(worlds) {
  const at = new Map(sw.x.map((t, i) => [t, i]));
  const lo = sw.x.map(() => null), hi = sw.x.map(() => null);
  for (const w of worlds) {
    const [ts, vs] = sw.series[w] || [[], []];
    ts.forEach((t, k) => {
      const v = vs[k], i = at.get(t);
      if (v == null) return;
      if (lo[i] == null || v < lo[i]) lo[i] = v;
      if (hi[i] == null || v > hi[i]) hi[i] = v;
    });
  }
  return [sw.x, lo, hi];
}

// aligned is a world's values on x (null at ticks it does not show).
function aligned(w) {
  const [ts, vs] = sw.series[w] || [[], []];
  const m = new Map(ts.map((t, k) => [t, vs[k]]));
  return sw.x.map((t) => (m.has(t) ? m.get(t) : null));
}

// tickIncrs are the steps of a tick axis: whole ticks.
const tickIncrs = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 1e8, 1e9];

// fillBand fills band's min to max on u, behind its lines.
function fillBand(u, band, color) {
  const [xs, lo, hi] = band;
  const ctx = u.ctx;
  ctx.save();
  ctx.beginPath(); ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height); ctx.clip();
  ctx.fillStyle = color;
  let start = -1;
  const flush = (from, to) => {
    ctx.beginPath();
    for (let k = from; k <= to; k++) ctx.lineTo(u.valToPos(xs[k], "x", true), u.valToPos(hi[k], "y", true));
    for (let k = to; k >= from; k--) ctx.lineTo(u.valToPos(xs[k], "x", true), u.valToPos(lo[k], "y", true));
    ctx.closePath(); ctx.fill();
  };
  for (let k = 0; k <= xs.length; k++) {
    const has = k < xs.length && lo[k] != null;
    if (has && start < 0) start = k;
    if (!has && start >= 0) { flush(start, k - 1); start = -1; }
  }
  ctx.restore();
}

function drawSweep() {
  const res = sw.res;
  for (const c of sw.charts) c.destroy();
  sw.charts = [];
  sw.chart = null;
  for (const b of $("sweep-mode").children) b.classList.toggle("here", b.dataset.mode === sw.mode);
  $("sweep-chart").replaceChildren();
  $("sweep-multiples").replaceChildren();
  $("sweep-readout").textContent = "";
  if (!res) return;
  const shown = sweepShown();
  const band = sweepBand(shown);
  ui.band = band;
  ui.shown = shown;
  const label = `${res.agg}(${res.column})`;
  $("sweep-chart").hidden = sw.mode !== "overlay";
  $("sweep-multiples").hidden = sw.mode !== "multiples";
  body.dataset.sweepMode = sw.mode;
  if (shown.length === 0) { $("sweep-chart").append(el("p", { class: "note" }, "no world passes the filter")); return; }
  const color = (w) => palette[sw.res.worlds.indexOf(w) % palette.length];
  if (sw.mode === "overlay") {
    const div = $("sweep-chart");
    const data = [sw.x, ...shown.map(aligned)];
    const many = shown.length > 12;
    const series = [{ label: "tick" }, ...shown.map((w) => ({
      label: w, stroke: color(w) + (many ? "99" : ""), width: 1, spanGaps: false, points: { show: sw.x.length < 60 && !many },
      value: (u, v) => (v == null ? "–" : fmtNum(v)),
    }))];
    const u = new uPlot({
      title: `${label} of ${res.table} per tick: each world's line over the band of their min to max (${fmtInt(shown.length)} worlds)`,
      width: chartWidth(div), height: 360, legend: { show: false },
      scales: { x: { time: false } }, focus: { alpha: 0.25 }, cursor: { focus: { prox: 12 } },
      series,
      axes: [{ label: "tick", incrs: tickIncrs, values: (u, vals) => vals.map(fmtInt) }, { label, values: (u, vals) => vals.map(fmtNum), size: 70 }],
      hooks: {
        drawAxes: [(u) => fillBand(u, band, "#8c959f33")],
        draw: [(u) => {
          // The ticked worlds drawn again, thick, over the others.
          const ctx = u.ctx;
          ctx.save();
          ctx.beginPath(); ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height); ctx.clip();
          for (const w of sw.picked) {
            const si = shown.indexOf(w) + 1;
            if (si < 1) continue;
            ctx.strokeStyle = color(w); ctx.lineWidth = 3 * devicePixelRatio;
            ctx.beginPath();
            let on = false;
            u.data[si].forEach((v, k) => {
              if (v == null) { on = false; return; }
              const X = u.valToPos(u.data[0][k], "x", true), Y = u.valToPos(v, "y", true);
              if (on) ctx.lineTo(X, Y); else ctx.moveTo(X, Y);
              on = true;
            });
            ctx.stroke();
          }
          ctx.restore();
        }],
        setSeries: [(u, si) => { sw.focus = si; readout(u); }],
        setCursor: [(u) => readout(u)],
      },
    }, data, div);
    sw.chart = u;
    sw.charts.push(u);
    ui.overlay = data;
    return;
  }
  // Small multiples: a chart per world, in the table's order, all on
  // the y scale of the band, the band behind each.
  const box = $("sweep-multiples");
  const gap = parseFloat(getComputedStyle(box).columnGap) || 14;
  // Room for the box's own scroll bar, which many worlds bring.
  const width = Math.max(240, Math.floor((box.clientWidth - 3 * gap - 18) / 4));
  const ys = band[1].concat(band[2]).filter((v) => v != null);
  let ymin = Math.min(...ys), ymax = Math.max(...ys);
  if (ymin === ymax) { ymin -= 1; ymax += 1; }
  ui.multiples = {};
  for (const w of shown) {
    const data = [sw.x, aligned(w)];
    ui.multiples[w] = data;
    const div = el("div", { class: "chart", "data-world": w, title: w, style: `width: ${width}px` });
    box.append(div);
    sw.charts.push(new uPlot({
      title: w, width, height: 140, legend: { show: false }, cursor: { points: { show: false } },
      scales: { x: { time: false }, y: { auto: false, min: ymin, max: ymax } },
      series: [{}, { stroke: color(w), width: sw.picked.includes(w) ? 2.5 : 1.5, spanGaps: false }],
      axes: [{ incrs: tickIncrs, values: (u, vals) => vals.map(fmtInt), size: 30 }, { values: (u, vals) => vals.map(fmtNum), size: 60 }],
      hooks: { drawAxes: [(u) => fillBand(u, band, "#8c959f26")] },
    }, data, div));
  }
}

// readout says, under the cursor, the tick, the band there and the
// nearest world's value.
function readout(u) {
  const i = u.cursor.idx;
  if (i == null) { $("sweep-readout").textContent = ""; return; }
  const t = u.data[0][i], band = ui.band;
  let text = `tick ${fmtInt(t)}: ${fmtNum(band[1][i])} to ${fmtNum(band[2][i])} across the worlds`;
  const si = sw.focus;
  if (si != null && si > 0 && u.series[si]) text += ` · ${u.series[si].label}: ${u.data[si][i] == null ? "–" : fmtNum(u.data[si][i])}`;
  $("sweep-readout").textContent = text;
}

const pages = { sweep: sweepPage, worlds: worldsPage, run: runPage, sql: sqlPage, facts: factsPage, compare: comparePage, entity: entityPage };
Promise.resolve(pages[page] && pages[page]()).catch((e) => { status(e.message, true); body.dataset.error = e.message; });
