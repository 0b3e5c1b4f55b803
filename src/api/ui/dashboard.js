// SPDX-License-Identifier: Apache-2.0
// dashboard.js - the tierd dashboard's logic (GET /ui/dashboard.js; page: dashboard.html).
//
// Every second it fetches GET /v1/telemetry (docs/API.md: cumulative counters and histogram
// buckets per (tenant, class, op, tier)), diffs the answer with the previous one, as
// `tierctl top` does (src/cli/top.c), and updates the tenant table and four Chart.js charts;
// every ADVICE_MS it fetches GET /v1/advice (docs/ADVICE.md) for the advice table and the chart
// of each tenant's (and the node's) predicted hit ratio by hot-tier size.
// The token: read from the URL fragment (#token=...), which browsers never send to the server,
// kept in sessionStorage (this tab only), removed from the address bar, and sent only as an
// Authorization header to tierd's own origin. Without Chart.js (GET /ui/chart.js answered 404)
// the table still works.
'use strict';

(function () {
  const REFRESH_MS = 1000;
  const ADVICE_MS = 5000;
  const POINTS = 120; // two minutes of history in the charts
  const TOKEN_KEY = 'tierd.token';
  const TIERS = ['ram', 'disk', 'backend'];
  const COLORS = ['#3366cc', '#dc3912', '#ff9900', '#109618', '#990099', '#0099c6', '#dd4477',
                  '#66aa00', '#b82e2e', '#316395'];

  function readToken() {
    const m = /(?:^|&)token=([^&]*)/.exec(location.hash.slice(1));
    if (m) {
      const t = decodeURIComponent(m[1]);
      try { sessionStorage.setItem(TOKEN_KEY, t); } catch (e) { /* storage off: keep in memory */ }
      history.replaceState(null, '', location.pathname + location.search);
      return t;
    }
    try { return sessionStorage.getItem(TOKEN_KEY); } catch (e) { return null; }
  }

  const token = readToken();
  const stateEl = document.getElementById('state');
  const tbody = document.querySelector('#tenants tbody');

  function setState(kind, text) {
    stateEl.dataset.state = kind;
    stateEl.textContent = text;
  }

  // ---- histogram scheme (the answer's "hist"; see telemetry.h in tierd) ----------------------

  function bucketMid(h, upper) {
    if (upper <= h.min_ns) return h.min_ns;
    if (upper > h.max_ns) return h.max_ns;
    const k = Math.floor(Math.log2(upper - 1)); // 2^k < upper <= 2^(k+1)
    const width = Math.pow(2, k) / h.sub_buckets;
    return upper - width / 2;
  }

  // Quantile q of a map upper_ns -> count: midpoint of the bucket holding rank ceil(q * n).
  function quantile(h, m, q) {
    const ups = Object.keys(m).map(Number).sort((a, b) => a - b);
    let n = 0;
    for (const u of ups) n += m[u];
    if (n === 0) return null;
    const rank = Math.max(1, Math.ceil(q * n));
    let seen = 0;
    for (const u of ups) {
      seen += m[u];
      if (seen >= rank) return bucketMid(h, u);
    }
    return bucketMid(h, ups[ups.length - 1]);
  }

  // ---- one interval ----------------------------------------------------------------------

  function key(e) { return [e.tenant, e.class, e.op || '', e.tier || ''].join('\u0000'); }

  function index(list) {
    const m = new Map();
    for (const e of list) m.set(key(e), e);
    return m;
  }

  function d(cur, prev) { return prev !== undefined && cur >= prev ? cur - prev : cur; }

  function addBuckets(acc, cur, prev) {
    const p = new Map((prev || []).map((b) => [b[0], b[1]]));
    for (const [u, c] of cur) {
      const x = d(c, p.get(u));
      if (x > 0) acc[u] = (acc[u] || 0) + x;
    }
  }

  // Rows per tenant for the interval prev -> cur (prev null: since tierd started).
  function interval(prev, cur, secs) {
    if (prev && prev.started_ns !== cur.started_ns) prev = null; // tierd restarted
    const pops = prev ? index(prev.ops) : new Map();
    const psch = prev ? index(prev.sched) : new Map();
    const rows = new Map();
    const row = (name) => {
      if (!rows.has(name)) {
        rows.set(name, { tenant: name, ops: 0, opsTotal: 0, bytes: 0, reads: [0, 0, 0], lat: {},
                         waitSum: 0, waitN: 0, classes: new Set() });
      }
      return rows.get(name);
    };
    for (const e of cur.ops) {
      const p = pops.get(key(e));
      const r = row(e.tenant);
      r.classes.add(e.class);
      const n = d(e.ops, p && p.ops);
      r.ops += n;
      r.opsTotal += e.ops;
      if (e.op !== 'read' && e.op !== 'write') continue;
      r.bytes += d(e.bytes, p && p.bytes);
      const t = TIERS.indexOf(e.tier);
      if (e.op === 'read' && t >= 0) r.reads[t] += n;
      addBuckets(r.lat, e.buckets, p && p.buckets);
    }
    for (const e of cur.sched) {
      const p = psch.get(key(e));
      const r = row(e.tenant);
      r.waitN += d(e.ops, p && p.ops);
      r.waitSum += d(e.wait.sum_ns, p && p.wait.sum_ns);
    }
    const out = [];
    for (const r of rows.values()) {
      const reads = r.reads[0] + r.reads[1] + r.reads[2];
      out.push({
        tenant: r.tenant,
        classes: Array.from(r.classes).sort(),
        opsPerS: r.ops / secs,
        mbPerS: r.bytes / secs / 1e6,
        hit: reads ? r.reads.map((x) => 100 * x / reads) : null,
        reads: r.reads,
        p50ms: ms(quantile(cur.hist, r.lat, 0.5)),
        p99ms: ms(quantile(cur.hist, r.lat, 0.99)),
        qwaitMs: r.waitN ? r.waitSum / r.waitN / 1e6 : null,
        opsTotal: r.opsTotal,
      });
    }
    out.sort((a, b) => b.opsPerS - a.opsPerS || (a.tenant < b.tenant ? -1 : 1));
    return out;
  }

  function ms(ns) { return ns === null ? null : ns / 1e6; }

  // ---- table -------------------------------------------------------------------------------

  function fmt(x, digits) { return x === null ? '-' : x.toFixed(digits); }

  function renderTable(rows) {
    const keep = new Set();
    for (const r of rows) {
      keep.add(r.tenant);
      let tr = null;
      for (const el of tbody.children) if (el.dataset.tenant === r.tenant) tr = el;
      if (!tr) {
        tr = document.createElement('tr');
        tr.dataset.tenant = r.tenant;
        for (let i = 0; i < 10; i++) tr.appendChild(document.createElement('td'));
      }
      const cells = [r.tenant, fmt(r.opsPerS, 1), fmt(r.mbPerS, 2),
                     fmt(r.hit && r.hit[0], 1), fmt(r.hit && r.hit[1], 1), fmt(r.hit && r.hit[2], 1),
                     fmt(r.p50ms, 3), fmt(r.p99ms, 3), fmt(r.qwaitMs, 3), String(r.opsTotal)];
      cells.forEach((text, i) => { tr.children[i].textContent = text; });
      tr.title = 'classes: ' + r.classes.join(', ');
      tr.classList.toggle('idle', r.opsPerS === 0);
      tbody.appendChild(tr); // (re)append in sorted order
    }
    for (const el of Array.from(tbody.children)) if (!keep.has(el.dataset.tenant)) el.remove();
  }

  // ---- charts ------------------------------------------------------------------------------

  let charts = null;

  function lineChart(id, unit, stacked) {
    return new window.Chart(document.getElementById(id), {
      type: 'line',
      data: { labels: [], datasets: [] },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, normalized: true,
        elements: { point: { radius: 0 } },
        scales: { y: { beginAtZero: true, stacked: !!stacked, title: { display: true, text: unit } } },
        plugins: { legend: { position: 'bottom' } },
      },
    });
  }

  function setupCharts() {
    if (typeof window.Chart !== 'function') {
      document.getElementById('charts').hidden = true;
      const p = document.getElementById('nocharts');
      p.hidden = false;
      p.textContent = 'Charts are off: /ui/chart.js did not load (install Debian\'s ' +
        'libjs-chart.js or set [api] ui_chartjs; see docs/API.md).';
      return null;
    }
    const usage = new window.Chart(document.getElementById('c-usage'), {
      type: 'bar',
      data: { labels: ['ram', 'disk'], datasets: [
        { label: 'used', data: [0, 0], backgroundColor: '#3366cc' },
        { label: 'capacity', data: [0, 0], backgroundColor: '#c5cde0' }] },
      options: { animation: false, responsive: true, maintainAspectRatio: false,
                 scales: { y: { beginAtZero: true, title: { display: true, text: 'GiB' } } },
                 plugins: { legend: { position: 'bottom' } } },
    });
    return { tput: lineChart('c-tput', 'MB/s'), p99: lineChart('c-p99', 'ms'),
             hit: lineChart('c-hit', '%', true), usage: usage };
  }

  function push(chart, label, series) {
    const data = chart.data;
    data.labels.push(label);
    for (const [name, value] of series) {
      let ds = data.datasets.find((x) => x.label === name);
      if (!ds) {
        const color = COLORS[data.datasets.length % COLORS.length];
        ds = { label: name, data: new Array(data.labels.length - 1).fill(null),
               borderColor: color, backgroundColor: color, fill: chart === (charts && charts.hit) };
        data.datasets.push(ds);
      }
      ds.data.push(value);
    }
    for (const ds of data.datasets) {
      while (ds.data.length < data.labels.length) ds.data.push(null);
      while (ds.data.length > POINTS) ds.data.shift();
    }
    while (data.labels.length > POINTS) data.labels.shift();
    chart.update('none');
  }

  function renderCharts(rows, cur) {
    if (!charts) return;
    const label = new Date().toLocaleTimeString();
    push(charts.tput, label, rows.map((r) => [r.tenant, r.mbPerS]));
    push(charts.p99, label, rows.map((r) => [r.tenant, r.p99ms]));
    const reads = [0, 0, 0];
    for (const r of rows) for (let t = 0; t < 3; t++) reads[t] += r.reads[t];
    const all = reads[0] + reads[1] + reads[2];
    push(charts.hit, label, TIERS.map((t, i) => [t, all ? 100 * reads[i] / all : null]));
    const g = cur.gauges && cur.gauges.tiers;
    if (g) {
      const gib = (x) => x / 1073741824;
      charts.usage.data.datasets[0].data = [gib(g.ram.used_bytes), gib(g.disk.used_bytes)];
      charts.usage.data.datasets[1].data = [gib(g.ram.capacity_bytes), gib(g.disk.capacity_bytes)];
      charts.usage.update('none');
    }
  }

  // ---- advice ------------------------------------------------------------------------------

  let adviceChart = null;

  function gib(x) { return (x / 1073741824).toFixed(2) + ' GiB'; }
  function pct(x) { return typeof x === 'number' ? (100 * x).toFixed(1) : '-'; }

  function renderAdvice(a) {
    const state = document.getElementById('advice-state');
    const table = document.getElementById('advice-tenants');
    const fig = document.getElementById('advice-chart');
    if (!a.enabled) {
      state.textContent = '(off: ' + (a.how || '') + ')';
      table.hidden = true;
      fig.hidden = true;
      return;
    }
    state.textContent = '(round ' + a.rounds + ', target utilisation ' +
      (100 * a.target_utilisation).toFixed(0) + ' %, auto_quota ' + (a.auto_quota ? 'on' : 'off') +
      ')';
    table.hidden = false;
    const body = table.tBodies[0];
    body.textContent = '';
    for (const t of a.tenants || []) {
      const tr = document.createElement('tr');
      tr.dataset.adviceTenant = t.name;
      const target = typeof t.stall !== 'number' ? '-' : t.size_for_target === null ? 'none' :
        t.size_for_target === 0 ? 'now' : gib(t.size_for_target);
      for (const text of [t.name, gib(t.share_bytes), pct(t.hit_ratio), pct(t.stall), target,
                          gib(t.split_bytes), String(t.quota_changes)]) {
        const td = document.createElement('td');
        td.textContent = text;
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
    if (typeof window.Chart !== 'function' || !a.node || !a.node.curve) return;
    fig.hidden = false;
    const sizes = a.node.curve.map((p) => p.size_bytes);
    const series = [['node', a.node.curve]].concat((a.tenants || []).map((t) => [t.name, t.curve]));
    const datasets = series.map(([name, curve], i) => ({
      label: name, borderColor: COLORS[i % COLORS.length], backgroundColor: COLORS[i % COLORS.length],
      data: curve.map((p) => (typeof p.hit_ratio === 'number' ? 100 * p.hit_ratio : null)),
    }));
    if (!adviceChart) {
      adviceChart = new window.Chart(document.getElementById('c-advice'), {
        type: 'line',
        data: { labels: [], datasets: [] },
        options: { animation: false, responsive: true, maintainAspectRatio: false,
                   scales: { y: { beginAtZero: true, max: 100, title: { display: true, text: '%' } },
                             x: { title: { display: true, text: 'hot-tier size' } } },
                   plugins: { legend: { position: 'bottom' } } },
      });
    }
    adviceChart.data.labels = sizes.map(gib);
    adviceChart.data.datasets = datasets;
    adviceChart.update('none');
  }

  async function adviceTick() {
    try {
      const headers = token ? { Authorization: 'Bearer ' + token } : {};
      const resp = await fetch('/v1/advice', { headers: headers, cache: 'no-store',
                                               credentials: 'omit', referrerPolicy: 'no-referrer' });
      if (resp.ok) renderAdvice(await resp.json());
    } catch (e) {
      // the telemetry's loop reports an unreachable tierd
    } finally {
      setTimeout(adviceTick, ADVICE_MS);
    }
  }

  // ---- loop --------------------------------------------------------------------------------

  let prev = null;

  async function tick() {
    try {
      const headers = token ? { Authorization: 'Bearer ' + token } : {};
      const resp = await fetch('/v1/telemetry', { headers: headers, cache: 'no-store',
                                                  credentials: 'omit', referrerPolicy: 'no-referrer' });
      if (resp.status === 401) {
        setState('error', 'tierd wants its token: open /ui#token=<[api] token> (the fragment ' +
                 'stays in the browser)');
        return;
      }
      const cur = await resp.json();
      if (!resp.ok) {
        setState('error', 'GET /v1/telemetry: HTTP ' + resp.status + ': ' + (cur.error || ''));
        return;
      }
      const secs = prev ? Math.max(1e-3, (cur.now_ns - prev.now_ns) / 1e9) :
        Math.max(1e-3, (cur.now_ns - cur.started_ns) / 1e9);
      const rows = interval(prev, cur, secs);
      renderTable(rows);
      if (prev) renderCharts(rows, cur);
      document.getElementById('interval').textContent = prev ?
        '(rates over the last ' + secs.toFixed(1) + ' s)' : '(since tierd started)';
      setState('live', 'live, ' + rows.length + ' tenant' + (rows.length === 1 ? '' : 's') +
               ', updated ' + new Date().toLocaleTimeString() +
               (cur.health && cur.health.status !== 'ready' ? ', ' + cur.health.status : ''));
      prev = cur;
    } catch (e) {
      setState('error', 'cannot reach tierd: ' + e);
    } finally {
      setTimeout(tick, REFRESH_MS);
    }
  }

  charts = setupCharts();
  tick();
  adviceTick();
})();
