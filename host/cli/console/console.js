/* luastream web console: the browser side of `luastream run --console` and `luastream console`.
 *
 * One page, hash-routed (#/, #/group, #/entry, #/dead-letters, #/handlers), talking to the JSON API of
 * the host that serves it. Runs under a strict CSP: no inline code or style, no eval. Every value that
 * comes from the server is data and reaches the page only as text nodes or plain attributes
 * (el() below); no HTML is ever built from strings. */
(function () {
  'use strict';

  // ---------------------------------------------------------------- DOM helpers

  // el('a', {href: '#/'}, 'text', node, [more]): attributes through setAttribute, strings as text nodes.
  // Event handler and style attributes are refused: listeners are added with addEventListener, and the
  // CSP forbids inline style anyway.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const name of Object.keys(attrs)) {
        const v = attrs[name];
        if (v === null || v === undefined || v === false) continue;
        if (/^on/i.test(name) || name.toLowerCase() === 'style') throw new Error('el: refused attribute ' + name);
        node.setAttribute(name, v === true ? '' : String(v));
      }
    }
    return add(node, children);
  }

  function add(node, children) {
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      if (Array.isArray(c)) add(node, c);
      else if (c instanceof Node) node.appendChild(c);
      else node.appendChild(document.createTextNode(String(c)));
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  function on(node, event, fn) {
    node.addEventListener(event, fn);
    return node;
  }

  function $(id) {
    return document.getElementById(id);
  }

  // ---------------------------------------------------------------- formatting

  function isNum(n) {
    return typeof n === 'number' && isFinite(n);
  }

  // 850 -> "850ms", 1234 -> "1.2s", 42000 -> "42s", 3m, 2h, 5d; null -> "?".
  function fmtDuration(ms) {
    if (!isNum(ms)) return '?';
    if (ms < 0) ms = 0;
    if (ms < 1000) return Math.floor(ms) + 'ms';
    if (ms < 10000) return Math.floor(ms / 100) / 10 + 's';
    if (ms < 60000) return Math.floor(ms / 1000) + 's';
    if (ms < 3600000) return Math.floor(ms / 60000) + 'm';
    if (ms < 86400000) return Math.floor(ms / 3600000) + 'h';
    return Math.floor(ms / 86400000) + 'd';
  }

  // Plain digits (tests and people compare them with the CLI's); null -> "?".
  function fmtNum(n) {
    return isNum(n) ? String(n) : '?';
  }

  // An age where 0 means "nothing waits": "-".
  function fmtAge(ms) {
    return ms === 0 ? '-' : fmtDuration(ms);
  }

  function fmtRate(r) {
    if (!isNum(r)) return '-';
    return (r >= 100 ? Math.round(r) : r.toFixed(r >= 10 ? 1 : 2)) + '/s';
  }

  function fmtLatency(ms) {
    if (!isNum(ms)) return '-';
    return ms < 10 ? ms.toFixed(2) + 'ms' : fmtDuration(ms);
  }

  function pad2(n) {
    return n < 10 ? '0' + n : String(n);
  }

  function fmtClock(d) {
    return pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
  }

  // Unix ms -> "2026-12-07 19:14:03" in the browser's time zone.
  function fmtTime(ms) {
    if (!isNum(ms)) return '?';
    const d = new Date(ms);
    return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' + fmtClock(d);
  }

  function plural(n, word) {
    return n + ' ' + word + (n === 1 ? '' : 's');
  }

  // ---------------------------------------------------------------- HTTP

  let session = null; // /api/session

  async function readJson(res) {
    const text = await res.text();
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch (e) {
      body = null;
    }
    // The session ended (expired, or logged out in another tab): back to the login page.
    if (res.status === 401) location.assign('/login');
    if (!res.ok) {
      const why = body && typeof body.error === 'string' ? body.error : 'HTTP ' + res.status;
      throw new Error(why);
    }
    if (body === null) throw new Error('the server did not answer with JSON (' + res.url + ')');
    return body;
  }

  async function api(path) {
    const res = await fetch(path, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
    return readJson(res);
  }

  async function apiText(path) {
    const res = await fetch(path, { credentials: 'same-origin' });
    if (res.status === 401) location.assign('/login');
    if (!res.ok) throw new Error(path + ': HTTP ' + res.status);
    return res.text();
  }

  // params: {key: value | [values]}; arrays become repeated keys, null/undefined are left out.
  function formBody(params) {
    const body = new URLSearchParams();
    for (const k of Object.keys(params || {})) {
      const v = params[k];
      if (v === null || v === undefined) continue;
      if (Array.isArray(v)) v.forEach((x) => body.append(k, String(x)));
      else body.append(k, String(v));
    }
    return body;
  }

  async function post(path, params) {
    const res = await fetch(path, {
      method: 'POST',
      credentials: 'same-origin',
      headers: {
        'X-CSRF-Token': session ? session.csrf : '',
        'Content-Type': 'application/x-www-form-urlencoded',
        Accept: 'application/json',
      },
      body: formBody(params).toString(),
    });
    return readJson(res);
  }

  // "/api/pending" + {stream: 'a b'} -> "/api/pending?stream=a+b"; empty values are left out.
  function withQuery(path, params) {
    const q = new URLSearchParams();
    for (const k of Object.keys(params)) {
      const v = params[k];
      if (v !== null && v !== undefined && v !== '') q.append(k, String(v));
    }
    const s = q.toString();
    return s ? path + '?' + s : path;
  }

  // A link inside the console: '#/entry?key=..&id=..'.
  function href(route, params) {
    return '#' + withQuery(route, params || {});
  }

  // ---------------------------------------------------------------- page chrome

  function setError(msg) {
    const box = $('error');
    box.textContent = msg || '';
    box.hidden = !msg;
  }

  let knownDeadLetters = []; // dead-letter streams named by the overview, for the nav

  function renderNav() {
    const nav = clear($('nav'));
    const links = [['/', 'Overview', null]];
    for (const dl of knownDeadLetters) links.push(['/dead-letters', 'Dead letters: ' + dl, dl]);
    if (session && session.dir !== null && session.dir !== undefined) links.push(['/handlers', 'Handlers', null]);
    const cur = parseHash();
    for (const [route, label, dl] of links) {
      const a = el('a', { href: href(route, dl ? { stream: dl } : null), 'data-route': route }, label);
      const active = cur.path === route && (!dl || cur.params.get('stream') === dl);
      if (active) a.classList.add('active');
      nav.appendChild(a);
    }
  }

  function learnOverview(ov) {
    const names = [];
    for (const g of ov.groups || []) {
      if (g.dead_letter && g.dead_letter.stream && !names.includes(g.dead_letter.stream)) names.push(g.dead_letter.stream);
    }
    $('server').textContent = ov.server || '';
    if (names.join('\n') !== knownDeadLetters.join('\n')) {
      knownDeadLetters = names;
      renderNav();
    }
  }

  // ---------------------------------------------------------------- polling

  // One poller at a time, for the view on screen. The next fetch is scheduled only when the previous
  // one finished, so fetches never overlap; while the tab is hidden nothing is scheduled.
  let poller = null;

  function startPolling(fn) {
    stopPolling();
    const p = { timer: null, busy: false, stopped: false };
    p.run = async function () {
      clearTimeout(p.timer);
      p.timer = null;
      if (p.stopped || p.busy || document.visibilityState === 'hidden') return;
      p.busy = true;
      try {
        await fn();
      } catch (e) {
        setError(e.message);
      } finally {
        p.busy = false;
      }
      if (!p.stopped && document.visibilityState !== 'hidden') {
        p.timer = setTimeout(p.run, (session && session.interval_ms) || 5000);
      }
    };
    p.stop = function () {
      p.stopped = true;
      clearTimeout(p.timer);
      p.timer = null;
    };
    poller = p;
    p.run();
  }

  function stopPolling() {
    if (poller) poller.stop();
    poller = null;
  }

  document.addEventListener('visibilitychange', function () {
    if (!poller) return;
    if (document.visibilityState === 'hidden') {
      clearTimeout(poller.timer);
      poller.timer = null;
    } else if (!poller.timer) {
      poller.run(); // refresh at once on coming back (a no-op while a fetch is still running)
    }
  });

  // ---------------------------------------------------------------- metrics

  // Prometheus text format: `name{label="value",...} value [timestamp]`. Label values escape `\`, `"`
  // and newline as \\, \" and \n. Returns [{name, labels, value}]; lines that do not parse are skipped.
  function parseMetrics(text) {
    const out = [];
    for (const raw of text.split('\n')) {
      const s = parseSample(raw.trim());
      if (s) out.push(s);
    }
    return out;
  }

  function parseSample(line) {
    if (!line || line[0] === '#') return null;
    let i = 0;
    while (i < line.length && /[A-Za-z0-9_:]/.test(line[i])) i++;
    if (i === 0) return null;
    const name = line.slice(0, i);
    const labels = {};
    if (line[i] === '{') {
      i++;
      for (;;) {
        while (line[i] === ' ' || line[i] === ',') i++;
        if (i >= line.length) return null;
        if (line[i] === '}') {
          i++;
          break;
        }
        const eq = line.indexOf('=', i);
        if (eq < 0 || line[eq + 1] !== '"') return null;
        const key = line.slice(i, eq).trim();
        i = eq + 2;
        let v = '';
        while (i < line.length && line[i] !== '"') {
          if (line[i] === '\\' && i + 1 < line.length) {
            v += line[i + 1] === 'n' ? '\n' : line[i + 1];
            i += 2;
          } else {
            v += line[i++];
          }
        }
        if (line[i] !== '"') return null;
        i++;
        labels[key] = v;
      }
    }
    const word = line.slice(i).trim().split(/\s+/)[0];
    let value;
    if (word === '+Inf' || word === 'Inf') value = Infinity;
    else if (word === '-Inf') value = -Infinity;
    else value = Number(word);
    if (word === '' || Number.isNaN(value)) return null;
    return { name, labels, value };
  }

  function groupKey(stream, group) {
    return JSON.stringify([stream, group === null || group === undefined ? '' : group]);
  }

  // Sums per stream+group (over handlers, outcomes and worker processes).
  function sumMetrics(samples) {
    const fields = {
      luastream_deliveries_total: 'n',
      luastream_handler_duration_seconds_sum: 'sum',
      luastream_handler_duration_seconds_count: 'count',
    };
    const m = new Map();
    for (const s of samples) {
      const f = fields[s.name];
      if (!f || s.labels.stream === undefined || s.labels.group === undefined) continue;
      const k = groupKey(s.labels.stream, s.labels.group);
      let a = m.get(k);
      if (!a) m.set(k, (a = { n: 0, sum: 0, count: 0 }));
      a[f] += s.value;
    }
    return m;
  }

  // Two scrapes -> {rate (deliveries/s), latency (mean ms per delivery)} per stream+group. A counter
  // that went down (the host restarted) gives no figure for that interval.
  const metricsState = { prev: null, rates: new Map(), error: null };

  function takeScrape(text, at) {
    const cur = { at, sums: sumMetrics(parseMetrics(text)) };
    const prev = metricsState.prev;
    const rates = new Map();
    if (prev && cur.at > prev.at) {
      const dt = (cur.at - prev.at) / 1000;
      for (const [k, a] of cur.sums) {
        const b = prev.sums.get(k) || { n: 0, sum: 0, count: 0 };
        const dn = a.n - b.n;
        const dc = a.count - b.count;
        const ds = a.sum - b.sum;
        rates.set(k, {
          rate: dn >= 0 ? dn / dt : null,
          latency: dc > 0 && ds >= 0 ? (ds / dc) * 1000 : null,
        });
      }
    }
    metricsState.prev = cur;
    metricsState.rates = rates;
  }

  // ---------------------------------------------------------------- router

  function parseHash() {
    const h = location.hash.replace(/^#/, '') || '/';
    const q = h.indexOf('?');
    return { path: q < 0 ? h : h.slice(0, q), params: new URLSearchParams(q < 0 ? '' : h.slice(q + 1)) };
  }

  let generation = 0; // bumped on each navigation: a view's late answers check it and are dropped

  const routes = {
    '/': viewOverview,
    '/group': viewGroup,
    '/entry': viewEntry,
    '/dead-letters': viewDeadLetters,
    '/handlers': viewHandlers,
  };

  function route() {
    generation++;
    const gen = generation;
    stopPolling();
    setError(null);
    renderNav();
    const { path, params } = parseHash();
    const view = routes[path] || viewNotFound;
    const main = clear($('main'));
    const alive = () => gen === generation;
    Promise.resolve()
      .then(() => view(main, params, alive))
      .catch((e) => {
        if (alive()) setError(e.message);
      });
  }

  function viewNotFound(main) {
    add(main, [el('h1', null, 'Not found'), el('p', null, el('a', { href: '#/' }, 'Back to the overview'))]);
  }

  function pageHead(title, sub) {
    return el('div', { class: 'page-head' }, el('h1', null, title), sub ? el('span', { class: 'sub' }, sub) : null);
  }

  function loading() {
    return el('p', { class: 'muted' }, 'Loading…');
  }

  // ---------------------------------------------------------------- overview

  const ATTN_RED = ['stalled-consumer', 'error', 'missing-stream', 'missing-group'];

  function kindBadge(kind) {
    return el('span', { class: 'badge ' + (ATTN_RED.includes(kind) ? 'badge-red' : 'badge-amber') }, kind);
  }

  async function viewOverview(main, params, alive) {
    const updated = el('span', { id: 'updated', class: 'sub' }, 'loading…');
    const attnSlot = el('div');
    const tableSlot = el('div', { class: 'table-wrap' });
    const consumersSlot = el('div');
    const metricsNote = el('p', { class: 'muted small' });
    add(main, [
      el('div', { class: 'page-head' }, el('h1', null, 'Overview'), updated),
      attnSlot,
      tableSlot,
      metricsNote,
      el('h2', null, 'Consumers'),
      consumersSlot,
    ]);
    let last = null;

    async function refresh() {
      const metricsP = session.metrics ? apiText('/api/metrics').then((t) => ({ t, at: Date.now() }), (e) => e) : null;
      let ov;
      try {
        ov = await api('/api/overview');
      } catch (e) {
        if (!alive()) return;
        // Keep what is on screen; say how old it is.
        setError('Refresh failed: ' + e.message + (last ? ' (showing the data from ' + fmtClock(last) + ')' : ''));
        await metricsP;
        return;
      }
      const m = await metricsP;
      if (!alive()) return;
      setError(null);
      if (m instanceof Error) {
        metricsState.error = m.message;
      } else if (m) {
        metricsState.error = null;
        takeScrape(m.t, m.at);
      }
      last = new Date();
      learnOverview(ov);
      let text = 'updated ' + fmtClock(last);
      if (isNum(ov.refreshed_ms)) text += ' · read from Redis ' + fmtDuration(Date.now() - ov.refreshed_ms) + ' ago';
      if (isNum(ov.refresh_took_ms)) text += ' in ' + fmtDuration(ov.refresh_took_ms);
      text += ' · every ' + fmtDuration(session.interval_ms);
      updated.textContent = text;
      clear(attnSlot).appendChild(renderAttention(ov));
      clear(tableSlot).appendChild(renderGroupsTable(ov));
      clear(consumersSlot).appendChild(renderConsumers(ov));
      if (!session.metrics) metricsNote.textContent = '';
      else if (metricsState.error) metricsNote.textContent = 'Metrics: ' + metricsState.error;
      else if (!metricsState.rates.size) metricsNote.textContent = 'Deliveries/s and latency show from the second refresh on.';
      else metricsNote.textContent = 'Deliveries/s and mean handler latency over the last ' + fmtDuration(session.interval_ms) + ' (this host only).';
    }

    startPolling(refresh);
  }

  function renderAttention(ov) {
    const list = el('ul', { id: 'attention' });
    let red = false;
    for (const g of ov.groups || []) {
      for (const a of g.attention || []) {
        if (ATTN_RED.includes(a.kind)) red = true;
        const where = g.group === null || g.group === undefined ? g.stream : g.stream + ' ' + g.group;
        list.appendChild(el('li', { 'data-kind': a.kind }, kindBadge(a.kind), ' ', el('strong', null, where), ': ', a.message));
      }
    }
    const n = list.childNodes.length;
    if (!n) return el('div', { class: 'box box-green' }, 'Nothing needs attention.', list);
    return el('div', { class: 'box ' + (red ? 'box-red' : 'box-amber') }, el('h2', null, 'Needs attention (' + n + ')'), list);
  }

  function renderGroupsTable(ov) {
    const showRates = !!session.metrics;
    const cols = [
      ['Stream', ''], ['Group', ''], ['Length', 'num'], ['Lag', 'num'], ['Lag age', 'num'], ['Pending', 'num'],
      ['Oldest pending', 'num'], ['Retry lag', 'num'], ['Retry pending', 'num'], ['Delayed', 'num'], ['Dead letters', 'num'],
    ];
    if (showRates) cols.push(['Deliveries/s', 'num'], ['Latency', 'num']);
    const head = el('tr', null, cols.map(([t, c]) => el('th', { class: c || null }, t)));
    const body = el('tbody');
    for (const g of ov.groups || []) body.appendChild(groupRow(g, showRates));
    if (!body.childNodes.length) {
      body.appendChild(el('tr', null, el('td', { class: 'empty', colspan: cols.length }, 'No streams.')));
    }
    return el('table', { id: 'overview', class: 'grid' }, el('thead', null, head), body);
  }

  function groupRow(g, showRates) {
    const src = g.source || {};
    const hasGroup = g.group !== null && g.group !== undefined;
    const tr = el('tr', { class: 'group-row', 'data-stream': g.stream, 'data-group': hasGroup ? g.group : '' });
    const attn = g.attention || [];
    if (attn.some((a) => ATTN_RED.includes(a.kind))) tr.classList.add('attn-red');
    else if (attn.length) tr.classList.add('attn');

    const streamCell = el('td', null, g.stream);
    if (src.exists === false) add(streamCell, [' ', el('span', { class: 'badge badge-red' }, 'missing')]);
    if (src.error) streamCell.appendChild(el('span', { class: 'cell-sub' }, src.error));
    const groupCell = el('td');
    if (!hasGroup) groupCell.appendChild(el('span', { class: 'muted' }, 'no group'));
    else if (src.group_exists) groupCell.appendChild(el('a', { href: href('/group', { stream: g.stream, group: g.group }) }, g.group));
    else add(groupCell, [g.group, ' ', el('span', { class: 'badge badge-red' }, 'missing')]);
    if (g.pause) add(groupCell, [' ', pauseBadge(g.pause)]);
    if (g.handlers) groupCell.appendChild(el('span', { class: 'cell-sub' }, g.handlers));

    let oldest = '-';
    if (src.pending !== 0 || (g.retry && g.retry.pending)) {
      oldest = fmtAge(g.oldest_pending_age_ms);
      if (isNum(src.oldest_pending_idle_ms)) oldest += ' (idle ' + fmtDuration(src.oldest_pending_idle_ms) + ')';
    }
    const retry = g.retry;
    const retryOn = retry && retry.group_exists;
    const dl = g.dead_letter;
    const dlCell = el('td', { class: 'num' });
    if (dl) {
      const a = el('a', { href: href('/dead-letters', { stream: dl.stream }), title: dl.stream }, fmtNum(dl.length));
      if (dl.length > 0) a.classList.add('badge', 'badge-red');
      dlCell.appendChild(a);
    } else {
      dlCell.textContent = '-';
    }
    add(tr, [
      streamCell,
      groupCell,
      el('td', { class: 'num length' }, fmtNum(g.length)),
      el('td', { class: 'num lag' }, fmtNum(src.lag)),
      el('td', { class: 'num lag-age' }, fmtAge(g.lag_age_ms)),
      el('td', { class: 'num pending' }, fmtNum(src.pending)),
      el('td', { class: 'num oldest' }, oldest),
      el('td', { class: 'num retry-lag', title: retry ? retry.stream : null }, retryOn ? fmtNum(retry.lag) : '-'),
      el('td', { class: 'num retry-pending', title: retry ? retry.stream : null }, retryOn ? fmtNum(retry.pending) : '-'),
      el('td', { class: 'num delayed' }, hasGroup ? fmtNum(g.delayed) : '-'),
      dlCell,
    ]);
    if (showRates) {
      const r = metricsState.rates.get(groupKey(g.stream, g.group));
      add(tr, [
        el('td', { class: 'num rate' }, fmtRate(r ? r.rate : null)),
        el('td', { class: 'num latency' }, fmtLatency(r ? r.latency : null)),
      ]);
    }
    return tr;
  }

  function consumerRows(g, withGroup) {
    return (g.consumers || []).map((c) => {
      const state = c.stalled
        ? el('span', { class: 'badge badge-red' }, 'stalled')
        : c.lease_renewed_ms_ago === null
          ? el('span', { class: 'badge' }, 'no host')
          : el('span', { class: 'badge badge-green' }, 'running');
      return el(
        'tr',
        { class: 'consumer-row', 'data-consumer': c.name },
        withGroup ? [el('td', null, g.stream), el('td', null, g.group)] : null,
        el('td', null, c.name),
        el('td', { class: 'num' }, fmtNum(c.pending)),
        el('td', { class: 'num' }, fmtDuration(c.idle_ms)),
        el('td', { class: 'num' }, c.lease_renewed_ms_ago === null ? 'none' : fmtDuration(c.lease_renewed_ms_ago) + ' ago'),
        el('td', null, state)
      );
    });
  }

  function consumersTable(groups, withGroup) {
    const cols = withGroup ? ['Stream', 'Group'] : [];
    const head = el(
      'tr',
      null,
      cols.map((t) => el('th', null, t)),
      el('th', null, 'Consumer'),
      el('th', { class: 'num' }, 'Pending'),
      el('th', { class: 'num' }, 'Idle'),
      el('th', { class: 'num' }, 'Lease renewed'),
      el('th', null, 'State')
    );
    const body = el('tbody');
    for (const g of groups) add(body, consumerRows(g, withGroup));
    if (!body.childNodes.length) body.appendChild(el('tr', null, el('td', { class: 'empty', colspan: cols.length + 5 }, 'No consumers.')));
    return el('div', { class: 'table-wrap' }, el('table', { class: 'grid consumers' }, el('thead', null, head), body));
  }

  function renderConsumers(ov) {
    return consumersTable((ov.groups || []).filter((g) => g.group !== null && g.group !== undefined), true);
  }

  // ---------------------------------------------------------------- a group's pause

  function pauseText(p) {
    const why = p.reason ? p.reason : 'no reason given';
    if (p.state === 'half-open') return 'breaker half-open after ' + plural(p.trips, 'trip') + ': one entry probes: ' + why;
    const left = isNum(p.left_ms) ? fmtDuration(p.left_ms) + ' left' : 'until resumed';
    if (p.kind === 'breaker') return 'breaker open (trip ' + p.trips + '), ' + left + ': ' + why;
    return 'paused by ' + (p.by || '?') + (isNum(p.since_ms) ? ' since ' + fmtTime(p.since_ms) : '') + ', ' + left + ': ' + why;
  }

  function pauseBadge(p) {
    return el('span', { class: 'badge badge-amber pause-badge', title: pauseText(p) }, p.state === 'half-open' ? 'half-open' : 'paused');
  }

  // The group page's pause: its state, Pause (for a duration, with a reason) and Resume.
  // result: the last action's (kept when the section is drawn again).
  function pauseSection(g, reload, result) {
    const box = el('div', { id: 'pause', class: 'box ' + (g.pause ? 'box-amber' : '') });
    result = result || el('div', { id: 'pause-result' });
    const state = el('p', { id: 'pause-state' }, g.pause ? pauseText(g.pause) : 'Running: not paused.');
    const dur = el('input', { id: 'pause-for', type: 'text', size: 8, placeholder: 'e.g. 15m', 'aria-label': 'for how long (empty: until resumed)' });
    const reason = el('input', { id: 'pause-reason', type: 'text', size: 30, maxlength: 200, placeholder: 'reason', 'aria-label': 'reason' });
    const pauseBtn = el('button', { id: 'pause-button', type: 'button', class: 'danger' }, 'Pause');
    const resumeBtn = el('button', { id: 'resume-button', type: 'button', class: 'primary' }, 'Resume');
    resumeBtn.disabled = !g.pause;
    async function act(path, params, said) {
      pauseBtn.disabled = resumeBtn.disabled = true;
      try {
        const r = await post(path, params);
        showResult(result, 'ok', el('p', null, said(r)));
        await reload();
      } catch (e) {
        showResult(result, 'failed', el('p', null, e.message));
        pauseBtn.disabled = false;
        resumeBtn.disabled = !g.pause;
      }
    }
    on(pauseBtn, 'click', () => act('/api/pause', { stream: g.stream, group: g.group, for: dur.value.trim(), reason: reason.value }, (r) =>
      'Paused ' + r.stream + ' ' + r.group + (isNum(r.until_ms) ? ' until ' + fmtTime(r.until_ms) : ' until resumed') +
      ': no handler starts on any host from 1 s after now.'));
    on(resumeBtn, 'click', () => act('/api/resume', { stream: g.stream, group: g.group }, (r) =>
      r.was_paused ? 'Resumed ' + r.stream + ' ' + r.group + '.' : r.stream + ' ' + r.group + ' was not paused.'));
    add(box, [el('h2', null, 'Pause'), state,
      el('div', { class: 'confirm-buttons' }, el('label', null, 'for ', dur), reason, pauseBtn, resumeBtn), result]);
    return box;
  }

  // ---------------------------------------------------------------- group: consumers and pending entries

  async function viewGroup(main, params, alive) {
    const stream = params.get('stream') || '';
    const group = params.get('group') || '';
    add(main, [el('div', { class: 'crumbs' }, el('a', { href: '#/' }, 'Overview'), ' / ', stream), pageHead(stream + ' / ' + group, 'consumer group')]);
    const summary = el('div', null, loading());
    main.appendChild(summary);
    const ov = await api('/api/overview');
    if (!alive()) return;
    learnOverview(ov);
    const g = (ov.groups || []).find((x) => x.stream === stream && x.group === group);
    // after Pause or Resume: the console reads Redis again for the next overview
    async function reloadPause() {
      const again = await api('/api/overview');
      const now = (again.groups || []).find((x) => x.stream === stream && x.group === group);
      const old = $('pause');
      if (now && alive() && old) old.replaceWith(pauseSection(now, reloadPause, $('pause-result')));
    }
    clear(summary);
    if (!g) {
      summary.appendChild(el('p', { class: 'muted' }, 'This stream and group are not in the overview.'));
    } else {
      const src = g.source || {};
      add(summary, [
        el('p', null,
          'Length ', el('strong', null, fmtNum(g.length)),
          ' · lag ', el('strong', null, fmtNum(src.lag)),
          ' · pending ', el('strong', null, fmtNum(src.pending)),
          ' · last delivered ', el('code', null, src.last_delivered_id || '-'),
          g.handlers ? [' · handlers ', g.handlers] : null,
          g.dead_letter ? [' · ', el('a', { href: href('/dead-letters', { stream: g.dead_letter.stream }) }, 'dead letters (' + fmtNum(g.dead_letter.length) + ')')] : null),
        pauseSection(g, reloadPause),
        el('h2', null, 'Consumers'),
        consumersTable([g], false),
      ]);
    }
    main.appendChild(pendingSection(stream, group, stream, alive));
    const retryKey = g && g.retry ? g.retry.stream : stream + ':retry:' + group;
    if (!g || (g.retry && g.retry.group_exists)) main.appendChild(pendingSection(stream, group, retryKey, alive));
  }

  // One key's pending entries, a page at a time ("Next page" continues after the last id shown).
  function pendingSection(stream, group, key, alive) {
    const PAGE = 50;
    const tbody = el('tbody');
    const info = el('span', { class: 'muted' });
    const first = el('button', { type: 'button', class: 'small' }, 'First page');
    const next = el('button', { type: 'button', class: 'small' }, 'Next page');
    const table = el('table', { class: 'grid pending', 'data-key': key },
      el('thead', null, el('tr', null, el('th', null, 'ID'), el('th', null, 'Consumer'), el('th', { class: 'num' }, 'Idle'), el('th', { class: 'num' }, 'Deliveries'))),
      tbody);
    let nextAfter = null;
    let page = 0;

    async function load(after) {
      first.disabled = next.disabled = true;
      info.textContent = 'loading…';
      try {
        const r = await api(withQuery('/api/pending', { stream, group, key, after, count: PAGE }));
        if (!alive()) return;
        page = after ? page + 1 : 1;
        clear(tbody);
        for (const e of r.entries || []) {
          tbody.appendChild(el('tr', { class: 'pending-row', 'data-id': e.id },
            el('td', { class: 'id' }, el('a', { href: href('/entry', { key, id: e.id }) }, e.id)),
            el('td', null, e.consumer),
            el('td', { class: 'num' }, fmtDuration(e.idle_ms)),
            el('td', { class: 'num' }, fmtNum(e.deliveries))));
        }
        if (!tbody.childNodes.length) tbody.appendChild(el('tr', null, el('td', { class: 'empty', colspan: 4 }, 'Nothing pending.')));
        nextAfter = r.next;
        const n = (r.entries || []).length;
        info.textContent = 'page ' + page + ' · ' + n + (n === 1 ? ' entry' : ' entries');
        next.disabled = !nextAfter;
        first.disabled = page <= 1;
      } catch (e) {
        if (!alive()) return;
        info.textContent = '';
        clear(tbody).appendChild(el('tr', null, el('td', { class: 'empty', colspan: 4 }, 'Could not read: ' + e.message)));
        first.disabled = false;
      }
    }
    on(first, 'click', () => load(null));
    on(next, 'click', () => load(nextAfter));
    load(null);
    return el('section', null,
      el('h2', null, 'Pending on ', el('code', null, key)),
      el('div', { class: 'table-wrap' }, table),
      el('div', { class: 'pager' }, first, next, info));
  }

  // ---------------------------------------------------------------- entry

  const OWN_FIELDS = ['delivery-count', 'retry-group', 'original-id', 'handler-version', 'partition-key', 'content-type'];

  function isOwnField(name) {
    return name.startsWith('dead-letter-') || OWN_FIELDS.includes(name);
  }

  async function viewEntry(main, params, alive) {
    const key = params.get('key') || '';
    const id = params.get('id') || '';
    add(main, [el('div', { class: 'crumbs' }, el('a', { href: '#/' }, 'Overview'), ' / ', key), pageHead('Entry ' + id, key)]);
    const body = el('div', null, loading());
    main.appendChild(body);
    const r = await api(withQuery('/api/entry', { key, id }));
    if (!alive()) return;
    clear(body);
    if (!r.found) {
      body.appendChild(el('p', { class: 'box box-amber' }, 'No entry ' + id + ' on ' + key + ' (acknowledged and trimmed, or deleted).'));
      return;
    }
    const fields = r.fields || [];
    const escaped = r.escaped || [];
    const own = [];
    const other = [];
    let data = null;
    fields.forEach(([name, value], i) => {
      const f = { name, value, escaped: !!escaped[i] };
      if (name === 'data' && data === null) data = f;
      else if (isOwnField(name)) own.push(f);
      else other.push(f);
    });
    const kv = (list) =>
      el('div', { class: 'table-wrap' }, el('table', { class: 'grid kv' }, el('tbody', null, list.map((f) =>
        el('tr', null, el('th', null, f.name), el('td', null, f.value, whenOf(f), f.escaped ? [' ', escBadge()] : null))))));
    // dead-letter-time is Unix ms: said as a date beside it
    function whenOf(f) {
      return f.name === 'dead-letter-time' && /^\d+$/.test(f.value) ? ' (' + fmtTime(Number(f.value)) + ')' : null;
    }
    const tm = /^(\d+)-\d+$/.exec(id);
    body.appendChild(el('p', { class: 'muted' }, tm ? 'Added ' + fmtTime(Number(tm[1])) : null));
    if (own.length) add(body, [el('h2', null, 'Provenance/headers'), kv(own)]);
    if (other.length) add(body, [el('h2', null, 'Fields'), kv(other)]);
    body.appendChild(el('h2', null, 'Body', data && data.escaped ? [' ', escBadge()] : null));
    if (!data) {
      body.appendChild(el('p', { class: 'muted' }, 'This entry has no data field.'));
      return;
    }
    let text = data.value;
    if (!data.escaped) {
      try {
        text = JSON.stringify(JSON.parse(data.value), null, 2);
      } catch (e) {
        text = data.value; // not JSON: shown as it is
      }
    }
    body.appendChild(el('pre', { id: 'entry-body', class: 'body' }, text));
  }

  function escBadge() {
    return el('span', { class: 'badge badge-amber', title: 'bytes that are not UTF-8 text are shown as \\xNN' }, 'escaped bytes');
  }

  // ---------------------------------------------------------------- confirmation panel and results

  // The panel lists exactly what Confirm will touch; opts: {title, intro, ids, notes, okLabel, danger,
  // allowEmpty, onOk} (intro above the list, notes below it). onOk runs with the action buttons disabled;
  // the node it resolves to becomes #action-result.
  function showConfirm(slot, result, opts, setBusy) {
    const ok = el('button', { id: 'confirm-ok', type: 'button', class: opts.danger ? 'danger' : 'primary' }, opts.okLabel);
    const cancel = el('button', { id: 'confirm-cancel', type: 'button' }, 'Cancel');
    if (!opts.ids.length && !opts.allowEmpty) ok.disabled = true;
    const panel = el('div', { id: 'confirm-panel', role: 'dialog', 'aria-label': opts.title },
      el('h2', null, opts.title),
      opts.intro,
      el('ul', { id: 'confirm-ids' }, opts.ids.map((x) => el('li', null, x))),
      opts.notes,
      el('div', { class: 'confirm-buttons' }, ok, cancel));
    clear(slot).appendChild(panel);
    on(cancel, 'click', () => clear(slot));
    on(ok, 'click', async () => {
      ok.disabled = cancel.disabled = true;
      setBusy(true);
      try {
        const node = await opts.onOk();
        showResult(result, 'ok', node);
      } catch (e) {
        showResult(result, 'failed', el('p', null, opts.okLabel + ' failed: ' + e.message));
      } finally {
        clear(slot);
        setBusy(false);
      }
    });
    ok.focus();
  }

  function showResult(result, cls, node) {
    result.className = cls;
    clear(result).appendChild(node);
  }

  function whyList(title, items) {
    if (!items || !items.length) return null;
    return [el('p', null, title), el('ul', null, items.map((x) => el('li', null, el('code', null, x.id), ': ', x.why)))];
  }

  // ---------------------------------------------------------------- dead letters

  const DL_FILTERS = ['reason', 'handler', 'since', 'until', 'q'];

  // datetime-local value <-> Unix ms (the browser's time zone), for the since/until filters.
  function msToLocalInput(ms) {
    if (!/^\d+$/.test(ms || '')) return '';
    const d = new Date(Number(ms));
    return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + 'T' + pad2(d.getHours()) + ':' + pad2(d.getMinutes());
  }

  function localInputToMs(v) {
    if (!v) return '';
    const t = new Date(v).getTime();
    return isNum(t) ? String(t) : '';
  }

  async function viewDeadLetters(main, params, alive) {
    const stream = params.get('stream') || '';
    if (!stream) {
      add(main, [pageHead('Dead letters'),
        knownDeadLetters.length
          ? el('ul', null, knownDeadLetters.map((s) => el('li', null, el('a', { href: href('/dead-letters', { stream: s }) }, s))))
          : el('p', { class: 'muted' }, 'No handler names a dead-letter stream.')]);
      return;
    }
    const filters = {};
    for (const k of DL_FILTERS) filters[k] = params.get(k) || '';
    const before = params.get('before') || '';

    // -- filter form
    const fReason = el('input', { id: 'dl-filter-reason', type: 'text', list: 'dl-reasons', value: filters.reason, placeholder: 'any' });
    const reasons = el('datalist', { id: 'dl-reasons' });
    const fHandler = el('input', { id: 'dl-filter-handler', type: 'text', value: filters.handler, placeholder: 'any' });
    const fSince = el('input', { id: 'dl-filter-since', type: 'datetime-local', value: msToLocalInput(filters.since) });
    const fUntil = el('input', { id: 'dl-filter-until', type: 'datetime-local', value: msToLocalInput(filters.until) });
    const fQ = el('input', { id: 'dl-filter-q', type: 'text', value: filters.q, placeholder: 'text in error or body' });
    const apply = el('button', { id: 'dl-apply', type: 'submit', class: 'primary' }, 'Apply');
    const reset = el('a', { href: href('/dead-letters', { stream }) }, 'Clear');
    const form = el('form', { class: 'filters', id: 'dl-filters' },
      el('label', null, 'Reason', fReason), reasons,
      el('label', null, 'Handler', fHandler),
      el('label', null, 'Since', fSince),
      el('label', null, 'Until', fUntil),
      el('label', null, 'Search', fQ),
      apply, reset);
    on(form, 'submit', (ev) => {
      ev.preventDefault();
      const p = { stream, reason: fReason.value.trim(), handler: fHandler.value.trim(), since: localInputToMs(fSince.value), until: localInputToMs(fUntil.value), q: fQ.value };
      const target = href('/dead-letters', p);
      if (target === location.hash) route(); // same filters: load again
      else location.hash = target;
    });

    // -- actions
    const btnReplaySel = el('button', { type: 'button', class: 'act', id: 'dl-replay-selected' }, 'Replay selected');
    const btnDeleteSel = el('button', { type: 'button', class: 'act', id: 'dl-delete-selected' }, 'Delete selected');
    const allTitle = 'every entry of ' + stream + ' that matches the applied filters (the preview lists them)';
    const btnReplayAll = el('button', { type: 'button', class: 'act', id: 'dl-replay-all', title: allTitle }, 'Replay all matching');
    const btnDeleteAll = el('button', { type: 'button', class: 'act', id: 'dl-delete-all', title: allTitle }, 'Delete all matching');
    const confirmSlot = el('div');
    const result = el('div', { id: 'action-result', 'aria-live': 'polite' });
    const listSlot = el('div', null, loading());

    add(main, [
      el('div', { class: 'crumbs' }, el('a', { href: '#/' }, 'Overview'), ' / dead letters'),
      pageHead('Dead letters', stream),
      form,
      el('div', { class: 'toolbar' }, btnReplaySel, btnDeleteSel, el('span', { class: 'spacer' }), btnReplayAll, btnDeleteAll),
      confirmSlot,
      result,
      listSlot,
    ]);

    let busy = false;
    function selectedIds() {
      return Array.from(listSlot.querySelectorAll('input.dl-select:checked')).map((c) => c.value);
    }
    function updateButtons() {
      const n = selectedIds().length;
      btnReplaySel.textContent = n ? 'Replay selected (' + n + ')' : 'Replay selected';
      btnDeleteSel.textContent = n ? 'Delete selected (' + n + ')' : 'Delete selected';
      btnReplaySel.disabled = btnDeleteSel.disabled = busy || !n;
      btnReplayAll.disabled = btnDeleteAll.disabled = busy;
      for (const b of listSlot.querySelectorAll('button.dl-replay')) b.disabled = busy;
      apply.disabled = busy;
    }
    function setBusy(b) {
      busy = b;
      updateButtons();
    }

    async function act(action, previewParams) {
      setBusy(true);
      clear(result);
      result.className = '';
      let pv;
      try {
        pv = await post('/api/dead-letters/preview', Object.assign({ action, stream }, previewParams));
      } catch (e) {
        if (alive()) showResult(result, 'failed', el('p', null, 'Preview failed: ' + e.message));
        return;
      } finally {
        setBusy(false);
      }
      if (!alive()) return;
      const ids = pv.ids || [];
      const verb = action === 'replay' ? 'Replay' : 'Delete';
      const intro = el('p', null, action === 'replay'
        ? 'Each entry goes back to the retry stream of the group that gave up on it, then is removed from ' + stream + ':'
        : 'These entries are removed from ' + stream + ' for good:');
      const notes = [];
      if (pv.truncated) notes.push(el('p', null, el('strong', null, 'Looked at the newest ' + fmtNum(pv.scanned) + ' entries only: '), 'only the ' + plural(ids.length, 'id') + ' below are touched; run it again for the rest.'));
      const refused = whyList('Left out:', pv.refused);
      if (refused) notes.push(refused);
      const unlisted = (pv.refused_count || 0) - (pv.refused || []).length;
      if (unlisted > 0) notes.push(el('p', { class: 'muted' }, 'and ' + fmtNum(unlisted) + (unlisted === 1 ? ' more entry' : ' more entries') + ' left out, not listed'));
      showConfirm(confirmSlot, result, {
        title: verb + ' ' + plural(ids.length, 'dead letter') + ' of ' + stream + '?',
        intro,
        ids,
        notes,
        okLabel: 'Confirm: ' + verb.toLowerCase() + ' ' + ids.length,
        danger: action === 'delete',
        onOk: async () => {
          const r = await post('/api/dead-letters/' + action, { stream, id: ids });
          if (alive()) loadList();
          return action === 'replay' ? replayResult(r) : deleteResult(r);
        },
      }, setBusy);
    }

    function replayResult(r) {
      const done = r.replayed || [];
      return el('div', null,
        el('p', null, el('strong', null, 'Replayed ' + done.length + '.')),
        done.length ? el('ul', null, done.map((x) => el('li', null, el('code', null, x.id), ' → ', x.to, ' as ', el('code', null, x.new_id)))) : null,
        whyList('Skipped:', r.skipped));
    }

    function deleteResult(r) {
      return el('div', null, el('p', null, el('strong', null, 'Deleted ' + fmtNum(r.deleted) + '.')), whyList('Refused:', r.refused));
    }

    on(btnReplaySel, 'click', () => act('replay', { id: selectedIds() }));
    on(btnDeleteSel, 'click', () => act('delete', { id: selectedIds() }));
    const allParams = () => Object.assign({ all: 1 }, filters);
    on(btnReplayAll, 'click', () => act('replay', allParams()));
    on(btnDeleteAll, 'click', () => act('delete', allParams()));

    async function loadList() {
      let r;
      try {
        r = await api(withQuery('/api/dead-letters', Object.assign({ stream, before }, filters)));
      } catch (e) {
        if (alive()) clear(listSlot).appendChild(el('p', { class: 'box box-red' }, 'Could not read ' + stream + ': ' + e.message));
        return;
      }
      if (!alive()) return;
      clear(reasons);
      const counts = r.counts || {};
      for (const k of Object.keys(counts)) reasons.appendChild(el('option', { value: k }));
      clear(listSlot).appendChild(renderDeadLetterList(r, stream, filters, before, counts, act));
      for (const c of listSlot.querySelectorAll('input[type=checkbox]')) on(c, 'change', updateButtons);
      const all = listSlot.querySelector('input.dl-select-all');
      if (all) {
        on(all, 'change', () => {
          for (const c of listSlot.querySelectorAll('input.dl-select')) c.checked = all.checked;
          updateButtons();
        });
      }
      updateButtons();
    }
    updateButtons();
    await loadList();
  }

  // The first line of a dead letter's error; the rest (a traceback, mostly) folded under it.
  function errorCell(text) {
    const nl = text.indexOf('\n');
    if (nl < 0) return el('td', { class: 'error-cell' }, text);
    return el('td', { class: 'error-cell' }, text.slice(0, nl),
      el('details', null, el('summary', { class: 'muted small' }, 'more'), el('pre', { class: 'small wrap' }, text.slice(nl + 1))));
  }

  function renderDeadLetterList(r, stream, filters, before, counts, act) {
    const base = Object.assign({ stream }, filters);
    const chips = el('div', { class: 'chips' });
    const anyChip = el('a', { class: 'chip' + (filters.reason ? '' : ' active'), href: href('/dead-letters', Object.assign({}, base, { reason: '' })) }, 'any reason');
    chips.appendChild(anyChip);
    for (const k of Object.keys(counts).sort((a, b) => counts[b] - counts[a])) {
      chips.appendChild(el('a', { class: 'chip reason-count' + (filters.reason === k ? ' active' : ''), 'data-reason': k, href: href('/dead-letters', Object.assign({}, base, { reason: k })) },
        k, el('span', { class: 'count' }, fmtNum(counts[k]))));
    }

    const tbody = el('tbody');
    for (const e of r.entries || []) {
      const replay = el('button', { type: 'button', class: 'small dl-replay act', 'data-id': e.id }, 'Replay');
      on(replay, 'click', () => act('replay', { id: [e.id] }));
      const source = el('td', null, e.source_stream || '?', e.source_group ? ' / ' + e.source_group : null);
      if (e.source_stream && e.source_id) {
        source.appendChild(el('span', { class: 'cell-sub' }, el('a', { href: href('/entry', { key: e.source_stream, id: e.source_id }) }, e.source_id)));
      }
      tbody.appendChild(el('tr', { class: 'dl-row', 'data-id': e.id },
        el('td', { class: 'check' }, el('input', { type: 'checkbox', class: 'dl-select', value: e.id, 'aria-label': 'select ' + e.id })),
        el('td', { class: 'id' }, el('a', { href: href('/entry', { key: stream, id: e.id }) }, e.id)),
        el('td', { class: 'time' }, fmtTime(e.time_ms)),
        el('td', null, el('span', { class: 'badge badge-amber' }, e.reason || '?')),
        el('td', null, e.handler || '?'),
        source,
        el('td', { class: 'num' }, fmtNum(e.deliveries)),
        errorCell(e.error || ''),
        el('td', { class: 'body-cell' }, e.body || '', e.escaped ? [' ', escBadge()] : null),
        el('td', null, replay)));
    }
    const cols = ['', 'ID', 'Time', 'Reason', 'Handler', 'Source', 'Deliveries', 'Error', 'Body', ''];
    if (!tbody.childNodes.length) {
      tbody.appendChild(el('tr', null, el('td', { class: 'empty', colspan: cols.length }, 'No dead letters match.')));
    }
    const head = el('tr', null,
      el('th', { class: 'check' }, el('input', { type: 'checkbox', class: 'dl-select-all', 'aria-label': 'select all' })),
      cols.slice(1).map((t) => el('th', { class: t === 'Deliveries' ? 'num' : null }, t)));

    const pager = el('div', { class: 'pager' });
    if (before) pager.appendChild(el('a', { href: href('/dead-letters', base) }, '← Newest'));
    if (r.before) pager.appendChild(el('a', { id: 'dl-older', href: href('/dead-letters', Object.assign({}, base, { before: r.before })) }, 'Older entries →'));
    pager.appendChild(el('span', { class: 'muted' },
      'Scanned ' + fmtNum(r.scanned) + ' of ' + fmtNum(r.length) + ' entries (at most ' + fmtNum(r.scan_limit) + ' per page); counts by reason are over those scanned.'));

    return el('div', null, chips, el('div', { class: 'table-wrap' }, el('table', { class: 'grid', id: 'dl-table' }, el('thead', null, head), tbody)), pager);
  }

  // ---------------------------------------------------------------- handlers

  async function viewHandlers(main, params, alive) {
    const reload = session.reload ? el('button', { type: 'button', id: 'reload', class: 'primary act' }, 'Reload handlers') : null;
    const confirmSlot = el('div');
    const result = el('div', { id: 'action-result', 'aria-live': 'polite' });
    const listSlot = el('div', null, loading());
    add(main, [
      el('div', { class: 'page-head' }, el('h1', null, 'Handlers'), el('span', { class: 'sub' }, session.dir || ''), reload),
      confirmSlot,
      result,
      listSlot,
    ]);
    const setBusy = (b) => {
      if (reload) reload.disabled = b;
    };

    async function load() {
      const r = await api('/api/handlers');
      if (!alive()) return;
      clear(listSlot).appendChild(renderHandlers(r));
    }

    if (reload) {
      on(reload, 'click', async () => {
        setBusy(true);
        clear(result);
        result.className = '';
        let pv;
        try {
          pv = await api('/api/handlers'); // the files as a reload would load them, and what runs
        } catch (e) {
          if (alive()) showResult(result, 'failed', el('p', null, 'Preview failed: ' + e.message));
          return;
        } finally {
          setBusy(false);
        }
        if (!alive()) return;
        clear(listSlot).appendChild(renderHandlers(pv));
        const changes = reloadChanges(pv);
        const intro = el('p', null, changes.length ? 'These files differ from what runs:' : 'No file changed since the handlers were loaded.');
        const notes = [];
        const problems = pv.problems || [];
        if (problems.length) {
          notes.push(el('p', null, el('strong', null, 'Problems (files that do not load are not taken):')),
            el('ul', null, problems.map((p) => el('li', null, el('code', null, p)))));
        }
        showConfirm(confirmSlot, result, {
          title: 'Reload ' + plural(changes.length, 'changed handler file') + '?',
          intro,
          ids: changes.map((c) => c.file + ': ' + c.change + (c.change === 'changed' ? ' (' + (c.running_version || '?') + ' → ' + (c.disk_version || '?') + ')' : c.change === 'new' ? ' (' + (c.disk_version || '?') + ')' : '')),
          notes,
          okLabel: 'Confirm: reload',
          danger: false,
          allowEmpty: true, // reloading re-reads the directory even when no file changed
          onOk: async () => {
            const r = await post('/api/reload', {});
            if (alive()) load().catch((e) => setError(e.message));
            return el('p', null, r.reloaded ? 'Reloaded.' : 'Not reloaded.');
          },
        }, setBusy);
      });
    }
    await load();
  }

  // What a reload would change, from GET /api/handlers: DIR's files that load now against the files
  // running (their versions): [{file, running_version, disk_version, change: changed|new|removed}].
  function reloadChanges(r) {
    const running = new Map((r.running || []).map((x) => [x.file, x.version]));
    const disk = new Map((r.handlers || []).map((h) => [h.file, h.version]));
    const out = [];
    for (const [file, v] of disk) {
      if (!running.has(file)) out.push({ file, running_version: null, disk_version: v, change: 'new' });
      else if (running.get(file) !== v) out.push({ file, running_version: running.get(file), disk_version: v, change: 'changed' });
    }
    for (const [file, v] of running) {
      if (!disk.has(file)) out.push({ file, running_version: v, disk_version: null, change: 'removed' });
    }
    return out;
  }

  // The Running cell: running (with the version running when the file changed since), not running,
  // or "-" where no handlers run (the standalone console: r.running is null).
  function runningCell(h, running) {
    if (!running) return el('td', { class: 'running' }, '-');
    if (!running.has(h.file)) return el('td', { class: 'running' }, el('span', { class: 'badge' }, 'not running'));
    const v = running.get(h.file);
    return el('td', { class: 'running' }, el('span', { class: 'badge badge-green' }, 'running'),
      v !== h.version ? el('span', { class: 'cell-sub' }, 'version ' + (v || '?') + ' (the file changed since)') : null);
  }

  function renderHandlers(r) {
    const running = Array.isArray(r.running) ? new Map(r.running.map((x) => [x.file, x.version])) : null;
    const cols = [['File', ''], ['Name', ''], ['Version', ''], ['Stream', ''], ['Group', ''], ['Read', ''], ['Lanes', 'num'], ['By key', ''],
      ['Min idle', 'num'], ['Dead letters', ''], ['Partitions', 'num'], ['Running', '']];
    const tbody = el('tbody');
    for (const h of r.handlers || []) {
      tbody.appendChild(el('tr', { class: 'handler-row', 'data-file': h.file },
        el('td', null, h.file),
        el('td', null, h.name || ''),
        el('td', { class: 'id' }, h.version || '?'),
        el('td', null, h.stream || (h.schedule ? 'tick: ' + h.schedule : '')),
        el('td', null, h.group && h.stream ? el('a', { href: href('/group', { stream: h.stream, group: h.group }) }, h.group) : h.group || ''),
        el('td', null, h.read || ''),
        el('td', { class: 'num' }, fmtNum(h.lanes)),
        el('td', null, h.by_key === null || h.by_key === undefined || h.by_key === false ? '-' : String(h.by_key)),
        el('td', { class: 'num' }, h.min_idle_ms === null || h.min_idle_ms === undefined ? '-' : fmtDuration(h.min_idle_ms)),
        el('td', null, h.dead_letter ? el('a', { href: href('/dead-letters', { stream: h.dead_letter }) }, h.dead_letter) : '-'),
        el('td', { class: 'num' }, h.partitions === null || h.partitions === undefined ? '-' : fmtNum(h.partitions)),
        runningCell(h, running)));
    }
    if (!tbody.childNodes.length) tbody.appendChild(el('tr', null, el('td', { class: 'empty', colspan: cols.length }, 'No handler files.')));
    const problems = r.problems || [];
    return el('div', null,
      problems.length
        ? el('div', { class: 'box box-red', id: 'problems' }, el('h2', null, 'Problems (' + problems.length + ')'), el('ul', null, problems.map((p) => el('li', null, el('code', null, p)))))
        : null,
      el('div', { class: 'table-wrap' }, el('table', { class: 'grid', id: 'handlers' },
        el('thead', null, el('tr', null, cols.map(([t, c]) => el('th', { class: c || null }, t)))), tbody)));
  }

  // ---------------------------------------------------------------- start

  async function logout() {
    const btn = $('logout');
    btn.disabled = true;
    try {
      // The answer is a 303 to /login; the page goes there whatever it says.
      await fetch('/logout', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'X-CSRF-Token': session ? session.csrf : '', 'Content-Type': 'application/x-www-form-urlencoded' },
        body: '',
      });
    } catch (e) {
      // unreachable server: the login page will say so
    }
    location.assign('/login');
  }

  async function start() {
    on($('logout'), 'click', logout);
    try {
      session = await api('/api/session');
    } catch (e) {
      clear($('main'));
      setError('Could not start the console: ' + e.message);
      return;
    }
    $('who').textContent = session.name ? 'signed in as ' + session.name : '';
    on(window, 'hashchange', route);
    route();
    // The nav lists the dead-letter streams the overview names: learn them once on other pages too.
    if (parseHash().path !== '/') api('/api/overview').then(learnOverview, () => {});
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
