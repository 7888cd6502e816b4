// threadbase web: every root session's tree, live. Plain JavaScript, no build step.
//
// The list is virtual: the server says how many rows each tree has (/api/trees), the page
// sizes a spacer to all of them and draws only the rows in view, fetching their pages
// (/api/rows, PAGE rows each, an index range on the server) as they come into view. A
// server-sent `change` event (/api/events, driven by the database's change counter) makes the
// page read again only what it shows: the trees, the pages in view, the open thread.
'use strict';

const ROW_H = 24;
const PAGE = 200;
const OVERSCAN = 10;
// Pages kept while out of view; the rest are dropped (a page open for hours stays small).
const KEEP_PAGES = 40;

// The actions the detail offers, in order. A new one (say, answering a child's question) is
// an entry here plus its case on the server (serve/web/api.rs, ActionKind).
const ACTIONS = {
  stop: { label: 'Stop', confirm: (p) => `Stop ${p}? Its process group gets SIGTERM, then SIGKILL.`, ok: 'Stop' },
  force_stop: { label: 'Force stop', confirm: (p) => `FORCE-STOP ${p}? Its process group gets SIGKILL now.`, ok: 'Force stop', danger: true },
  send: { label: 'Send…', form: true },
  archive: { label: 'Archive' },
  unarchive: { label: 'Unarchive' },
  answer: { label: 'Answer' },
  merge: { label: 'Merge…', confirm: (p) => `Merge ${p}'s worktree into the main tree's current branch? Its uncommitted work is first committed on its branch; a conflict, or uncommitted changes to the same files in the main tree, change nothing.`, ok: 'Merge' },
};

// An isolated thread's worktree (THREADBASE_ISOLATION=worktree): where, which branch, and
// what it changed since its base commit.
function worktreeBlock(d) {
  const w = d.worktree;
  if (!w) return '';
  return `<h3>Worktree</h3><div class="meta" id="worktree-path"><code>${esc(w.path)}</code> · branch <code>${esc(w.branch)}</code> · from ${esc((w.baseCommit || '').slice(0, 12))}${w.removedAt ? ' · removed ' + esc(w.removedAt) : ''}</div>` +
    `<pre id="worktree-diff" class="diff">${esc(w.diff)}${w.diffCut ? '\n… (cut; run threadbase diff for all of it)' : ''}</pre>`;
}

// A child's question waiting for an answer (THREADBASE_UI=parent): what it asks and the
// answers its kind takes.
function questionBlock(q) {
  if (!q) return '';
  let controls;
  if (q.kind === 'confirm') {
    controls = `<button type="button" id="answer-yes" data-answer="true">Yes</button> <button type="button" id="answer-no" data-answer="false">No</button>`;
  } else if (q.kind === 'select') {
    controls = (q.options || []).map((o, i) => `<button type="button" id="answer-option-${i}" data-answer="${esc(JSON.stringify(o))}">${esc(o)}</button>`).join(' ');
  } else {
    controls = `<textarea id="answer-text" rows="${q.kind === 'editor' ? 6 : 1}"></textarea> <button type="button" id="answer-go">Answer</button>`;
  }
  return `<div class="question" id="question"><h3>Question (${esc(q.kind)})</h3>` +
    (q.title ? `<div class="meta"><b>${esc(q.title)}</b></div>` : '') +
    (q.message ? `<pre>${esc(q.message)}</pre>` : '') +
    `<div class="actions">${controls}</div></div>`;
}

const $ = (id) => document.getElementById(id);
const st = {
  trees: [],
  collapsed: new Set(),
  pages: new Map(), // `${root}\u0000${n}` -> {rows, gen}
  loading: new Set(),
  gen: 0,
  filter: '',
  selected: null,
  detail: null,
  command: null,
  usageOpen: false,
  loaded: false,
  // The Send box's draft per thread (id -> {text, mode}): a box belongs to the thread it was
  // opened for, and switching threads never carries a message to another one.
  drafts: new Map(),
};
// Read by the tests: when the first rows were painted, renders, change events seen.
window.tb = { firstPaint: null, renders: 0, changes: 0, lastEventId: null, errors: [] };
function noteError(e) {
  tb.errors.push(String(e.message || e));
  if (tb.errors.length > 20) tb.errors.shift();
}

function esc(s) {
  return String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}
function compact(n) {
  n = Number(n || 0);
  if (n < 1000) return String(n);
  if (n < 1e6) return (n / 1e3).toFixed(n < 1e4 ? 2 : 1).replace(/\.?0+$/, '') + 'k';
  return (n / 1e6).toFixed(2).replace(/\.?0+$/, '') + 'M';
}
function usd(x) { return '$' + Number(x || 0).toFixed(4); }
function ago(iso) {
  if (!iso) return '';
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return Math.floor(s) + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm';
  if (s < 86400) return Math.floor(s / 3600) + 'h';
  return Math.floor(s / 86400) + 'd';
}

async function api(path, init) {
  const res = await fetch(path, Object.assign({ credentials: 'same-origin' }, init || {}));
  let body = null;
  try { body = await res.json(); } catch (_) { body = null; }
  if (!res.ok) {
    const msg = body && body.error ? body.error.message : `${res.status} ${res.statusText}`;
    const err = new Error(msg);
    err.status = res.status;
    throw err;
  }
  return body;
}

function setStatus(text, live) {
  const s = $('status');
  s.textContent = text;
  s.className = 'status' + (live ? ' live' : '');
}

// ---- the list -------------------------------------------------------------------------

function filterQuery() {
  const p = new URLSearchParams();
  for (const k of ['state', 'visibility', 'contract']) {
    const v = $('f-' + k).value;
    if (v !== 'all') p.set(k, v);
  }
  const m = $('f-match').value.trim();
  if (m) p.set('match', m);
  const h = $('f-host').value;
  if (h) p.set('host', h);
  return p.toString();
}

// Each tree is a header line and, unless collapsed, its rows.
function layout() {
  const segs = [];
  let at = 0;
  for (const t of st.trees) {
    const rows = st.collapsed.has(t.rootSession) ? 0 : t.rows;
    segs.push({ tree: t, start: at, rows });
    at += 1 + rows;
  }
  return { segs, total: at };
}

function itemAt(segs, i) {
  let lo = 0, hi = segs.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (segs[mid].start <= i) lo = mid; else hi = mid - 1;
  }
  const s = segs[lo];
  return { tree: s.tree, row: i - s.start - 1 };
}

const pageKey = (root, n) => root + '\u0000' + n;

function rowHtml(r, i) {
  const sel = st.selected === r.id ? ' sel' : '';
  const live = r.status === 'live' ? ' live' : '';
  const arch = r.archived ? ' arch' : '';
  const sub = r.subtree.threads > 1
    ? `${r.subtree.threads} · ${compact(r.subtree.tokens)} · ${usd(r.subtree.costUsd)}` : '';
  return `<div class="row thread${sel}${live}${arch}" style="top:${i * ROW_H}px" data-id="${esc(r.id)}" data-path="${esc(r.path)}" data-state="${esc(r.state)}" title="${esc(r.path)} · ${esc(r.id)}${r.host ? ' · host ' + esc(r.host) : ''}">` +
    `<span class="c-path" style="padding-left:${(r.level - 1) * 16}px">${esc(r.path)}</span>` +
    `<span class="c-task" title="${esc(r.task)}">${esc(r.task)}</span>` +
    `<span class="c-state">${esc(r.state)}${r.host ? `<span class="host"> · ${esc(r.host)}</span>` : ''}</span><span class="c-phase">${esc(r.phase)}</span>` +
    `<span class="c-exit">${esc(r.exitKind || '')}</span><span class="c-age">${ago(r.createdAt)}</span>` +
    `<span class="c-act">${ago(r.lastEventAt)}</span><span class="c-tok">${compact(r.tokens)}</span>` +
    `<span class="c-cost">${usd(r.costUsd)}</span><span class="c-sub">${sub}</span></div>`;
}

function treeHtml(t, i) {
  const open = !st.collapsed.has(t.rootSession);
  const name = t.name ? ` “${esc(t.name)}”` : '';
  const cwd = t.cwd ? ` · ${esc(t.cwd)}` : '';
  const started = t.startedAt ? ` · started ${esc(t.startedAt.slice(0, 16).replace('T', ' '))}` : '';
  const count = t.rows === t.threads ? `${t.threads} thread${t.threads === 1 ? '' : 's'}` : `${t.rows} of ${t.threads} threads`;
  return `<div class="row tree" style="top:${i * ROW_H}px" data-root="${esc(t.rootSession)}">` +
    `<span class="c-path">${open ? '▾' : '▸'} session ${esc(t.rootSession)}${name}${cwd}${started} · ${count} · ${compact(t.total.tokens)} tokens · ${usd(t.total.costUsd)}</span></div>`;
}

let drawQueued = false;
function draw() {
  if (drawQueued) return;
  drawQueued = true;
  requestAnimationFrame(() => { drawQueued = false; render(); });
}

function render() {
  const list = $('list');
  const { segs, total } = layout();
  $('spacer').style.height = total * ROW_H + 'px';
  const first = Math.max(0, Math.floor(list.scrollTop / ROW_H) - OVERSCAN);
  const last = Math.min(total - 1, Math.ceil((list.scrollTop + list.clientHeight) / ROW_H) + OVERSCAN);
  const html = new Map();
  const need = new Map();
  let drewRow = false;
  for (let i = first; i <= last && segs.length; i++) {
    const it = itemAt(segs, i);
    if (it.row < 0) { html.set(i, treeHtml(it.tree, i)); continue; }
    const n = Math.floor(it.row / PAGE);
    const key = pageKey(it.tree.rootSession, n);
    const page = st.pages.get(key);
    const r = page && page.rows[it.row % PAGE];
    if (!page || page.gen !== st.gen) need.set(key, [it.tree.rootSession, n]);
    if (r) { html.set(i, rowHtml(r, i)); drewRow = true; }
    else html.set(i, `<div class="row placeholder" style="top:${i * ROW_H}px"><span class="c-path">…</span></div>`);
  }
  if (!segs.length) html.set(0, `<div class="row placeholder" style="top:0"><span class="c-path">${st.loaded ? (st.filter ? '(no thread matches)' : '(no threads)') : 'loading…'}</span></div>`);
  patch(html);
  tb.renders++;
  if (drewRow && tb.firstPaint === null) {
    requestAnimationFrame(() => { if (tb.firstPaint === null) tb.firstPaint = performance.now(); });
  }
  for (const [key, [root, n]] of need) loadPage(key, root, n);
}

// The lines on screen, by position: a line whose markup did not change keeps its element, so
// a click is never lost to a redraw and a change redraws only what changed.
const drawn = new Map(); // position -> {el, html}
function patch(html) {
  const box = $('rows');
  for (const [i, d] of drawn) {
    if (!html.has(i)) { d.el.remove(); drawn.delete(i); }
  }
  const tmp = document.createElement('div');
  for (const [i, h] of html) {
    const cur = drawn.get(i);
    if (cur && cur.html === h) continue;
    tmp.innerHTML = h;
    const el = tmp.firstElementChild;
    if (cur) cur.el.replaceWith(el); else box.appendChild(el);
    drawn.set(i, { el, html: h });
  }
}

async function loadPage(key, root, n) {
  if (st.loading.has(key)) return;
  st.loading.add(key);
  const gen = st.gen;
  const filter = st.filter;
  try {
    const q = new URLSearchParams(filter);
    q.set('root', root); q.set('offset', n * PAGE); q.set('limit', PAGE);
    const doc = await api('/api/rows?' + q.toString());
    if (filter !== st.filter) return;
    st.pages.set(key, { rows: doc.rows, gen });
    trimPages();
    draw();
  } catch (e) {
    noteError(e);
    setStatus(e.message, false);
  } finally {
    st.loading.delete(key);
    // A change came while it loaded: this page is old already; the next draw asks again.
    if (gen !== st.gen) draw();
  }
}

function trimPages() {
  if (st.pages.size <= KEEP_PAGES) return;
  const list = $('list');
  const { segs } = layout();
  const keep = new Set();
  const first = Math.floor(list.scrollTop / ROW_H), last = first + Math.ceil(list.clientHeight / ROW_H);
  for (let i = first; i <= last && segs.length; i += 1) {
    const it = itemAt(segs, i);
    if (it.row >= 0) keep.add(pageKey(it.tree.rootSession, Math.floor(it.row / PAGE)));
  }
  for (const k of st.pages.keys()) {
    if (st.pages.size <= KEEP_PAGES) break;
    if (!keep.has(k)) st.pages.delete(k);
  }
}

async function loadTrees() {
  const q = st.filter;
  const doc = await api('/api/trees' + (q ? '?' + q : ''));
  if (q !== st.filter) return;
  st.trees = doc.trees;
  st.loaded = true;
  renderNeeds(doc.needs || []);
  renderHosts(doc.hosts || []);
}

// The host filter, on a database more than one host uses (issue 50).
function renderHosts(hosts) {
  const sel = $('f-host');
  const opts = '<option value="">every host</option>' + hosts.map((h) => `<option value="${esc(h)}">host ${esc(h)}</option>`).join('');
  if (sel.dataset.opts !== opts) {
    const keep = sel.value;
    sel.innerHTML = opts;
    sel.dataset.opts = opts;
    sel.value = hosts.includes(keep) ? keep : '';
  }
  sel.hidden = hosts.length < 2 && !sel.value;
}

// ---- needs you first --------------------------------------------------------------------

// What each word asks of the person: a button the page can carry out, or the command to run.
const NEED_ACTIONS = {
  asking: { label: 'Answer', open: true },
  failed: { label: 'Read the error', open: true, scroll: 'stderr' },
  stalled: { label: 'Stop', stop: true },
  unreachable: { hint: (n) => `threadbase host forget ${n.host || 'HOST'}` },
  owner_gone: { hint: () => 'threadbase restore' },
};
const NEED_WORDS = { asking: 'asking', failed: 'failed', stalled: 'stalled', unreachable: 'unreachable', owner_gone: 'owner gone' };

let needsHtml = null;
function renderNeeds(needs) {
  st.needs = needs;
  document.title = needs.length ? `(${needs.length}) threadbase` : 'threadbase';
  const html = needs.map((n) => {
    const a = NEED_ACTIONS[n.attention] || {};
    const act = a.hint
      ? `<span>run <code>${esc(a.hint(n))}</code></span>`
      : `<button type="button" data-need="${esc(n.id)}">${esc(a.label)}</button>`;
    return `<div class="need" data-id="${esc(n.id)}" data-path="${esc(n.path)}" data-attention="${esc(n.attention)}">` +
      `<span class="n-word">${esc(NEED_WORDS[n.attention] || n.attention)}</span>` +
      `<span class="n-path" data-open="${esc(n.id)}">${esc(n.path)}</span>` +
      `<span class="n-detail" title="${esc(n.detail || '')}">${esc(n.detail || '')}${n.since ? ' · since ' + esc(n.since.slice(0, 19).replace('T', ' ')) : ''}${n.host ? ' · host ' + esc(n.host) : ''}</span>${act}</div>`;
  }).join('');
  if (html === needsHtml) return;
  needsHtml = html;
  $('needs-list').innerHTML = html;
  $('needs-count').textContent = needs.length ? `(${needs.length})` : '';
  $('needs').hidden = needs.length === 0;
}

function needClick(e) {
  const opener = e.target.closest('[data-open]');
  if (opener) { select(opener.dataset.open); return; }
  const b = e.target.closest('button[data-need]');
  if (!b) return;
  const n = (st.needs || []).find((x) => x.id === b.dataset.need);
  if (!n) return;
  const a = NEED_ACTIONS[n.attention];
  if (a.stop) { act('stop', null, { id: n.id, path: n.path }); return; }
  select(n.id, a.scroll);
}

// ---- refresh on change ----------------------------------------------------------------

let refreshing = false, again = false;
async function refresh() {
  if (refreshing) { again = true; return; }
  refreshing = true;
  try {
    do {
      again = false;
      st.gen++;
      await loadTrees();
      draw();
      const jobs = [];
      if (st.selected) jobs.push(loadDetail(st.selected));
      if (st.usageOpen) jobs.push(loadUsage());
      if (st.timelineOpen) jobs.push(loadTimeline());
      if (st.command) jobs.push(loadCommand());
      await Promise.all(jobs);
    } while (again);
  } catch (e) {
    noteError(e);
    setStatus(e.status === 401 ? 'token needed: open the address threadbase web printed' : e.message, false);
  } finally {
    refreshing = false;
  }
}

// The event stream. While the server is away the browser retries by itself (`retry: 1000`);
// a stream the browser gave up on (an answer other than the stream: a 401 after a restart
// with another token, a 503) is asked for again here after asking why: a 401 means the token
// changed, which only a new address mends, so the page says so and keeps asking, quietly.
let source = null;
function connect() {
  const es = new EventSource('/api/events');
  source = es;
  es.addEventListener('open', () => {
    tb.connects = (tb.connects || 0) + 1;
    setStatus('live', true);
    $('token-changed').hidden = true;
  });
  es.addEventListener('change', (e) => {
    tb.changes++;
    tb.lastEventId = e.lastEventId;
    refresh();
  });
  es.addEventListener('error', () => {
    if (es.readyState !== EventSource.CLOSED) { setStatus('reconnecting…', false); return; }
    es.close();
    whyClosed().then((why) => {
      if (why === 'token') {
        setStatus('token changed', false);
        $('token-changed').hidden = false;
      } else setStatus('reconnecting…', false);
      setTimeout(() => { if (source === es) connect(); }, 2000);
    });
  });
}

// Why the stream closed: 'token' when the server answers but refuses this page's token.
async function whyClosed() {
  try {
    const res = await fetch('/api/trees?state=live', { credentials: 'same-origin' });
    return res.status === 401 ? 'token' : 'other';
  } catch (_) { return 'away'; }
}

// ---- the detail -----------------------------------------------------------------------

async function loadDetail(id) {
  try {
    const d = await api('/api/thread?id=' + encodeURIComponent(id));
    if (st.selected !== id) return;
    st.detail = d;
    renderDetail();
  } catch (e) {
    if (st.selected === id) { $('detail').innerHTML = `<p class="result failed">${esc(e.message)}</p>`; }
  }
}

function renderDetail() {
  const d = st.detail;
  const el = $('detail');
  el.hidden = false;
  const s = d.snapshot || {};
  const exit = s.exit ? ` · exit ${esc(s.exit.kind || '')}${s.exit.code != null ? ' ' + esc(s.exit.code) : ''}` : '';
  const keepAnswer = el.querySelector('#answer-text');
  const answerDraft = keepAnswer ? keepAnswer.value : '';
  saveDraft();
  const kept = st.drafts.get(d.id);
  const buttons = d.actions.map((a) => {
    const spec = ACTIONS[a.action];
    if (!spec) return '';
    return `<button type="button" id="act-${a.action}" data-action="${a.action}"${a.enabled ? '' : ' disabled'} class="${spec.danger ? 'danger' : ''}" title="${esc(a.why || '')}">${esc(spec.label)}</button>`;
  }).join('');
  const events = (d.events || []).map((e) => {
    const data = e.data && typeof e.data === 'object' ? JSON.stringify(e.data) : String(e.data ?? '');
    return `<tr><td>${esc(e.seq)}</td><td>${esc((e.at || '').slice(11, 23))}</td><td>${esc(e.type)}</td><td class="data">${esc(data.length > 300 ? data.slice(0, 300) + '…' : data)}</td></tr>`;
  }).join('');
  el.innerHTML =
    `<h2 id="detail-path">${esc(d.path)}</h2>` +
    `<div class="meta">${esc(d.id)} · ${esc(d.contract)} · ${esc(s.status)}/${esc(s.phase)}${exit}${s.pid ? ' · pid ' + esc(s.pid) : ''}${d.host ? ' · host ' + esc(d.host) : ''}</div>` +
    hostBlock(d) +
    `<div class="meta">${esc(s.name || '')}${d.usage ? ' · ' + esc(d.usage) : ''}</div>` +
    (d.subtree ? `<div class="meta">subtree: ${esc(d.subtree)}</div>` : '') +
    questionBlock(d.question) +
    `<div class="actions">${buttons}</div>` +
    (kept ? sendForm(d, kept.text, kept.mode) : '') +
    `<div id="action-result" class="result"></div>` +
    taskBlock(d) +
    worktreeBlock(d) +
    `<h3>Summary</h3><pre>${esc(s.resultSummary || '(none)')}</pre>` +
    `<h3>Answer</h3><pre id="answer">${esc(d.answer || '(none yet)')}</pre>` +
    `<h3>Events (${(d.events || []).length} retained)</h3><table id="events">${events}</table>` +
    `<h3>stderr tail</h3><pre id="stderr">${esc(d.stderrTail || '(empty)')}</pre>` +
    `<h3>Session</h3><div class="meta">file: <code>${esc(d.sessionFile || '(none)')}</code></div>` +
    (d.resumeCommand ? `<div class="meta">resume: <code id="resume">${esc(d.resumeCommand)}</code></div>` : '') +
    `<h3>poll (tail)</h3><details><summary>snapshot JSON</summary><pre>${esc(JSON.stringify(s, null, 2))}</pre></details>`;
  if (answerDraft && $('answer-text')) $('answer-text').value = answerDraft;
  showCommand();
  if (st.scrollTo && $(st.scrollTo)) { $(st.scrollTo).scrollIntoView(); st.scrollTo = null; }
}

// A live thread of a host whose lease ran out (issue 46): since when, and what to do; its
// stop and send buttons are greyed with the same words.
function hostBlock(d) {
  if (!d.hostUnreachableSince) return '';
  const host = d.host || 'HOST';
  return `<div class="meta unreachable" id="detail-host">host unreachable since ${esc(d.hostUnreachableSince.slice(0, 19).replace('T', ' '))}: nothing can reach this thread until host ${esc(host)} is back (<code>threadbase host forget ${esc(host)}</code> closes its threads as stale)</div>`;
}

// What the thread was asked: its whole prompt, then every message sent to it since, each with
// who sent it and when.
function taskBlock(d) {
  const when = (t) => esc((t || '').slice(0, 19).replace('T', ' '));
  const sent = (d.sent || []).map((m) =>
    `<div class="sent"><div class="who">${esc(m.kind)} · ${esc(m.by || 'its parent')} · ${when(m.at)}${m.state !== 'delivered' ? ' · ' + esc(m.state) : ''}</div><pre>${esc(m.body)}</pre></div>`).join('');
  return `<h3>Task</h3><div class="who meta">prompt · ${esc(d.promptBy)} · ${when(d.promptAt)}</div>` +
    `<pre id="prompt">${esc(d.prompt || '(started without a prompt)')}</pre>` +
    `<h3>Sent since (${(d.sent || []).length})</h3><div id="sent">${sent || '<div class="meta">(nothing)</div>'}</div>`;
}

// The Send box of thread `d`: it carries the thread's id, and its button names the thread.
function sendForm(d, draft, mode) {
  const opts = ['auto', 'prompt', 'steer', 'follow_up'].map((m) => `<option value="${m}"${m === mode ? ' selected' : ''}>${m}</option>`).join('');
  return `<div class="send" id="send-box" data-thread="${esc(d.id)}" data-path="${esc(d.path)}"><textarea id="send-message" placeholder="message to ${esc(d.path)}">${esc(draft)}</textarea>` +
    `<select id="send-mode" title="mode">${opts}</select><button type="button" id="send-go">Send to ${esc(d.path)}</button></div>`;
}

// Keeps the open Send box's text as its own thread's draft.
function saveDraft() {
  const box = $('send-box');
  if (!box) return;
  st.drafts.set(box.dataset.thread, { text: $('send-message').value, mode: $('send-mode').value });
}

function showCommand() {
  const el = $('action-result');
  if (!el || !st.command || st.command.thread !== st.selected) return;
  const c = st.command;
  el.className = 'result' + (c.state === 'failed' ? ' failed' : '');
  el.textContent = `${c.action}: ${c.state}${c.result ? ' — ' + c.result : ''}`;
}

async function loadCommand() {
  const c = st.command;
  if (!c || c.id == null || c.state === 'done' || c.state === 'failed') return;
  try {
    const doc = await api('/api/command?id=' + c.id);
    if (st.command !== c) return;
    c.state = doc.state;
    c.result = doc.result;
    showCommand();
  } catch (e) { noteError(e); }
}

function confirmBox(text, ok, danger) {
  return new Promise((resolve) => {
    $('confirm-text').textContent = text;
    const yes = $('confirm-yes');
    yes.textContent = ok;
    yes.className = danger === false ? '' : 'danger';
    $('confirm').hidden = false;
    const done = (v) => { $('confirm').hidden = true; yes.onclick = null; $('confirm-no').onclick = null; resolve(v); };
    yes.onclick = () => done(true);
    $('confirm-no').onclick = () => done(false);
    yes.focus();
  });
}

// Takes `action` on `target` ({id, path}; the open thread unless named).
async function act(action, extra, target) {
  const d = target || st.detail;
  if (!d) return;
  const spec = ACTIONS[action];
  if (spec.confirm && !(await confirmBox(spec.confirm(d.path), spec.ok, true))) return;
  st.command = { thread: d.id, action, id: null, state: 'sending', result: null };
  showCommand();
  try {
    const doc = await api('/api/action', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(Object.assign({ thread: d.id, action }, extra || {})),
    });
    if (action === 'send') st.drafts.delete(d.id);
    st.command.id = doc.command ?? null;
    st.command.state = doc.state;
  } catch (e) {
    st.command.state = 'failed';
    st.command.result = e.message;
  }
  showCommand();
  loadCommand();
}

// ---- the timeline ---------------------------------------------------------------------

// One tree over time (/api/timeline): a bar per thread from its start to its close (or now),
// nested by path, cut into spans of what it was doing, its turns as ticks, and the tree's
// cumulative cost as a line above. SVG drawn from the answer; read again on every change.
async function loadTimeline() {
  const sel = $('timeline-root');
  const roots = st.trees.map((t) => t.rootSession);
  const opts = st.trees.map((t) => `<option value="${esc(t.rootSession)}">${esc(t.rootSession)}${t.name ? ' “' + esc(t.name) + '”' : ''}</option>`).join('');
  if (sel.dataset.opts !== opts) { const keep = sel.value; sel.innerHTML = opts; sel.dataset.opts = opts; if (roots.includes(keep)) sel.value = keep; }
  if (!st.timelineRoot || !roots.includes(st.timelineRoot)) st.timelineRoot = roots[0] || null;
  if (!st.timelineRoot) { $('timeline-plot').innerHTML = '<div class="meta">(no trees)</div>'; return; }
  sel.value = st.timelineRoot;
  try {
    const root = st.timelineRoot;
    const doc = await api('/api/timeline?root=' + encodeURIComponent(root));
    if (root !== st.timelineRoot) return;
    st.timeline = doc;
    drawTimeline();
  } catch (e) { noteError(e); $('timeline-info').textContent = e.message; }
}

function drawTimeline() {
  const doc = st.timeline;
  if (!doc || !st.timelineOpen) return;
  const t = performance.now();
  const now = Date.now();
  const ms = (s) => (s ? Date.parse(s) : now);
  let t0 = Infinity, t1 = -Infinity;
  for (const b of doc.threads) { t0 = Math.min(t0, ms(b.start)); t1 = Math.max(t1, b.end ? ms(b.end) : now); }
  if (!doc.threads.length) { $('timeline-plot').innerHTML = '<div class="meta">(no threads)</div>'; return; }
  if (t1 <= t0) t1 = t0 + 1000;
  const W = Math.max(600, $('timeline-plot').clientWidth || 900);
  const labelW = 280, costH = 46, top = costH + 18, rowH = 14, plotW = W - labelW - 12;
  const x = (v) => labelW + ((v - t0) / (t1 - t0)) * plotW;
  const H = top + doc.threads.length * rowH + 4;
  const parts = [];
  // The cost line above, with its scale.
  const maxCost = doc.cost.length ? doc.cost[doc.cost.length - 1][1] : 0;
  {
    const y = (c) => costH - (maxCost > 0 ? (c / maxCost) * (costH - 8) : 0);
    let d = `M${x(t0).toFixed(1)},${costH}`;
    for (const [at, c] of doc.cost) d += ` L${x(ms(at)).toFixed(1)},${y(c).toFixed(1)}`;
    d += ` L${x(t1).toFixed(1)},${y(maxCost).toFixed(1)}`;
    parts.push(`<path class="cost" id="timeline-cost" d="${d}"><title>cumulative cost of the tree: ${usd(maxCost)}</title></path>`);
  }
  parts.push(`<text class="axis" x="4" y="12">cost ${usd(maxCost)}</text>`);
  parts.push(`<text class="axis" x="${labelW}" y="${costH + 13}">${esc(new Date(t0).toISOString().slice(0, 19).replace('T', ' '))}</text>`);
  parts.push(`<text class="axis" x="${W - 12}" y="${costH + 13}" text-anchor="end">${doc.threads.some((b) => !b.end) ? 'now' : esc(new Date(t1).toISOString().slice(0, 19).replace('T', ' '))}</text>`);
  doc.threads.forEach((b, i) => {
    const y = top + i * rowH;
    const last = b.spans.length ? b.spans[b.spans.length - 1].kind : '';
    const end = b.end ? ms(b.end) : now;
    const segs = b.spans.map((s) => {
      const a = x(ms(s.from)), z = x(s.to ? ms(s.to) : end);
      return `<rect class="seg k-${s.kind}" data-kind="${s.kind}" x="${a.toFixed(1)}" y="${y + 2}" width="${Math.max(1, z - a).toFixed(1)}" height="${rowH - 4}"></rect>`;
    }).join('');
    const ticks = b.ticks.map((at) => { const tx = x(ms(at)).toFixed(1); return `<line class="tick" x1="${tx}" x2="${tx}" y1="${y + 1}" y2="${y + rowH - 1}"></line>`; }).join('');
    const name = b.path.split('/').pop();
    const label = `${'\u00a0'.repeat(Math.max(0, b.level - 1) * 2)}${name}${b.host ? ' · ' + b.host : ''}`;
    const tip = `${b.path} · ${b.state}${b.host ? ' · host ' + b.host : ''} · ${usd(b.costUsd)}\n${b.task}`;
    parts.push(`<g class="bar${st.selected === b.id ? ' sel' : ''}" data-id="${esc(b.id)}" data-path="${esc(b.path)}" data-kind="${last}"><title>${esc(tip)}</title>` +
      `<rect class="bg" x="0" y="${y}" width="${W}" height="${rowH}" fill="transparent"></rect>` +
      `<text x="4" y="${y + rowH - 3}">${esc(label.length > 40 ? label.slice(0, 39) + '…' : label)}</text>${segs}${ticks}</g>`);
  });
  $('timeline-plot').innerHTML = `<svg width="${W}" height="${H}" viewBox="0 0 ${W} ${H}">${parts.join('')}</svg>`;
  $('timeline-info').textContent = `${doc.threads.length} thread${doc.threads.length === 1 ? '' : 's'}${doc.truncated ? ' (the first, in tree order)' : ''}`;
  tb.timelineDraws = (tb.timelineDraws || 0) + 1;
  tb.timelineMs = performance.now() - t;
}

// ---- usage ----------------------------------------------------------------------------

async function loadUsage() {
  try {
    const doc = await api('/api/usage');
    $('usage-lines').textContent = doc.lines.join('\n');
  } catch (e) { $('usage-lines').textContent = e.message; }
}

// ---- events of the page ---------------------------------------------------------------

function select(id, scrollTo) {
  st.scrollTo = scrollTo || null;
  // The open Send box stays with its thread: kept as its draft, gone from the page.
  saveDraft();
  const box = $('send-box');
  if (box && box.dataset.thread !== id) box.remove();
  st.selected = id;
  draw();
  if (st.timelineOpen) drawTimeline();
  loadDetail(id);
}

function wire() {
  $('list').addEventListener('scroll', draw, { passive: true });
  window.addEventListener('resize', draw);
  $('rows').addEventListener('click', (e) => {
    const tree = e.target.closest('.row.tree');
    if (tree) {
      const root = tree.dataset.root;
      if (st.collapsed.has(root)) st.collapsed.delete(root); else st.collapsed.add(root);
      draw();
      return;
    }
    const row = e.target.closest('.row.thread');
    if (row) select(row.dataset.id);
  });
  $('needs-list').addEventListener('click', needClick);
  $('detail').addEventListener('click', (e) => {
    const b = e.target.closest('button');
    if (!b) return;
    if (b.dataset.answer !== undefined) {
      act('answer', { answer: JSON.parse(b.dataset.answer) });
      return;
    }
    if (b.id === 'answer-go') {
      act('answer', { answer: $('answer-text').value });
      return;
    }
    if (b.id === 'send-go') {
      const box = $('send-box');
      const message = $('send-message').value;
      const mode = $('send-mode').value;
      const target = { id: box.dataset.thread, path: box.dataset.path };
      if (message.trim() === '') return;
      $('send-message').value = '';
      st.drafts.delete(target.id);
      act('send', mode === 'auto' ? { message } : { message, mode }, target);
      return;
    }
    const action = b.dataset.action;
    if (!action) return;
    if (ACTIONS[action].form) {
      if (!$('send-box') && st.detail) {
        st.drafts.set(st.detail.id, { text: '', mode: 'auto' });
        b.closest('.actions').insertAdjacentHTML('afterend', sendForm(st.detail, '', 'auto'));
        $('send-message').focus();
      }
      return;
    }
    act(action);
  });
  let timer = null;
  const changed = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      st.filter = filterQuery();
      st.pages.clear();
      $('list').scrollTop = 0;
      refresh();
    }, 150);
  };
  for (const id of ['f-state', 'f-visibility', 'f-contract', 'f-host']) $(id).addEventListener('change', changed);
  $('f-match').addEventListener('input', changed);
  $('filters').addEventListener('submit', (e) => e.preventDefault());
  $('timeline-toggle').addEventListener('click', () => {
    st.timelineOpen = !st.timelineOpen;
    $('timeline').hidden = !st.timelineOpen;
    if (st.timelineOpen) loadTimeline();
  });
  $('timeline-root').addEventListener('change', () => { st.timelineRoot = $('timeline-root').value; loadTimeline(); });
  $('timeline-plot').addEventListener('click', (e) => {
    const g = e.target.closest('g.bar');
    if (g) select(g.dataset.id);
  });
  $('usage-toggle').addEventListener('click', () => {
    st.usageOpen = !st.usageOpen;
    $('usage').hidden = !st.usageOpen;
    if (st.usageOpen) loadUsage();
  });
  // Ages move: redraw from memory (no request) every few seconds.
  setInterval(() => { draw(); if (st.timelineOpen) drawTimeline(); }, 5000);
}

wire();
refresh();
connect();
