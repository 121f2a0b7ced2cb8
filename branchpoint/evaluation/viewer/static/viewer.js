/* branchpoint viewer: executions table, one execution's timeline, fork trees, side-by-side.
 * Plain JavaScript, no build step, no network: in `server` mode it asks the local server's
 * /api/..., in `static` mode (an export) it loads data/*.js files written beside the page.
 * Views are addressed by the URL hash (#/?filters, #/execution/ID, #/tree/ID, #/compare/A/B),
 * so links into an export open one view. */
"use strict";

const CONFIG = JSON.parse(document.getElementById("bp-config").textContent);
const PAGE = 100;
const ROWS_PER_REQUEST = 2000;  // the rows API is paged: the first rows draw before the rest arrive
const LIVE_POLL_MS = 1500;      // once indexed, the page keeps asking for rows a running run appends
const BRANCHES_SHOWN = 40;      // per action in a fork tree; the rest behind "show all"
const OUTCOME_NAMES = {
  correct_answer: "correct answer", wrong_answer: "wrong answer", correct_abstention: "correct abstention",
  failed_abstention: "failed abstention", incomplete: "incomplete", unparseable: "unparseable",
};
const state = { run: null, runs: [], perRun: [], columns: [], rows: [], runOf: {}, done: false, errors: [], phase: "",
                sort: { key: null, dir: 1 }, page: 0, selected: new Set(), cache: {}, expanded: new Set() };

// ---------------------------------------------------------------------------------------------
// Data access: one function per kind of data, the same for the server and a static export.
// ---------------------------------------------------------------------------------------------

window.__bp_data = function (key, data) { state.cache[key] = data; };

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const s = document.createElement("script");
    s.src = src; s.onload = () => resolve(); s.onerror = () => reject(new Error("cannot read " + src));
    document.head.appendChild(s);
  });
}

/* 32-bit FNV-1a of the id's UTF-8 bytes, modulo 256 (export.shard_of). */
function shardOf(id) {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(id)) { h ^= b; h = Math.imul(h, 0x01000193) >>> 0; }
  return (h % 256).toString(16).padStart(2, "0");
}

async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

async function fromShard(folder, id) {
  const key = folder + "/" + shardOf(id);
  if (!(key in state.cache)) await loadScript(CONFIG.data + key + ".js");
  const item = (state.cache[key] || {})[id];
  if (!item) throw new Error("no " + (folder === "t" ? "fork tree" : "execution") + " " + id + " in this export");
  return item;
}

const api = {
  runs: () => CONFIG.mode === "static" ? loadScript(CONFIG.data + "run.js").then(() => ({ runs: [state.cache.run] })) : getJSON("api/runs"),
  rows: (k, since) => CONFIG.mode === "static" ? loadScript(CONFIG.data + "rows.js").then(() => state.cache.rows)
                                               : getJSON(`api/rows?run=${k}&since=${since}&limit=${ROWS_PER_REQUEST}`),
  execution: (id) => CONFIG.mode === "static" ? fromShard("x", id) : getJSON(`api/execution/${encodeURIComponent(id)}?run=${runOf(id)}`),
  tree: (id) => CONFIG.mode === "static" ? fromShard("t", id) : getJSON(`api/tree/${encodeURIComponent(id)}?run=${runOf(id)}`),
};
function runOf(id) { return state.runOf[id] || 0; }

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

function esc(v) {
  return String(v === null || v === undefined ? "" : v).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
function num(v, d = 0) {
  if (v === null || v === undefined || v === "") return "–";
  if (v === "inf") return "∞";
  return typeof v === "number" ? v.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d }) : esc(v);
}
function pct(v) { return v === null || v === undefined ? "–" : (100 * v).toFixed(0) + "%"; }
function outcomeBadge(o) { return `<span class="badge o-${esc(o)}">${esc(OUTCOME_NAMES[o] || o)}</span>`; }
function actionBadge(a) { return a ? `<span class="badge a-${esc(a)}">${esc(a)}</span>` : ""; }
function short(id) { return esc(String(id || "").slice(0, 12)); }
function row(r, k) { const o = { run: k }; state.columns.forEach((c, i) => { o[c] = r[i]; }); return o; }
function runName(k) { const r = state.runs[k]; return r ? r.name : String(k); }
function multi() { return state.runs.length > 1; }
function main() { return document.getElementById("bp-main"); }

// ---------------------------------------------------------------------------------------------
// Header, progress, unreadable lines
// ---------------------------------------------------------------------------------------------

function renderHeader() {
  const run = state.run;
  if (!run) return;
  const m = run.metrics;
  let text;
  if (multi()) {
    text = `<b>${state.runs.length} runs</b> ` + state.runs.map((r, k) => `<span class="badge" data-run-name="${k}">${esc(r.name)}</span>`).join(" ") +
           ` · judge <b>${[...new Set(state.runs.map((r) => r.judge))].map(esc).join(", ")}</b>`;
  } else {
    text = `<b>${esc(run.name)}</b> <span class="muted">${esc(run.run_dir)}</span> · judge <b>${esc(run.judge)}</b>` +
           ` · TPC cost = g + ${run.lam}·x + ${run.mu}·|S|`;
    if (m) text += ` · answer acc. ${pct(m.answer_accuracy)} · abstention acc. ${pct(m.abstention_accuracy)} · TPC ${num(m.tpc, 0)}`;
  }
  document.getElementById("bp-run").innerHTML = text;
  const p = document.getElementById("bp-progress");
  const live = state.done && CONFIG.mode !== "static" ? " · live: new records appear as they are written" : "";
  p.textContent = state.done ? `${state.rows.length.toLocaleString()} records${live}` : `${state.rows.length.toLocaleString()} records so far; ${state.phase}…`;
  const box = document.getElementById("bp-errors");
  const forecastProblems = (run.forecast_problems || []).map((m) => `<div>forecasts: ${esc(m)}</div>`).join("");
  if (forecastProblems && !state.errors.length) { box.hidden = false; box.innerHTML = forecastProblems; return; }
  if (state.errors.length) {
    box.hidden = false;
    box.innerHTML = `<b>${state.errors.length} line${state.errors.length > 1 ? "s" : ""} could not be read</b> (the rest is shown):` +
      `<table class="error-table"><tr><th>file</th><th class="num">line</th><th>problem</th></tr>` +
      state.errors.slice(0, 50).map((e) => `<tr class="error-row"><td>${esc(e.file)}</td><td class="num">${e.line}</td><td>${esc(e.message)}</td></tr>`).join("") +
      `</table>` + forecastProblems;
  } else box.hidden = true;
}

function mergeRows() {
  state.rows = state.perRun.flatMap((p) => p.rows);
  state.runOf = {};
  for (const r of state.rows) if (!(r.id in state.runOf)) state.runOf[r.id] = r.run;
  state.done = state.perRun.every((p) => p.done);
  state.phase = state.perRun.map((p) => p.phase).filter((x) => x !== "done").join("; ");
  state.errors = state.perRun.flatMap((p, k) => p.errors.map((e) => multi() ? { ...e, file: `${runName(k)}/${e.file}` } : e));
}

/* One run's rows: paged while the index fills, then (server mode) polled for what a running run appends. */
async function loadRun(k) {
  const mine = state.perRun[k];
  for (;;) {
    const data = await api.rows(k, mine.rows.length);
    state.columns = data.columns;
    if (data.version !== mine.version && mine.rows.length > 0 && CONFIG.mode !== "static") {
      const all = [];  // rows changed: read them all again (in pages), then swap them in
      let page = data;
      for (let since = 0; ; since += page.rows.length) {
        page = await api.rows(k, since);
        all.push(...page.rows.map((r) => row(r, k)));
        if (page.rows.length < ROWS_PER_REQUEST) break;
      }
      Object.assign(data, page);
      mine.rows = all;
    } else {
      const fresh = data.rows.map((r) => row(r, k));
      mine.rows = CONFIG.mode === "static" ? fresh : mine.rows.concat(fresh);
    }
    mine.version = data.version; mine.done = data.done; mine.phase = data.phase; mine.errors = data.errors;
    mergeRows();
    renderHeader();
    if (currentView() === "table" && (data.rows.length || !mine.drawn || !mine.shownDone)) {
      mine.drawn = true; mine.shownDone = data.done; renderTable();
    }
    if (CONFIG.mode === "static") return;
    if (data.rows.length >= ROWS_PER_REQUEST) continue;  // more pages ready now
    await new Promise((r) => setTimeout(r, data.done ? LIVE_POLL_MS : data.rows.length ? 250 : 50));
  }
}

function loadRows() {
  state.perRun = state.runs.map(() => ({ rows: [], version: -1, done: false, phase: "starting", errors: [], drawn: false }));
  return Promise.all(state.runs.map((_, k) => loadRun(k)));
}

// ---------------------------------------------------------------------------------------------
// The executions table
// ---------------------------------------------------------------------------------------------

const FILTERS = ["q", "run", "kind", "condition", "category", "answerable", "outcome", "label", "status", "smin", "smax", "cmin", "cmax"];
const TABLE_COLUMNS = [
  ["question", "question"], ["condition", "condition"], ["category", "category"], ["outcome", "outcome"],
  ["labels", "judge labels"], ["evidence", "evidence"], ["searches", "searches", true], ["cost", "TPC cost", true],
  ["input_tokens", "in tok", true], ["output_tokens", "out tok", true], ["wall_s", "wall s", true],
  ["branch", "branch"], ["checkpoints", "ckpts", true],
];

function hashParams() {
  const h = location.hash.replace(/^#\/?/, "");
  const q = h.includes("?") ? h.slice(h.indexOf("?") + 1) : "";
  return new URLSearchParams(q);
}
function currentView() {
  const h = location.hash.replace(/^#\/?/, "").split("?")[0];
  return h === "" ? "table" : h.split("/")[0];
}
function filters() {
  const p = hashParams(); const f = {};
  for (const k of FILTERS) f[k] = p.get(k) || "";
  if (!p.has("kind")) f.kind = "execution";
  f.sort = p.get("sort") || ""; f.dir = p.get("dir") === "desc" ? -1 : 1; f.page = parseInt(p.get("page") || "0", 10) || 0;
  return f;
}
function setFilters(f) {
  const p = new URLSearchParams();
  for (const k of FILTERS) if (f[k] && !(k === "kind" && f[k] === "execution")) p.set(k, f[k]);
  if (f.kind === "") p.set("kind", "");
  if (f.sort) { p.set("sort", f.sort); if (f.dir < 0) p.set("dir", "desc"); }
  if (f.page) p.set("page", f.page);
  const s = p.toString();
  history.replaceState(null, "", "#/" + (s ? "?" + s : ""));
  renderTable();
}

function matches(r, f) {
  if (f.run !== "" && String(r.run) !== f.run) return false;
  if (f.kind && r.kind !== f.kind) return false;
  if (f.condition && r.condition !== f.condition) return false;
  if (f.category && r.category !== f.category) return false;
  if (f.answerable && String(r.answerable) !== f.answerable) return false;
  if (f.outcome && r.outcome !== f.outcome) return false;
  if (f.status && r.status !== f.status) return false;
  if (f.label && !r.labels.includes(f.label) && !(f.label === "(evidence)" && r.evidence)) return false;
  if (f.smin !== "" && r.searches < +f.smin) return false;
  if (f.smax !== "" && r.searches > +f.smax) return false;
  if (f.cmin !== "" && r.cost < +f.cmin) return false;
  if (f.cmax !== "" && r.cost > +f.cmax) return false;
  if (f.q) {
    const q = f.q.toLowerCase();
    if (!r.question.toLowerCase().includes(q) && !r.question_id.toLowerCase().includes(q) && !r.id.startsWith(q)) return false;
  }
  return true;
}

function options(name, values, current, labels) {
  return `<select name="${name}"><option value="">any</option>` +
    values.map((v) => `<option value="${esc(v)}"${String(v) === current ? " selected" : ""}>${esc((labels && labels[v]) || v)}</option>`).join("") + `</select>`;
}

/* Conditions × runs: per cell the records that pass the filters, their outcomes and costs. */
function gridHTML(rows) {
  const conds = [...new Set(rows.map((r) => r.condition))].sort();
  if (!multi() && conds.length < 2) return "";
  const runs = [...new Set(rows.map((r) => r.run))].sort((a, b) => a - b);
  const cell = (rs) => {
    const scored = rs.filter((r) => r.outcome !== "incomplete" && r.outcome !== "unparseable");
    if (!rs.length) return `<td class="muted">–</td>`;
    const ok = scored.filter((r) => r.outcome === "correct_answer" || r.outcome === "correct_abstention").length;
    const mean = (k) => rs.reduce((a, r) => a + (+r[k] || 0), 0) / rs.length;
    return `<td class="num" data-n="${rs.length}">n ${rs.length} · correct ${scored.length ? pct(ok / scored.length) : "–"} · ` +
      `${num(mean("searches"), 2)} searches · cost ${num(mean("cost"), 0)}</td>`;
  };
  const by = {};
  for (const r of rows) (by[r.condition + "\u0000" + r.run] = by[r.condition + "\u0000" + r.run] || []).push(r);
  return `<h3>Conditions${multi() ? " × runs" : ""} <span class="muted">(the records that pass the filters)</span></h3>` +
    `<table id="bp-grid" class="grid"><tr><th>condition</th>${runs.map((k) => `<th>${esc(runName(k))}</th>`).join("")}</tr>` +
    conds.map((c) => `<tr><td><code>${esc(c)}</code></td>${runs.map((k) => cell(by[c + "\u0000" + k] || [])).join("")}</tr>`).join("") + `</table>`;
}

function renderTable() {
  const f = filters();
  const all = state.rows;
  const uniq = (k) => [...new Set(all.map((r) => r[k]).filter((v) => v !== null && v !== ""))].sort();
  const labels = [...new Set(all.flatMap((r) => r.labels))].sort();
  let rows = all.filter((r) => matches(r, f));
  if (f.sort) {
    const k = f.sort;
    rows.sort((a, b) => {
      const x = a[k], y = b[k];
      const c = typeof x === "number" && typeof y === "number" ? x - y : String(x ?? "").localeCompare(String(y ?? ""));
      return c * f.dir;
    });
  }
  const pages = Math.max(1, Math.ceil(rows.length / PAGE));
  const page = Math.min(f.page, pages - 1);
  const shown = rows.slice(page * PAGE, (page + 1) * PAGE);
  const kinds = { execution: "executions", fork: "fork branches", replay: "replays" };
  const html = [];
  html.push(`<h2>Executions</h2><form class="filters" id="bp-filters" onsubmit="return false">`);
  html.push(`<label>question text<input class="search" name="q" value="${esc(f.q)}" placeholder="search questions, ids…"></label>`);
  html.push(`<label>records<select name="kind">${[["execution", "executions"], ["fork", "fork branches"], ["replay", "replays"], ["", "all"]]
    .map(([v, t]) => `<option value="${v}"${f.kind === v ? " selected" : ""}>${t}</option>`).join("")}</select></label>`);
  if (multi()) html.push(`<label>run${options("run", state.runs.map((_, k) => String(k)), f.run, Object.fromEntries(state.runs.map((r, k) => [k, r.name])))}</label>`);
  html.push(`<label>condition${options("condition", uniq("condition"), f.condition)}</label>`);
  html.push(`<label>category${options("category", uniq("category"), f.category)}</label>`);
  html.push(`<label>answerable${options("answerable", ["true", "false"], f.answerable, { true: "answerable", false: "unanswerable" })}</label>`);
  html.push(`<label>outcome${options("outcome", state.run ? state.run.outcomes : [], f.outcome, OUTCOME_NAMES)}</label>`);
  html.push(`<label>judge label${options("label", labels.concat(["(evidence)"]), f.label)}</label>`);
  html.push(`<label>status${options("status", uniq("status"), f.status)}</label>`);
  html.push(`<label>searches ≥<input class="small" name="smin" type="number" min="0" value="${esc(f.smin)}"></label>`);
  html.push(`<label>searches ≤<input class="small" name="smax" type="number" min="0" value="${esc(f.smax)}"></label>`);
  html.push(`<label>cost ≥<input class="small" name="cmin" type="number" min="0" value="${esc(f.cmin)}"></label>`);
  html.push(`<label>cost ≤<input class="small" name="cmax" type="number" min="0" value="${esc(f.cmax)}"></label>`);
  html.push(`<button type="button" id="bp-clear">clear</button></form>`);
  html.push(`<div class="pager"><span id="bp-count">${rows.length.toLocaleString()} of ${all.filter((r) => !f.kind || r.kind === f.kind).length.toLocaleString()} ${kinds[f.kind] || "records"}</span>`);
  html.push(`<button type="button" data-page="${page - 1}"${page <= 0 ? " disabled" : ""}>‹ prev</button> page ${page + 1} / ${pages}`);
  html.push(`<button type="button" data-page="${page + 1}"${page >= pages - 1 ? " disabled" : ""}>next ›</button>`);
  html.push(`<button type="button" id="bp-compare"${state.selected.size === 2 ? "" : " disabled"}>compare the 2 ticked side by side</button></div>`);
  html.push(gridHTML(rows));
  html.push(`<table id="bp-table"><thead><tr><th></th>${multi() ? `<th class="sortable" data-sort="run">run</th>` : ""}`);
  for (const [k, t, isNum] of TABLE_COLUMNS) {
    const cls = ["sortable", isNum ? "num" : "", f.sort === k ? (f.dir > 0 ? "sorted-asc" : "sorted-desc") : ""].join(" ");
    html.push(`<th class="${cls}" data-sort="${k}">${t}</th>`);
  }
  html.push(`</tr></thead><tbody>`);
  for (const r of shown) {
    html.push(`<tr class="clickable" data-id="${esc(r.id)}"><td><input type="checkbox" data-pick="${esc(r.id)}"${state.selected.has(r.id) ? " checked" : ""}></td>` +
      (multi() ? `<td><span class="badge">${esc(runName(r.run))}</span></td>` : "") +
      `<td>${esc(r.question)} <span class="muted">${esc(r.question_id)}</span></td><td><code>${esc(r.condition)}</code></td>` +
      `<td>${esc(r.category)}</td><td>${r.status !== "ok" && r.status !== "incomplete" ? `<span class="badge">${esc(r.status)}</span> ` : ""}${outcomeBadge(r.outcome)}</td>` +
      `<td>${r.labels.map((l) => `<span class="badge">${esc(l)}</span>`).join(" ")}` +
      `${r.judge && state.run && r.judge !== state.run.judge ? ` <span class="muted" title="this record has no label of judge ${esc(state.run.judge)}">by ${esc(r.judge)}</span>` : ""}</td><td>${esc(r.evidence)}</td>` +
      `<td class="num">${r.searches}</td><td class="num">${num(r.cost, 0)}</td><td class="num">${num(r.input_tokens)}</td>` +
      `<td class="num">${num(r.output_tokens)}</td><td class="num">${num(r.wall_s, 2)}</td>` +
      `<td>${actionBadge(r.branch)}${r.boundary ? ` <span class="muted">@${esc(r.boundary)} #${r.repeat}</span>` : ""}</td><td class="num">${r.checkpoints}</td></tr>`);
  }
  if (!shown.length) html.push(`<tr><td colspan="${TABLE_COLUMNS.length + 1 + (multi() ? 1 : 0)}" class="muted">${state.done ? "no record matches these filters" : "loading…"}</td></tr>`);
  html.push(`</tbody></table>`);
  const focus = document.activeElement && document.activeElement.name;
  main().innerHTML = html.join("");
  if (focus) { const el = main().querySelector(`[name="${focus}"]`); if (el) { el.focus(); if (el.setSelectionRange && el.type === "text") el.setSelectionRange(el.value.length, el.value.length); } }
  const form = document.getElementById("bp-filters");
  const read = () => { const g = filters(); for (const k of FILTERS) { const el = form.elements[k]; if (el) g[k] = el.value; } g.page = 0; return g; };
  form.addEventListener("change", () => setFilters(read()));
  form.elements.q.addEventListener("input", () => setFilters(read()));
  document.getElementById("bp-clear").onclick = () => setFilters({ kind: "execution" });
  main().querySelectorAll("[data-page]").forEach((b) => { b.onclick = () => { const g = filters(); g.page = +b.dataset.page; setFilters(g); }; });
  main().querySelectorAll("th[data-sort]").forEach((th) => {
    th.onclick = () => { const g = filters(); g.dir = g.sort === th.dataset.sort ? -g.dir : 1; g.sort = th.dataset.sort; setFilters(g); };
  });
  main().querySelectorAll("tr[data-id]").forEach((tr) => {
    tr.onclick = (ev) => { if (ev.target.dataset.pick === undefined) location.hash = "#/execution/" + encodeURIComponent(tr.dataset.id); };
  });
  main().querySelectorAll("input[data-pick]").forEach((cb) => {
    cb.onchange = () => {
      if (cb.checked) state.selected.add(cb.dataset.pick); else state.selected.delete(cb.dataset.pick);
      while (state.selected.size > 2) state.selected.delete(state.selected.values().next().value);
      renderTable();
    };
  });
  document.getElementById("bp-compare").onclick = () => {
    const [a, b] = [...state.selected];
    location.hash = `#/compare/${encodeURIComponent(a)}/${encodeURIComponent(b)}`;
  };
}

// ---------------------------------------------------------------------------------------------
// One execution: header and timeline
// ---------------------------------------------------------------------------------------------

function usageText(u) {
  if (!u) return "";
  return `tokens in ${num(u.input_tokens)} · out ${num(u.output_tokens)}` + (u.reasoning_tokens ? ` · reasoning ${num(u.reasoning_tokens)}` : "");
}

function stepHTML(s) {
  const head = [`<b>${esc(s.kind)}</b>`];
  if (s.action) head.push(actionBadge(s.action.toUpperCase()));
  if (s.usage) head.push(`<span class="muted">${usageText(s.usage)}</span>`);
  head.push(`<span class="muted">${num(s.latency_s, 2)} s</span>`);
  if (s.finish_reason) head.push(`<span class="muted">finish ${esc(s.finish_reason)}</span>`);
  const out = [`<div class="step k-${esc(s.kind)}" data-step="${s.index}"><div class="head">${head.join(" ")}</div>`];
  if (s.kind === "search") {
    out.push(`<div>query <b>${esc(s.query)}</b> · source <code>${esc(s.source || "?")}</code> · cache ${s.cache_hit === true ? "hit" : s.cache_hit === false ? "miss" : "?"}</div>`);
    for (const d of s.retrieved || []) {
      const ev = (d.evidence || []).map((e) => `<span class="badge ev-${esc(e.split(": ").pop())}">${esc(e)}</span>`).join(" ");
      out.push(`<div class="doc"><code>${esc(d.doc_id)}</code> score ${num(d.score, 3)}${d.title ? ` · <b>${esc(d.title)}</b>` : ""} ${ev}` +
        `<div class="snippet">${esc(d.text)}</div></div>`);
    }
  } else if (s.text) out.push(`<div class="text">${esc(s.text)}</div>`);
  if (s.raw && s.raw !== s.text) out.push(`<details><summary>raw reply</summary><div class="reasoning">${esc(s.raw)}</div></details>`);
  const reasoning = s.reasoning || s.reasoning_content;
  if (reasoning) out.push(`<details><summary>reasoning</summary><div class="reasoning">${esc(reasoning)}</div></details>`);
  if (s.request) out.push(requestHTML(s.request));
  if (s.reply) out.push(replyHTML(s.reply));
  out.push(`</div>`);
  return out.join("");
}

function contentText(c) {
  if (c === null || c === undefined) return "";
  if (typeof c === "string") return c;
  return JSON.stringify(c, null, 1);  // content parts (lists of {type, text})
}

/* A request as sent: messages (or the prompt), the tools offered, and every other field (sampling, limits). */
function requestHTML(q) {
  const parts = [];
  if (q.messages) {
    parts.push(q.messages.map((m, i) => `<div class="msg role-${esc(m.role)}" data-msg="${i}"><span class="badge">${esc(m.role)}</span>` +
      `${m.tool_call_id ? ` <code>${esc(m.tool_call_id)}</code>` : ""}<div class="text">${esc(contentText(m.content))}</div>` +
      `${m.tool_calls ? `<pre class="json">${esc(JSON.stringify(m.tool_calls, null, 1))}</pre>` : ""}</div>`).join(""));
  }
  if (q.prompt !== undefined && q.prompt !== null) parts.push(`<div class="msg"><span class="badge">prompt</span><div class="text">${esc(contentText(q.prompt))}</div></div>`);
  if (q.tools) parts.push(`<div>tools offered: ${q.tools.map((t) => `<code>${esc((t.function || t).name || "?")}</code>`).join(" ")}` +
    ` <details><summary>schemas</summary><pre class="json">${esc(JSON.stringify(q.tools, null, 1))}</pre></details></div>`);
  else parts.push(`<div class="muted">no tools offered</div>`);
  const settings = Object.entries(q.settings || {});
  parts.push(`<div class="settings">${q.model ? `model <code>${esc(q.model)}</code> · ` : ""}` +
    (settings.length ? settings.map(([k, v]) => `${esc(k)} <code>${esc(typeof v === "object" ? JSON.stringify(v) : v)}</code>`).join(" · ") : "no sampling fields") + `</div>`);
  const where = q.line ? `${esc(q.source)} line ${q.line}` : esc(q.source || "");
  const rb = q.rebuilt;
  if (rb) {
    const check = rb.verified === true ? "matches the fingerprint recorded from what was sent"
      : rb.verified === false ? "does NOT match the fingerprint recorded from what was sent" : "no recorded fingerprint to check it against";
    parts.unshift(`<div class="rebuilt-note muted">rebuilt from checkpoint <code>${esc(rb.checkpoint_id || "")}</code> (${esc(rb.node || "")} node) by the run's own code; ${check}</div>`);
  }
  const title = rb ? `<span class="badge rebuilt">rebuilt from checkpoint</span> request` : "request as sent";
  return `<details class="request${rb ? " rebuilt" : ""}"><summary>${title} <span class="muted">(${esc(q.endpoint || "")}; ${where})</span></summary>${parts.join("")}</details>`;
}

/* A reply as received: content, reasoning, tool calls, finish reason. */
function replyHTML(r) {
  const parts = [`<div class="text">${r.content ? esc(r.content) : `<span class="muted">(no content)</span>`}</div>`];
  if (r.tool_calls && r.tool_calls.length) parts.push(`<div>tool calls</div><pre class="json">${esc(JSON.stringify(r.tool_calls, null, 1))}</pre>`);
  if (r.reasoning) parts.push(`<div>reasoning</div><div class="reasoning">${esc(r.reasoning)}</div>`);
  parts.push(`<div class="muted">finish ${esc(r.finish_reason || "?")}</div>`);
  return `<details class="reply"><summary>reply as received</summary>${parts.join("")}</details>`;
}

function ckptHTML(m, treeId) {
  const acts = Object.entries(m.actions || {}).map(([a, n]) => `${actionBadge(a)}×${n}`).join(" ");
  const branches = m.branches ? ` · <a href="#/tree/${encodeURIComponent(treeId)}" data-ckpt="${esc(m.checkpoint_id)}">${m.branches} branches</a> ${acts}` : "";
  return `<div class="ckpt">checkpoint <b>${esc(m.boundary || "?")}</b> <code>${esc(m.checkpoint_id)}</code>${branches}</div>`;
}

function executionHTML(v, compact) {
  if (v.error) return `<div class="card errors">${esc(v.error)}</div>`;
  const r = v.record, row = v.row;
  const html = [];
  const lineage = (v.lineage || []).map((l) => `<a href="#/execution/${encodeURIComponent(l.id)}">${short(l.id)}</a>${l.branch ? " " + actionBadge(l.branch) : ""} @${esc(l.boundary)} →`).join(" ");
  html.push(`<div class="card"><h2>${esc(r.question)}</h2>`);
  if (lineage) html.push(`<div class="muted">forked from ${lineage} ${actionBadge(row.branch)} repeat ${row.repeat}</div>`);
  html.push(`<dl class="kv"><dt>execution</dt><dd><code>${esc(r.execution_id)}</code> <span class="muted">${esc(row.file)} line ${row.line}</span></dd>` +
    `<dt>condition</dt><dd><code>${esc(row.condition)}</code></dd>` +
    `<dt>question</dt><dd>${esc(r.question_id)} · ${r.answerable ? "answerable" : "unanswerable " + esc(r.category || "")}` +
    `${r.gold_answers && r.gold_answers.length ? " · gold: " + r.gold_answers.map(esc).join(" | ") : ""}</dd>` +
    `<dt>final answer</dt><dd><b>${esc(r.final_answer ?? "(none)")}</b> · status ${esc(r.status)}${r.error ? " · " + esc(r.error) : ""}</dd>` +
    `<dt>outcome</dt><dd>${outcomeBadge(v.outcome)} <span class="muted">judge ${esc(v.decided_by)}</span></dd>` +
    `<dt>TPC cost</dt><dd>${num(v.cost.total, 1)} = ${num(v.cost.generated)} generated + ${num(v.cost.input, 1)} input (${v.cost.lam}·${num(r.input_tokens)}) + ${num(v.cost.search)} search (${v.cost.mu}·${r.search_calls})</dd>` +
    `<dt>totals</dt><dd>${r.search_calls} searches · ${num(r.input_tokens)} in · ${num(r.output_tokens)} out · ${num(r.reasoning_tokens)} reasoning · ${num(r.wall_s, 2)} s</dd>`);
  if (r.prefix) html.push(`<dt>before the fork</dt><dd>${num(r.prefix.steps)} steps · ${num(r.prefix.search_calls)} searches · ` +
    `${num(r.prefix.input_tokens)} in · ${num(r.prefix.output_tokens)} out (the parent's, not counted here)</dd>`);
  if (r.sampling) html.push(`<dt>sampling</dt><dd>${Object.entries(r.sampling).map(([k, x]) => `${esc(k)} ${esc(x)}`).join(" · ")}</dd>`);
  if (v.branches) html.push(`<dt>fork tree</dt><dd><a href="#/tree/${encodeURIComponent(r.execution_id)}">${v.branches} branches from its checkpoints</a></dd>`);
  html.push(`</dl>`);
  if (v.judgments.length && !compact) {
    const line = (j) => `<tr><td>${esc(j.judge)}</td><td>${esc(j.kind)}</td><td><span class="badge ev-${esc(j.label)}">${esc(j.label)}</span></td>` +
      `<td><code>${esc(j.doc_id || "")}</code></td><td class="muted">${esc((j.raw || "").slice(0, 200))}</td></tr>`;
    const head = `<tr><th>judge</th><th>kind</th><th>label</th><th>document</th><th>raw</th></tr>`;
    const evidence = v.judgments.filter((j) => j.kind === "evidence");
    html.push(`<h3>Judge labels</h3><table>${head}${v.judgments.filter((j) => j.kind !== "evidence").map(line).join("")}</table>`);
    const outputs = v.judgments.filter((j) => (j.raw || j.reasoning) && j.kind !== "evidence");
    if (outputs.length) {
      html.push(`<h3>Judge outputs</h3>` + outputs.map((j) => `<div class="judge-output" data-judge="${esc(j.judge)}"><b>${esc(j.judge)}</b> ${esc(j.kind)} ` +
        `<span class="badge">${esc(j.label)}</span>${j.model ? ` <span class="muted">model ${esc(j.model)}${j.prompt_version ? ", prompt " + esc(j.prompt_version) : ""}</span>` : ""}` +
        `<div>raw output</div><div class="reasoning raw-output">${esc(j.raw || "")}</div>` +
        (j.reasoning ? `<div>reasoning</div><div class="reasoning judge-reasoning">${esc(j.reasoning)}</div>` : "") + `</div>`).join(""));
    }
    if (evidence.length) {
      html.push(`<details><summary>${evidence.length} evidence labels (also on the passages below)</summary><table>${head}${evidence.map(line).join("")}</table></details>`);
    }
  } else if (v.judgments.length) {
    html.push(`<div>${v.judgments.filter((j) => j.kind !== "evidence").map((j) => `<span class="badge">${esc(j.judge)}:${esc(j.kind)}=${esc(j.label)}</span>`).join(" ")}</div>`);
  }
  html.push(`</div><h3>Timeline</h3><div class="timeline">`);
  const at = {};
  const unplaced = [];
  for (const m of v.checkpoints) { if (m.position === null || m.position === undefined) unplaced.push(m); else (at[m.position] = at[m.position] || []).push(m); }
  v.steps.forEach((s, i) => { (at[i] || []).forEach((m) => html.push(ckptHTML(m, r.execution_id))); html.push(stepHTML(s)); });
  (at[v.steps.length] || []).forEach((m) => html.push(ckptHTML(m, r.execution_id)));
  if (!v.steps.length) html.push(`<p class="muted">no steps recorded</p>`);
  html.push(`</div>`);
  if (unplaced.length) {
    html.push(`<h3>Checkpoints</h3>${v.checkpoint_note ? `<p class="muted">${esc(v.checkpoint_note)}</p>` : ""}` + unplaced.map((m) => ckptHTML(m, r.execution_id)).join(""));
  }
  if (v.requests_note) html.push(`<p class="muted" data-requests-note>${esc(v.requests_note)}</p>`);
  if ((v.unplaced_requests || []).length) html.push(`<h3>Requests</h3>` + v.unplaced_requests.map(requestHTML).join(""));
  return html.join("");
}

async function renderExecution(id) {
  main().innerHTML = `<p class="muted">loading ${short(id)}…</p>`;
  try { main().innerHTML = `<p><a href="#/">← executions</a></p>` + executionHTML(await api.execution(id), false); }
  catch (e) { main().innerHTML = `<p><a href="#/">← executions</a></p><div class="errors">${esc(e.message)}</div>`; }
}

async function renderCompare(a, b) {
  main().innerHTML = `<p class="muted">loading…</p>`;
  try {
    const [va, vb] = await Promise.all([api.execution(a), api.execution(b)]);
    main().innerHTML = `<p><a href="#/">← executions</a></p><h2>Side by side</h2><div class="side"><div id="bp-left">${executionHTML(va, true)}</div>` +
      `<div id="bp-right">${executionHTML(vb, true)}</div></div>` + requestsDiffHTML(va, vb);
  } catch (e) { main().innerHTML = `<div class="errors">${esc(e.message)}</div>`; }
}

function requestsOf(v) {
  if (v.error) return [];
  return (v.steps || []).filter((s) => s.request).map((s) => s.request).concat(v.unplaced_requests || []);
}

/* Line diff (longest common subsequence) of two texts: [["=", line] | ["-", line] | ["+", line]]. */
function diffLines(a, b) {
  const x = a.split("\n"), y = b.split("\n"), n = x.length, m = y.length;
  const L = Array.from({ length: n + 1 }, () => new Int32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push(["=", x[i]]); i++; j++; }
    else if (L[i + 1][j] >= L[i][j + 1]) out.push(["-", x[i++]]);
    else out.push(["+", y[j++]]);
  }
  while (i < n) out.push(["-", x[i++]]);
  while (j < m) out.push(["+", y[j++]]);
  return out;
}

function requestText(q) { return JSON.stringify(q.body, null, 1); }

/* The two executions' requests, k-th against k-th, as a line diff of their bodies as sent. */
function requestsDiffHTML(va, vb) {
  const qa = requestsOf(va), qb = requestsOf(vb);
  if (!qa.length && !qb.length) return `<h3>Requests diffed</h3><p class="muted">neither execution has its requests (run with --log-requests)</p>`;
  const html = [`<h3>Requests diffed <span class="muted">(left − / right +, request k against request k)</span></h3>`];
  for (let k = 0; k < Math.max(qa.length, qb.length); k++) {
    const d = diffLines(qa[k] ? requestText(qa[k]) : "", qb[k] ? requestText(qb[k]) : "");
    const changed = d.filter((e) => e[0] !== "=").length;
    html.push(`<details class="diff" data-request="${k}"${changed ? " open" : ""}><summary>request ${k + 1}: ${changed ? `${changed} lines differ` : "identical"}</summary><pre class="json">` +
      d.map(([t, line]) => t === "=" ? `<span class="same">  ${esc(line)}</span>` : `<span class="${t === "-" ? "del" : "add"}">${t} ${esc(line)}</span>`).join("") + `</pre></details>`);
  }
  return html.join("");
}

// ---------------------------------------------------------------------------------------------
// Fork tree
// ---------------------------------------------------------------------------------------------

function rateHTML(a) {
  if (!a) return `<span class="muted">–</span>`;
  const ci = a.interval;
  const box = ci ? `<span class="barbox"><span class="bar" style="width:${(a.rate || 0) * 80}px"></span>` +
    `<span class="ci" style="left:${ci[0] * 80}px;width:${(ci[1] - ci[0]) * 80}px"></span></span>` : "";
  return `<span class="rate">${a.rate === null ? "–" : a.rate.toFixed(2)}</span> ${box} ` +
    `<span class="muted">${ci ? `95% [${ci[0].toFixed(2)}, ${ci[1].toFixed(2)}]` : ""} n=${a.n}${a.incomplete ? ` (+${a.incomplete} incomplete)` : ""}</span>`;
}

function branchesHTML(branches, limit) {
  return branches.slice(0, limit).map((b) => `<div><input type="checkbox" data-pick="${esc(b.id)}"> <a href="#/execution/${encodeURIComponent(b.id)}" data-branch="${esc(b.id)}">${esc(b.label || "#" + b.repeat)}</a> ` +
    `${esc(b.answer || "(no answer)")} ${outcomeBadge(b.outcome)} <span class="muted">${b.searches} searches · ${num(b.tokens)} tok</span>` +
    `${b.has_branches ? ` · <a href="#/tree/${encodeURIComponent(b.id)}">its own forks</a>` : ""}</div>`).join("");
}

function treeHTML(t) {
  const r = t.row;
  const html = [`<p><a href="#/">← executions</a> · <a href="#/execution/${encodeURIComponent(r.id)}">timeline of this execution</a></p>`];
  html.push(`<div class="card"><h2>Fork tree: ${esc(r.question)}</h2><div><code>${esc(r.id)}</code> · <code>${esc(r.condition)}</code> · ` +
    `${outcomeBadge(r.outcome)} · answer <b>${esc(r.answer)}</b></div>` +
    `<div class="muted">success = reward "${esc(t.reward)}" under judge ${esc(t.judge)}; Δ = p_S − p_T with T/S = THINK/SEARCH at initial and after_search_k, ` +
    `${esc(t.roles.pending_query.join("/"))} at pending_query; intervals: Wilson 95% over the repeats</div></div>`);
  if (t.value) {
    const v = t.value, names = Object.keys(v.gain_risk || {});
    html.push(`<div class="card"><b>value.json</b> (whole study): ${v.states ? `${v.states.scored} scored states of ${v.states.forked_states}` : ""}` +
      (names.length ? `<table><tr><th>forecaster</th><th class="num">Brier</th><th class="num">gain risk L</th><th class="num">R²_Δ</th></tr>` +
        names.map((n) => `<tr><td>${esc(n)}</td><td class="num">${num(v.brier[n], 4)}</td><td class="num">${num(v.gain_risk[n], 4)}</td><td class="num">${num(v.gain_r2[n], 3)}</td></tr>`).join("") + `</table>` : "") + `</div>`);
  }
  if (!t.states.length) html.push(`<p class="muted">No branches were forked from this execution.</p>`);
  for (const s of t.states) {
    const d = s.delta;
    html.push(`<div class="state" data-state="${esc(s.checkpoint_id)}"><div class="head"><b>${esc(s.boundary)}</b> <code>${esc(s.checkpoint_id)}</code>` +
      ` <span>Δ = p_${esc(s.s_action)} − p_${esc(s.t_action)} = <span class="${d > 0 ? "delta-pos" : d < 0 ? "delta-neg" : ""}">${d === null ? "–" : (d >= 0 ? "+" : "") + d.toFixed(2)}</span></span>` +
      ` <span class="muted">${s.scored ? "scored by value (both roles, 2+ repeats)" : "not scored by value (needs both roles with 2+ repeats)"}</span></div>` +
      (s.fork_note ? `<div class="muted" data-fork-note>${esc(s.fork_note)}</div>` : ""));
    if (s.forecasts.length) {
      const dev = s.forecasts.some((f) => f.dev) ? ` <span class="muted">(a development state: fitted forecasters saw its outcomes)</span>` : "";
      html.push(`<details class="forecasts"${s.forecasts.length <= 3 ? " open" : ""}><summary>${s.forecasts.length} forecast${s.forecasts.length > 1 ? "s" : ""} for this state${dev}</summary>` +
        `<table><tr><th>forecaster</th><th class="num">q_T</th><th class="num">q_S</th><th class="num">forecast gain q_S − q_T</th></tr>` +
        s.forecasts.map((f) => `<tr><td>${esc(f.name)}</td><td class="num">${f.q_think.toFixed(2)}</td><td class="num">${f.q_search.toFixed(2)}</td>` +
          `<td class="num">${(f.gain >= 0 ? "+" : "") + f.gain.toFixed(2)}</td></tr>`).join("") + `</table></details>`);
    }
    html.push(`<table><tr><th>action</th><th>success rate</th><th>repeats (answer · outcome)</th></tr>`);
    for (const [action, a] of Object.entries(s.actions)) {
      html.push(`<tr data-action="${esc(action)}"><td>${actionBadge(a.action || action)}${a.fork_settings ? ` <span class="muted">${esc(a.fork_settings)}</span>` : ""}${action === s.t_action ? " <span class='muted'>T</span>" : action === s.s_action ? " <span class='muted'>S</span>" : ""}</td><td>${rateHTML(a)}</td><td>` +
        branchesHTML(a.branches, state.expanded.has(s.checkpoint_id + "|" + action) ? a.branches.length : BRANCHES_SHOWN) +
        (a.branches.length > BRANCHES_SHOWN && !state.expanded.has(s.checkpoint_id + "|" + action)
          ? `<button type="button" data-more="${esc(s.checkpoint_id + "|" + action)}">show all ${a.branches.length} repeats</button>` : "") + `</td></tr>`);
    }
    html.push(`</table></div>`);
  }
  html.push(`<button type="button" id="bp-compare-branches" disabled>compare the 2 ticked branches side by side</button>`);
  return html.join("");
}

async function renderTree(id, again) {
  if (!again) { main().innerHTML = `<p class="muted">loading the fork tree…</p>`; state.expanded = new Set(); }
  let t;
  try { t = again && state.tree && state.tree.row.id === id ? state.tree : await api.tree(id); state.tree = t; main().innerHTML = treeHTML(t); }
  catch (e) { main().innerHTML = `<p><a href="#/">← executions</a></p><div class="errors">${esc(e.message)}</div>`; return; }
  main().querySelectorAll("button[data-more]").forEach((b) => { b.onclick = () => { state.expanded.add(b.dataset.more); renderTree(id, true); }; });
  const picked = new Set();
  const button = document.getElementById("bp-compare-branches");
  main().querySelectorAll("input[data-pick]").forEach((cb) => {
    cb.onchange = () => {
      if (cb.checked) picked.add(cb.dataset.pick); else picked.delete(cb.dataset.pick);
      button.disabled = picked.size !== 2;
    };
  });
  button.onclick = () => { const [a, b] = [...picked]; location.hash = `#/compare/${encodeURIComponent(a)}/${encodeURIComponent(b)}`; };
}

// ---------------------------------------------------------------------------------------------
// Routing
// ---------------------------------------------------------------------------------------------

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("?")[0].split("/").map(decodeURIComponent);
  if (parts[0] === "execution" && parts[1]) return renderExecution(parts[1]);
  if (parts[0] === "tree" && parts[1]) return renderTree(parts[1]);
  if (parts[0] === "compare" && parts[1] && parts[2]) return renderCompare(parts[1], parts[2]);
  renderTable();
}

window.addEventListener("hashchange", route);
(async function start() {
  try {
    state.runs = (await api.runs()).runs;
    state.run = state.runs[0];
    state.columns = state.run.columns;
    const rows = loadRows();  // every run's rows at once
    renderHeader();
    route();
    await rows;
  } catch (e) {
    main().innerHTML = `<div class="errors">${esc(e.message)}</div>`;
  }
})();
