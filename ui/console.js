/* SPDX-License-Identifier: Apache-2.0 */
// console.js - the operator console of fencegate: one page over the gateway's own API.
// It asks /v1/whoami who the key is, then shows the live locks and semaphores (refreshed in place
// every LEASE_REFRESH_MS), the rejections of the last hour (per minute, most refused resources) and
// the audit trail with filters and keyset paging and its export as CSV or JSON, and whether the
// gateway's backends answer; admin keys get a revoke button. The key is kept in
// sessionStorage and sent as a bearer header, never as a cookie. No framework, no inline script.
'use strict';

const KEY_STORAGE = 'fencegate.key';
const LEASE_REFRESH_MS = 2000;
const REJECTION_REFRESH_MS = 5000;
const LEASE_PAGE = 200;        // items shown per kind
const LEASE_PAGES_MAX = 5;     // pages read per refresh to fill them
const WAITERS_SHOWN = 10;      // first waiters an opened Waiting cell lists
const AUDIT_PAGE = 50;
const EXPORT_PAGE = 1000;       // records per request of an export
const EXPORT_MAX = 10000;       // records an export holds at most
const EXPORT_COLUMNS = ['id', 'at_ms', 'resource', 'resources', 'lock', 'lease_kind', 'presented_fence',
  'current_fence', 'owner', 'client_addr', 'method', 'reason', 'principal', 'trace_id'];
const MINUTES = 60;

const $ = (id) => document.getElementById(id);

const state = {
  who: null,          // answer of /v1/whoami
  auditAfter: [0],    // after_id of each page seen, the last is the current page
  auditNext: null,    // next_after_id of the current page
  revoke: null,       // the lease the revoke dialog is about
  leasesAsked: 0,     // the number of the latest listing of live leases sent
  leasesShown: 0,     // the number of the listing the tables show
  timers: [],
};

// One API call. Returns {status, body}; the body is parsed JSON, or null.
async function api(path, method = 'GET', body = undefined) {
  const headers = { Accept: 'application/json' };
  const key = sessionStorage.getItem(KEY_STORAGE);
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(path, {
    method, headers, credentials: 'omit', cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const parsed = await response.json().catch(() => null);
  if (response.status === 401) showKeyForm('The gateway did not accept this key.');
  return { status: response.status, body: parsed };
}

// The detail of a problem+json answer, for a message.
function problemText(answer) {
  const b = answer.body || {};
  return `${answer.status} ${b.title || ''}: ${b.detail || 'no detail'}`;
}

function may(scope) {
  const scopes = (state.who && state.who.scopes) || [];
  return scopes.includes('admin') || scopes.includes(scope);
}

function say(element, text) {
  element.textContent = text || '';
  element.hidden = !text;
}

// Sets a node's text only when it changed, so refreshes do not repaint what stayed the same.
function setText(node, text) {
  const t = String(text);
  if (node.textContent !== t) node.textContent = t;
}

function timeLeft(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 10000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 120000) return `${Math.round(ms / 1000)} s`;
  return `${Math.round(ms / 60000)} min`;
}

function clockTime(ms) {
  return new Date(ms).toLocaleString();
}

// --- the key ----------------------------------------------------------------------------------------

function showKeyForm(message) {
  stopRefreshing();
  say($('key-message'), message);
  $('key-form').hidden = false;
  $('console').hidden = true;
  $('key-input').focus();
}

async function start() {
  const who = await api('/v1/whoami');
  if (who.status !== 200) {
    say($('who'), '');
    if (who.status !== 401) showKeyForm(`The gateway answered ${problemText(who)}.`);
    return;
  }
  state.who = who.body;
  if (who.body.auth === 'required' && !who.body.principal) {
    const had = sessionStorage.getItem(KEY_STORAGE);
    sessionStorage.removeItem(KEY_STORAGE);
    showKeyForm(had ? 'That key is not known to this gateway. Enter another one.'
      : 'This gateway requires an API key. It stays in this tab\'s session storage and is sent as a '
        + 'bearer header, never as a cookie.');
    return;
  }
  setText($('who'), who.body.principal ? `key: ${who.body.principal}` : 'authentication is off');
  $('forget-key').hidden = !who.body.principal;
  $('key-form').hidden = true;
  $('console').hidden = false;
  startRefreshing();
}

// --- live leases ------------------------------------------------------------------------------------

// Makes tbody hold one row per item, in order, reusing the rows of keys it already shows.
function syncRows(tbody, items, keyOf, build, fill) {
  const existing = new Map([...tbody.rows].map((row) => [row.dataset.key, row]));
  let at = 0;
  for (const item of items) {
    const key = keyOf(item);
    let row = existing.get(key);
    if (row) existing.delete(key);
    else { row = build(item); row.dataset.key = key; }
    fill(row, item);
    if (tbody.rows[at] !== row) tbody.insertBefore(row, tbody.rows[at] || null);
    at += 1;
  }
  for (const row of existing.values()) row.remove();
}

function newRow(cells, numeric = []) {
  const row = document.createElement('tr');
  for (let i = 0; i < cells; i += 1) {
    const td = row.insertCell();
    if (numeric.includes(i)) td.className = 'num';
  }
  return row;
}

function revokeButton(onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'small danger';
  b.textContent = 'Revoke';
  b.addEventListener('click', onClick);
  return b;
}

// The Waiting cell of a lock or semaphore row: the count, which opens into the first waiters in queue
// order (owner and since when), read from the status route only while it is open.
function buildWaiting(cell, route) {
  const details = document.createElement('details');
  details.className = 'waiters';
  details.append(document.createElement('summary'), document.createElement('ol'));
  details.dataset.route = route;
  details.addEventListener('toggle', () => fillWaiters(details));
  cell.append(details);
}

function setWaiting(cell, waiting) {
  const details = cell.firstChild;
  setText(details.firstChild, waiting);
  if (waiting === 0) details.open = false;
  fillWaiters(details);
}

async function fillWaiters(details) {
  const list = details.lastChild;
  if (!details.open) { list.replaceChildren(); return; }
  const answer = await api(`${details.dataset.route}?waiters=${WAITERS_SHOWN}`);
  if (!details.open) { list.replaceChildren(); return; }
  if (answer.status !== 200) { list.replaceChildren(); say($('status'), `Waiters: ${problemText(answer)}`); return; }
  const lines = answer.body.waiters.map((w) => {
    const li = document.createElement('li');
    li.textContent = `${w.owner ?? 'no owner'}, waiting since ${w.since_ms ? clockTime(w.since_ms) : 'unknown'}`;
    li.title = w.since_ms ? `since_ms ${w.since_ms}` : '';
    return li;
  });
  list.replaceChildren(...lines);
}

function buildLockRow(item) {
  const row = newRow(7, [3, 4, 5]);
  buildWaiting(row.cells[5], apiPath('v1', 'locks', item.lock));
  if (may('admin')) {
    row.cells[6].append(revokeButton(() => askRevoke({
      kind: 'locks', name: row.dataset.key, fence: row.dataset.fence, owner: row.dataset.owner,
    })));
  }
  row.cells[0].textContent = item.lock;
  return row;
}

function fillLockRow(row, item) {
  row.dataset.fence = item.fence ?? '';
  row.dataset.owner = item.owner ?? '';
  setText(row.cells[1], item.held ? 'yes' : 'no');
  setText(row.cells[2], item.owner ?? '–');
  setText(row.cells[3], item.fence ?? '–');
  setText(row.cells[4], timeLeft(item.expires_in_ms));
  setWaiting(row.cells[5], item.waiting);
  const button = row.cells[6].firstChild;
  if (button) button.disabled = !item.held;
}

function buildSemRow(item) {
  const row = newRow(5, [1, 2, 3]);
  row.cells[0].textContent = item.semaphore;
  buildWaiting(row.cells[3], apiPath('v1', 'semaphores', item.semaphore));
  row.cells[4].append(document.createElement('ul'));
  return row;
}

function fillSemRow(row, item) {
  setText(row.cells[1], item.limit ?? '–');
  setText(row.cells[2], item.holders);
  setWaiting(row.cells[3], item.waiting);
  const list = row.cells[4].firstChild;
  const lines = new Map([...list.children].map((li) => [li.dataset.fence, li]));
  const seen = new Set();
  for (const lease of item.leases) {
    const fence = String(lease.fence);
    seen.add(fence);
    let li = lines.get(fence);
    if (!li) {
      li = document.createElement('li');
      li.dataset.fence = fence;
      li.append(document.createElement('span'));
      if (may('admin')) {
        li.append(revokeButton(() => askRevoke({
          kind: 'semaphores', name: item.semaphore, fence: lease.fence, owner: lease.owner,
        })));
      }
      list.append(li);
    }
    setText(li.firstChild, `${fence}, ${lease.owner ?? 'no owner'}, ${timeLeft(lease.expires_in_ms)}`);
  }
  for (const [fence, li] of lines) if (!seen.has(fence)) li.remove();
}

// Up to LEASE_PAGE items of a listing, following its cursor for at most LEASE_PAGES_MAX pages (a key
// with narrow scopes may see nothing on the first pages). Returns {status, body: {items, next_cursor}}.
async function listing(route, prefix) {
  const items = [];
  let cursor = null;
  for (let page = 0; page < LEASE_PAGES_MAX; page += 1) {
    const more = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
    const answer = await api(`${route}?prefix=${prefix}&limit=${LEASE_PAGE - items.length}${more}`);
    if (answer.status !== 200) return answer;
    items.push(...answer.body.items);
    cursor = answer.body.next_cursor;
    if (!cursor || items.length >= LEASE_PAGE) break;
  }
  return { status: 200, body: { items, next_cursor: cursor } };
}

// Listings overlap (the timer's and the prefix field's): an answer older than the one shown is dropped,
// or a listing of the old prefix would put back rows the new one took out, under the user's pointer.
async function refreshLeases() {
  const asked = ++state.leasesAsked;
  const prefix = encodeURIComponent($('lease-prefix').value.trim());
  const [locks, sems] = await Promise.all([
    listing('/v1/locks', prefix),
    listing('/v1/semaphores', prefix),
  ]);
  if (asked < state.leasesShown) return;
  state.leasesShown = asked;
  if (locks.status !== 200 || sems.status !== 200) {
    say($('status'), `Live leases: ${problemText(locks.status !== 200 ? locks : sems)}`);
    return;
  }
  say($('status'), '');
  syncRows($('locks').tBodies[0], locks.body.items, (i) => i.lock, buildLockRow, fillLockRow);
  syncRows($('semaphores').tBodies[0], sems.body.items, (i) => i.semaphore, buildSemRow, fillSemRow);
  $('locks-empty').hidden = locks.body.items.length > 0;
  $('semaphores-empty').hidden = sems.body.items.length > 0;
  $('leases-more').hidden = !(locks.body.next_cursor || sems.body.next_cursor);
  setText($('leases-updated'), `updated ${new Date().toLocaleTimeString()}`);
}

// --- revoke -----------------------------------------------------------------------------------------

// The path of segments, each percent-encoded: a lock named "a:/../../v1/locks/payments" stays one
// segment, where the browser would fold its dots and send the request for another lock.
function apiPath(...segments) {
  return `/${segments.map(encodeURIComponent).join('/')}`;
}

function askRevoke(lease) {
  state.revoke = lease;
  const what = lease.kind === 'locks' ? 'lock' : 'semaphore';
  setText($('revoke-text'), `Revoke the lease on ${what} ${lease.name} with fence ${lease.fence}, `
    + `held by ${lease.owner || 'an unnamed owner'}?`);
  $('revoke-dialog').showModal();
}

async function confirmRevoke() {
  const lease = state.revoke;
  $('revoke-dialog').close();
  // The fence shown: the lease may have passed to another holder since, who is not revoked then.
  const body = { reason: $('revoke-reason').value || 'revoked from the console', fence: Number(lease.fence) };
  const answer = await api(apiPath('v1', lease.kind, lease.name, 'revoke'), 'POST', body);
  say($('action'), answer.status === 200
    ? `Revoked fence ${answer.body.revoked_fence ?? '(none: the lease had already ended)'} of ${lease.name}.`
    : `Revoke failed: ${problemText(answer)}`);
  await refreshLeases();
}

// --- rejections: timeline and most refused resources ----------------------------------------------

const SVG = 'http://www.w3.org/2000/svg';

function svgNode(name, attributes, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attributes)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// Draws one bar per minute of the last hour; the newest minute is on the right.
function drawTimeline(summary) {
  const svg = $('timeline');
  const counts = new Array(MINUTES).fill(0);
  const lastMinute = Math.floor((summary.until_ms - 1) / 60000) * 60000;
  for (const m of summary.per_minute) {
    const slot = MINUTES - 1 - Math.round((lastMinute - m.minute_ms) / 60000);
    if (slot >= 0 && slot < MINUTES) counts[slot] += m.rejections;
  }
  const max = Math.max(1, ...counts);
  const left = 36; const top = 10; const width = 600; const height = 120; const step = width / MINUTES;
  const nodes = [
    svgNode('line', { x1: left, y1: top + height, x2: left + width, y2: top + height }),
    svgNode('text', { x: 2, y: top + 10 }, String(max)),
    svgNode('text', { x: 2, y: top + height }, '0'),
    svgNode('text', { x: left, y: top + height + 16 }, '60 min ago'),
    svgNode('text', { x: left + width - 24, y: top + height + 16 }, 'now'),
  ];
  counts.forEach((n, i) => {
    if (n === 0) return;
    const h = Math.max(2, (n / max) * height);
    const bar = svgNode('rect', {
      class: 'bar', x: (left + i * step + 1).toFixed(1), y: (top + height - h).toFixed(1),
      width: (step - 2).toFixed(1), height: h.toFixed(1), 'data-count': n,
    });
    const at = new Date(lastMinute - (MINUTES - 1 - i) * 60000).toLocaleTimeString();
    bar.append(svgNode('title', {}, `${at}: ${n} rejected`));
    nodes.push(bar);
  });
  svg.replaceChildren(...nodes);
}

function drawTopResources(summary) {
  const list = $('top-resources');
  const max = Math.max(1, ...summary.top_resources.map((r) => r.rejections));
  const items = summary.top_resources.map((r) => {
    const li = document.createElement('li');
    const pick = document.createElement('button');
    pick.type = 'button';
    pick.textContent = r.resource;
    pick.addEventListener('click', () => {
      $('audit-filter').elements.resource.value = r.resource;
      reloadAudit();
    });
    const bar = document.createElement('progress');
    bar.max = max;
    bar.value = r.rejections;
    li.append(pick, ` ${r.rejections}`, bar);
    return li;
  });
  if (items.length === 0) {
    const li = document.createElement('li');
    li.textContent = 'none in the last hour';
    items.push(li);
  }
  list.replaceChildren(...items);
}

async function refreshRejections() {
  const answer = await api('/v1/audit/summary');
  if (answer.status !== 200) {
    say($('rejections-message'), `Rejections: ${problemText(answer)}`);
    return;
  }
  say($('rejections-message'), '');
  drawTimeline(answer.body);
  drawTopResources(answer.body);
}

// --- audit trail ------------------------------------------------------------------------------------

function auditQuery(afterId) {
  const form = $('audit-filter').elements;
  const q = new URLSearchParams({ limit: AUDIT_PAGE, after_id: afterId });
  for (const name of ['resource', 'lock', 'lease_kind', 'owner']) {
    if (form[name].value.trim()) q.set(name, form[name].value.trim());
  }
  if (form.since.value) q.set('since_ms', new Date(form.since.value).getTime());
  if (form.until.value) q.set('until_ms', new Date(form.until.value).getTime());
  return q.toString();
}

function auditRow(item) {
  const row = newRow(13, [0, 5, 6]);
  const cells = [item.id, clockTime(item.at_ms), item.resource, item.lock, item.lease_kind, item.presented_fence,
    item.current_fence, item.owner ?? '–', item.client_addr, item.method, item.reason, item.principal,
    item.trace_id];
  cells.forEach((text, i) => { row.cells[i].textContent = text ?? '–'; });
  row.dataset.key = String(item.id);
  return row;
}

async function loadAudit() {
  const after = state.auditAfter[state.auditAfter.length - 1];
  const answer = await api(`/v1/audit/rejections?${auditQuery(after)}`);
  if (answer.status !== 200) {
    say($('audit-message'), `Audit trail: ${problemText(answer)}`);
    return;
  }
  say($('audit-message'), '');
  syncRows($('audit-table').tBodies[0], answer.body.items, (i) => String(i.id), auditRow, () => {});
  $('audit-empty').hidden = answer.body.items.length > 0;
  state.auditNext = answer.body.next_after_id;
  $('audit-next').disabled = state.auditNext === null;
  $('audit-first').disabled = state.auditAfter.length === 1;
}

function reloadAudit() {
  state.auditAfter = [0];
  loadAudit();
}

// One CSV field (RFC 4180). A text that a spreadsheet would take for a formula (=, +, -, @, tab, CR
// first) is prefixed with ' so that opening the export runs nothing a writer stored.
function csvField(value) {
  if (value === null || value === undefined) return '';
  let text = Array.isArray(value) ? value.join(' ') : String(value);
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

// Downloads every record that matches the audit filter (up to EXPORT_MAX) as CSV or JSON.
async function exportAudit(format) {
  const items = [];
  let after = 0;
  while (items.length < EXPORT_MAX) {
    const q = new URLSearchParams(auditQuery(after));
    q.set('limit', Math.min(EXPORT_PAGE, EXPORT_MAX - items.length));
    const answer = await api(`/v1/audit/rejections?${q}`);
    if (answer.status !== 200) {
      say($('audit-export-message'), `Export: ${problemText(answer)}`);
      return;
    }
    items.push(...answer.body.items);
    after = answer.body.next_after_id;
    if (after === null) break;
  }
  const text = format === 'json' ? `${JSON.stringify(items, null, 1)}\n`
    : [EXPORT_COLUMNS.join(','), ...items.map((i) => EXPORT_COLUMNS.map((c) => csvField(i[c])).join(','))]
      .join('\r\n') + '\r\n';
  const link = document.createElement('a');
  link.href = URL.createObjectURL(new Blob([text], { type: format === 'json' ? 'application/json' : 'text/csv' }));
  link.download = `fencegate-audit-${new Date().toISOString().replace(/[:.]/g, '-')}.${format}`;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  say($('audit-export-message'), `Exported ${items.length} record${items.length === 1 ? '' : 's'}`
    + `${items.length >= EXPORT_MAX ? ' (the most an export holds: narrow the filter for the rest)' : ''}.`);
}

// --- backends ---------------------------------------------------------------------------------------

async function refreshBackends() {
  const answer = await api('/readyz');
  const b = answer.body || {};
  let text = `Redis ${b.redis || 'unknown'} · Postgres ${b.postgres || 'unknown'}`;
  let title = "Whether the gateway's last ping of each backend was answered (GET /readyz)";
  if (may('metrics')) {
    const seen = await api('/v1/gateways');
    if (seen.status === 200) {
      const n = seen.body.gateways.length;
      text += ` · ${n} gateway${n === 1 ? '' : 's'}`;
      title += `; gateways alive in Redis: ${seen.body.gateways
        .map((g) => `${g.id}${g.self ? ' (this one)' : ''}`).join(', ')}`;
    }
  }
  // Text and title change together, once both answers are in: the title never shows half a refresh.
  $('backends').title = title;
  setText($('backends'), text);
  $('backends').classList.toggle('down', answer.status !== 200);
}

// --- wiring -----------------------------------------------------------------------------------------

function stopRefreshing() {
  state.timers.forEach(clearInterval);
  state.timers = [];
}

function startRefreshing() {
  stopRefreshing();
  refreshLeases();
  refreshBackends();
  state.timers.push(setInterval(refreshLeases, LEASE_REFRESH_MS));
  state.timers.push(setInterval(refreshBackends, LEASE_REFRESH_MS));
  const auditOk = may('audit:read');
  $('rejections-views').hidden = !auditOk;
  $('audit-filter').hidden = !auditOk;
  $('audit-table').hidden = !auditOk;
  $('audit-empty').hidden = true;
  for (const b of ['audit-first', 'audit-next', 'audit-export-csv', 'audit-export-json']) $(b).hidden = !auditOk;
  if (!auditOk) {
    const text = `This key (${state.who.principal}) does not have the audit:read scope, so the audit `
      + 'trail and the timeline of rejections are not shown. The live leases stay visible for the '
      + 'locks and semaphores the key may see.';
    say($('rejections-message'), text);
    say($('audit-message'), text);
    return;
  }
  refreshRejections();
  reloadAudit();
  state.timers.push(setInterval(() => { refreshRejections(); loadAudit(); }, REJECTION_REFRESH_MS));
}

document.addEventListener('DOMContentLoaded', () => {
  $('key-form').addEventListener('submit', (e) => {
    e.preventDefault();
    sessionStorage.setItem(KEY_STORAGE, $('key-input').value.trim());
    $('key-input').value = '';
    start();
  });
  $('forget-key').addEventListener('click', () => {
    sessionStorage.removeItem(KEY_STORAGE);
    start();
  });
  $('lease-filter').addEventListener('submit', (e) => { e.preventDefault(); refreshLeases(); });
  $('lease-prefix').addEventListener('input', () => refreshLeases());
  $('audit-filter').addEventListener('submit', (e) => { e.preventDefault(); reloadAudit(); });
  $('audit-filter').addEventListener('reset', () => setTimeout(reloadAudit, 0));
  $('audit-next').addEventListener('click', () => { state.auditAfter.push(state.auditNext); loadAudit(); });
  $('audit-first').addEventListener('click', reloadAudit);
  $('audit-export-csv').addEventListener('click', () => exportAudit('csv'));
  $('audit-export-json').addEventListener('click', () => exportAudit('json'));
  $('revoke-cancel').addEventListener('click', () => $('revoke-dialog').close());
  $('revoke-confirm').addEventListener('click', confirmRevoke);
  start();
});
