/*
 * heapprof flame graph page.  Reads the profile data embedded in the page
 * (script#hp-data, format in docs/FLAMEGRAPH.md), builds the call tree of
 * the selected process, heap and dump, and draws it on a canvas (callers
 * above callees), with a chart of the heap size over the dumps and a table
 * of the top functions.  Everything is computed here from the data block;
 * the page never fetches anything.
 *
 * Test hooks: body[data-ready="1"] once drawn, body[data-view] the current
 * view, canvas#flame[data-total] the root total of the dump, [data-root]
 * the root frame (all, or the focused function) and [data-zoom] the zoomed
 * frame, canvas#chart[data-points] the x of each dump's point, rows of
 * #top carry data-func, data-self and data-total, #match carries
 * data-value and data-pct.  canvas#timeline (memory over time) carries
 * data-source ("trace", "dumps" or "none"), data-points (points drawn),
 * data-max (the highest live bytes), data-final (the last point's) and
 * data-window ("from,to" in ns since the process started, or "").
 */
'use strict';
(function () {
  const VIEWS = ['space', 'alloc_space', 'objects', 'alloc_objects'];
  const VIEW_HELP = {
    space: 'bytes allocated and not freed at the dump',
    alloc_space: 'bytes allocated up to the dump, freed or not',
    objects: 'objects allocated and not freed at the dump',
    alloc_objects: 'objects allocated up to the dump, freed or not',
  };
  const ROW_H = 18;
  const MIN_W = 0.3; /* narrower frames are not drawn */
  const MAX_CANVAS_H = 30000;
  const FONT = '11.5px ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", "Liberation Mono", monospace';
  const TOP_ROWS = 100;

  const $ = (id) => document.getElementById(id);

  function esc(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
  }
  function baseName(p) {
    const i = p.lastIndexOf('/');
    return i >= 0 ? p.slice(i + 1) : p;
  }
  function fmtInt(n) {
    return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  }
  function fmtBytes(b) {
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let x = b, i = 0;
    while (Math.abs(x) >= 1024 && i < u.length - 1) { x /= 1024; i++; }
    return i ? x.toFixed(2) + ' ' + u[i] : Math.round(b) + ' B';
  }
  const isBytes = (v) => v === 0 || v === 1;
  function fmtVal(x, v) { return isBytes(v) ? fmtBytes(x) : fmtInt(x); }
  function fmtValLong(x, v) {
    if (!isBytes(v)) return fmtInt(x) + (x === 1 ? ' object' : ' objects');
    return Math.abs(x) >= 1024 ? fmtBytes(x) + ' (' + fmtInt(x) + ' B)' : fmtBytes(x);
  }
  function pct(x, tot) {
    if (!(tot > 0)) return '0%';
    const p = 100 * x / tot;
    return (p >= 99.995 ? '100' : p.toFixed(2)) + '%';
  }
  function secs(ns) {
    return (ns / 1e9).toFixed(3) + ' s';
  }
  /* A time since the process's start, signed: the trace may begin a
     little before the recorded start. */
  function rel(ns, digits) {
    return (ns < 0 ? '-' : '+') + (Math.abs(ns) / 1e9).toFixed(digits || 3) + ' s';
  }
  /* --from/--to: "window +1.500 s to +3.000 s" */
  function windowLabel(p) {
    /* microseconds for a window of a few milliseconds */
    const d = p.window.to - p.window.from < 1e8 ? 6 : 3;
    return 'window ' + rel(p.window.from, d) + ' to ' + rel(p.window.to, d);
  }
  /* What a process's trace kept, in a few words. */
  function traceText(t) {
    let s = (t.mode || 'trace') + ', ' + fmtInt(t.events) + ' events';
    if (t.complete) return s + ', complete';
    s += ', incomplete: ' + fmtInt(t.left_out) + ' left out';
    if (t.overwritten) s += ', ' + fmtInt(t.overwritten) + ' of them overwritten';
    if (t.full !== undefined) s += ', full at ' + rel(t.full);
    return s;
  }

  function fatal(msg) {
    const div = document.createElement('div');
    div.className = 'fatal';
    div.textContent = 'heapprof flame graph: ' + msg;
    document.body.insertBefore(div, document.body.firstChild);
    document.body.dataset.ready = 'error';
  }

  /* ---- data ------------------------------------------------------------ */

  let D;
  try {
    D = JSON.parse($('hp-data').textContent);
    if (!D || D.format !== 'heapprof-flamegraph') throw new Error('not heapprof flame graph data');
  } catch (e) {
    fatal('cannot read the embedded profile data: ' + e.message);
    console.error(e);
    return;
  }
  const funcName = D.funcs.name;
  const nF = funcName.length;
  const funcModule = Int32Array.from(D.funcs.module);
  const funcFile = Int32Array.from(D.funcs.file);
  const modules = D.modules;
  const files = D.files;

  /* The global node table, shifted by one: node 0 is the root "all". */
  const N = D.nodes.parent.length + 1;
  const gParent = new Int32Array(N);
  const gFunc = new Int32Array(N);
  const gLine = new Int32Array(N);
  gParent[0] = -1;
  gFunc[0] = -1;
  {
    const p = D.nodes.parent, f = D.nodes.func, l = D.nodes.line;
    for (let i = 1; i < N; i++) {
      const q = p[i - 1] + 1;
      gParent[i] = q >= 0 && q < i ? q : 0; /* callers come first */
      const fn = f[i - 1];
      gFunc[i] = fn >= 0 && fn < nF ? fn : -1;
      gLine[i] = l[i - 1];
    }
  }
  D.nodes = null;

  /* ---- trees ----------------------------------------------------------- */

  /*
   * A tree: parallel arrays over nodes, callers before callees, node 0 the
   * root.  self[v] / total[v] per view; kids (per view, nonzero only,
   * largest first) are built on demand.
   */
  function makeTree(parent, func, line, self, rootName) {
    const n = parent.length;
    const total = self.map((a) => Float64Array.from(a));
    const t0 = total[0], t1 = total[1], t2 = total[2], t3 = total[3];
    for (let i = n - 1; i > 0; i--) {
      const p = parent[i];
      t0[p] += t0[i]; t1[p] += t1[i]; t2[p] += t2[i]; t3[p] += t3[i];
    }
    const depth = new Int32Array(n);
    for (let i = 1; i < n; i++) depth[i] = depth[parent[i]] + 1;
    return { n, parent, func, line, self, total, depth, rootName, kidsView: -1, kidOff: null, kids: null };
  }

  function ensureKids(t, v) {
    if (t.kidsView === v) return;
    const n = t.n, tot = t.total[v], parent = t.parent;
    const off = new Int32Array(n + 1);
    for (let i = 1; i < n; i++) if (tot[i] > 0) off[parent[i] + 1]++;
    for (let p = 0; p < n; p++) off[p + 1] += off[p];
    const kids = new Int32Array(off[n]);
    const fill = off.slice(0, n);
    for (let i = 1; i < n; i++) if (tot[i] > 0) kids[fill[parent[i]]++] = i;
    const cmp = (a, b) => (tot[b] - tot[a]) || (a - b);
    for (let p = 0; p < n; p++) {
      if (off[p + 1] - off[p] > 1) kids.subarray(off[p], off[p + 1]).sort(cmp);
    }
    t.kidOff = off;
    t.kids = kids;
    t.kidsView = v;
  }

  /* The tree of one heap at one dump. */
  function baseTree(dump) {
    const self = VIEWS.map(() => new Float64Array(N));
    const d = dump ? dump.d : [];
    const s0 = self[0], s1 = self[1], s2 = self[2], s3 = self[3];
    for (let k = 0; k + 4 < d.length; k += 5) {
      const i = d[k] + 1;
      if (!(i >= 1 && i < N)) continue;
      if (d[k + 1] > 0) s0[i] += d[k + 1];
      if (d[k + 2] > 0) s1[i] += d[k + 2];
      if (d[k + 3] > 0) s2[i] += d[k + 3];
      if (d[k + 4] > 0) s3[i] += d[k + 4];
    }
    return makeTree(gParent, gFunc, gLine, self, 'all');
  }

  /*
   * Focus on function F: every outermost call of F in t, with what it
   * calls, merged into one tree rooted at F.
   */
  function focusTree(t, F) {
    const n = t.n;
    const map = new Int32Array(n).fill(-1);
    const parent = [-1], func = [F], line = [0];
    const self = [[0], [0], [0], [0]];
    const index = new Map();
    let firstRoot = true;
    const T = t.total;
    for (let i = 1; i < n; i++) {
      if (!(T[0][i] > 0 || T[1][i] > 0 || T[2][i] > 0 || T[3][i] > 0)) continue;
      const mp = map[t.parent[i]];
      let m;
      if (mp >= 0) {
        const key = mp * (nF + 1) + t.func[i];
        m = index.get(key);
        if (m === undefined) {
          m = parent.length;
          index.set(key, m);
          parent.push(mp); func.push(t.func[i]); line.push(t.line[i]);
          for (let v = 0; v < 4; v++) self[v].push(0);
        } else if (line[m] !== t.line[i]) {
          line[m] = -1;
        }
      } else if (t.func[i] === F) {
        m = 0;
        if (firstRoot) { line[0] = t.line[i]; firstRoot = false; } else if (line[0] !== t.line[i]) line[0] = -1;
      } else {
        continue;
      }
      map[i] = m;
      for (let v = 0; v < 4; v++) self[v][m] += t.self[v][i];
    }
    return makeTree(Int32Array.from(parent), Int32Array.from(func), Int32Array.from(line),
      self.map((a) => Float64Array.from(a)), funcName[F]);
  }

  /* Self and total (each stack counted once) per function, view v. */
  function topFuncs(t, v) {
    ensureKids(t, v);
    const selfF = new Float64Array(nF), totF = new Float64Array(nF), on = new Int32Array(nF);
    const tot = t.total[v], self = t.self[v], off = t.kidOff, kids = t.kids;
    const stack = [0];
    while (stack.length) {
      const x = stack.pop();
      if (x < 0) { on[t.func[~x]]--; continue; }
      const f = t.func[x];
      if (f >= 0) {
        selfF[f] += self[x];
        if (on[f] === 0) totF[f] += tot[x];
        on[f]++;
        stack.push(~x);
      }
      for (let k = off[x + 1] - 1; k >= off[x]; k--) stack.push(kids[k]);
    }
    const list = [];
    for (let f = 0; f < nF; f++) if (selfF[f] > 0 || totF[f] > 0) list.push(f);
    return { selfF, totF, list };
  }

  /* ---- colours --------------------------------------------------------- */

  function hashStr(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    h ^= h >>> 15;
    return (h >>> 0) / 4294967296;
  }
  const colorCache = new Array(nF);
  const dimCache = new Array(nF);
  function isLib(m) {
    if (m < 0 || m >= modules.length) return false;
    const b = baseName(modules[m]);
    return /^(lib|ld-)/.test(b) || b === '[vdso]';
  }
  function funcColor(f) {
    let c = colorCache[f];
    if (c) return c;
    const name = funcName[f];
    const r = hashStr(name), r2 = hashStr(name + '\u0001');
    const m = funcModule[f];
    if (m < 0 || /^\[/.test(name) || /\+0x[0-9a-f]+$/.test(name)) {
      c = 'hsl(220, 8%, ' + (72 + 8 * r).toFixed(1) + '%)';
    } else if (isLib(m)) {
      c = 'hsl(' + (32 + 16 * r).toFixed(1) + ', ' + (45 + 15 * r2).toFixed(1) + '%, ' + (66 + 8 * r2).toFixed(1) + '%)';
    } else {
      c = 'hsl(' + (4 + 40 * r).toFixed(1) + ', ' + (78 + 14 * r2).toFixed(1) + '%, ' + (58 + 10 * r2).toFixed(1) + '%)';
    }
    colorCache[f] = c;
    return c;
  }
  function dimColor(f) {
    let c = dimCache[f];
    if (c) return c;
    c = 'hsl(' + (20 + 30 * hashStr(funcName[f])).toFixed(1) + ', 12%, 86%)';
    dimCache[f] = c;
    return c;
  }
  const ROOT_COLOR = '#c9d0dc';
  const MATCH_COLOR = '#d946ef';

  /* ---- state ----------------------------------------------------------- */

  const S = {
    proc: 0, heap: 0, dump: 0, view: Math.max(0, VIEWS.indexOf(D.view)),
    base: null, focus: -1, ftree: null, zoom: 0,
    search: null, match: null, sortBy: 'self', hover: -1,
  };
  const procs = D.procs || [];

  function curProc() { return procs[S.proc]; }
  function curHeap() { const p = curProc(); return p && p.heaps[S.heap]; }
  function curDumpState() { const h = curHeap(); return h && h.dumps[S.dump]; }
  function curTree() { return S.ftree || S.base; }

  function rebuild() {
    S.base = baseTree(curDumpState());
    S.ftree = S.focus >= 0 ? focusTree(S.base, S.focus) : null;
    const t = curTree();
    if (S.ftree || S.zoom >= t.n || !(t.total[S.view][S.zoom] > 0)) S.zoom = 0;
  }

  /* ---- controls -------------------------------------------------------- */

  function fillSelect(sel, items, selected) {
    sel.textContent = '';
    items.forEach((text, i) => {
      const o = document.createElement('option');
      o.value = String(i);
      o.textContent = text;
      if (i === selected) o.selected = true;
      sel.appendChild(o);
    });
    sel.disabled = items.length < 2;
  }

  function fillControls() {
    fillSelect($('proc'), procs.map((p) => 'pid ' + (p.id || p.pid) + ' ' + baseName(p.name || '?')), S.proc);
    const p = curProc();
    fillSelect($('heap'), p ? p.heaps.map((h) => h.name) : [], S.heap);
    fillSelect($('dump'), p ? p.dumps.map((d, i) => p.window ? windowLabel(p) : '#' + (i + 1) + '  +' + secs(d.ts - p.start) + '  (' + d.reason + ')') : [], S.dump);
    for (const b of $('views').querySelectorAll('button')) {
      b.classList.toggle('on', b.dataset.view === VIEWS[S.view]);
    }
  }

  function selectProc(i) {
    S.proc = i;
    S.heap = 0;
    const p = curProc();
    S.dump = p ? Math.max(0, p.dumps.length - 1) : 0;
    S.zoom = 0;
    S.focus = -1;
    update(true);
  }
  function selectHeap(i) { S.heap = i; update(true); }
  function selectDump(i) { S.dump = i; update(true); }
  function selectView(v) { S.view = v; const t = curTree(); if (!(t.total[v][S.zoom] > 0)) S.zoom = 0; update(false); }
  function setZoom(node) { S.zoom = node; renderFlame(); }
  function setFocus(f) {
    S.focus = f;
    S.zoom = 0;
    S.ftree = f >= 0 ? focusTree(S.base, f) : null;
    renderAllButChart();
  }

  /* ---- summary --------------------------------------------------------- */

  function renderSummary() {
    const el = $('summary');
    const p = curProc();
    if (!p) { el.innerHTML = '<h2>No processes in this profile</h2>'; return; }
    const ds = curDumpState();
    const d = p.dumps[S.dump];
    const tot = ds ? ds.tot : [0, 0, 0, 0];
    let h = '<h2>' + esc(baseName(p.name || '?')) + ' <span class="hint">pid ' + (p.id || p.pid) + '</span></h2>';
    h += '<div class="cmd">' + esc(p.cmdline) + '</div>';
    h += '<table>';
    h += '<tr><td>sampling</td><td class="num">' + (p.interval === 1 ? 'every allocation' : 'every ' + fmtBytes(p.interval) + ' (mean)') + '</td></tr>';
    if (p.window) {
      h += '<tr title="allocations made in the window; space and objects: those still live at its end"><td>window</td><td class="num">' +
        esc(windowLabel(p).slice(7)) + '</td></tr>';
    } else {
      h += '<tr><td>dump</td><td class="num">' + (d ? (S.dump + 1) + ' of ' + p.dumps.length + ', +' + secs(d.ts - p.start) + ' (' + esc(d.reason) + ')' : 'none') + '</td></tr>';
    }
    if (p.trace) {
      h += '<tr' + (p.trace.complete ? '' : ' class="warn"') + ' title="heapprof record --trace: what the event trace kept"><td>trace</td><td class="num">' +
        esc(traceText(p.trace)) + '</td></tr>';
    }
    VIEWS.forEach((name, v) => {
      h += '<tr' + (v === S.view ? ' class="on"' : '') + ' title="' + esc(VIEW_HELP[name]) + '"><td>' + name + '</td><td class="num">' + fmtValLong(tot[v] || 0, v) + '</td></tr>';
    });
    /* The process's memory beside the profile (seed 002: heapprofd vs
       malloc_info() vs RSS), when the profile has it for this dump. */
    const mem = d && d.mem ? d.mem : null;
    if (mem) {
      const row = (label, key, help) => {
        if (mem[key] === undefined) return;
        h += '<tr class="mem" title="' + esc(help) + '"><td>' + label + '</td><td class="num">' + fmtValLong(mem[key], 0) + '</td></tr>';
      };
      row('malloc in use', 'malloc_in_use', 'glibc mallinfo2 at exit: blocks in use, with allocator headers');
      row('malloc free, kept', 'malloc_free', 'glibc mallinfo2 at exit: freed but kept by the allocator');
      row('RSS, anonymous', 'rss_anon', 'resident private memory of the process (heap, stacks, ...)');
      row('RSS, total', 'rss', "resident memory, also code, files and heapprof's shared tables");
      row('memory limit', 'memory_limit', "its memory cgroup's limit (the lowest of its and its ancestors')");
      row('cgroup usage', 'cgroup_usage', 'its memory cgroup: every process in it, page cache included');
      row('cgroup usage, peak', 'cgroup_peak', 'its memory cgroup: the highest usage so far');
    }
    if (d && d.reason === 'oom-kill')
      h += '<tr class="mem"><td colspan="2">killed by the OOM killer: this dump is its heap at the kill</td></tr>';
    else if (d && (d.reason === 'memory' || d.reason === 'pressure'))
      h += '<tr class="mem"><td colspan="2">taken because memory got tight (' + esc(d.reason) + ')</td></tr>';
    h += '</table>';
    el.innerHTML = h;
  }

  /* ---- chart ----------------------------------------------------------- */

  const chart = $('chart');
  let chartPts = [];

  function renderChart() {
    const dpr = window.devicePixelRatio || 1;
    const W = Math.max(200, chart.clientWidth), H = 130;
    chart.width = Math.round(W * dpr);
    chart.height = Math.round(H * dpr);
    const c = chart.getContext('2d');
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.clearRect(0, 0, W, H);
    chartPts = [];
    chart.dataset.points = '';
    const p = curProc(), h = curHeap();
    c.font = '11px system-ui, sans-serif';
    if (!p || !h || !p.dumps.length) {
      c.fillStyle = '#667085';
      c.fillText('no dumps', 10, 20);
      return;
    }
    const L = 72, R = 16, T = 10, B = 22;
    const pw = W - L - R, ph = H - T - B;
    const n = p.dumps.length;
    const space = h.dumps.map((d) => Math.max(0, d.tot[0]));
    const alloc = h.dumps.map((d) => Math.max(0, d.tot[1]));
    /* Anonymous RSS beside the heap where the profile has it. */
    const rss = p.dumps.map((d) => d.mem && d.mem.rss_anon !== undefined ? d.mem.rss_anon : null);
    const hasRss = rss.some((v) => v !== null);
    $('rsskey').style.display = hasRss ? '' : 'none';
    const max = Math.max(1, ...space, ...alloc, ...rss.filter((v) => v !== null));
    const t0 = p.dumps[0].ts, t1 = p.dumps[n - 1].ts;
    const byTime = n > 1 && t1 > t0;
    const xOf = (i) => n === 1 ? L + pw / 2 : L + pw * (byTime ? (p.dumps[i].ts - t0) / (t1 - t0) : i / (n - 1));
    const yOf = (v) => T + ph * (1 - v / max);
    /* grid */
    c.strokeStyle = '#e6e8ee';
    c.fillStyle = '#667085';
    c.lineWidth = 1;
    c.textAlign = 'right';
    c.textBaseline = 'middle';
    for (let k = 0; k <= 2; k++) {
      const v = max * k / 2, y = Math.round(yOf(v)) + 0.5;
      c.beginPath(); c.moveTo(L, y); c.lineTo(W - R, y); c.stroke();
      c.fillText(fmtBytes(v), L - 6, y);
    }
    c.textBaseline = 'alphabetic';
    c.textAlign = 'left';
    c.fillText('+' + secs(t0 - p.start), L, H - 6);
    if (n > 1) { c.textAlign = 'right'; c.fillText('+' + secs(t1 - p.start), W - R, H - 6); }
    /* selected dump */
    const xs = xOf(S.dump);
    c.strokeStyle = '#98a2b3';
    c.setLineDash([3, 3]);
    c.beginPath(); c.moveTo(Math.round(xs) + 0.5, T); c.lineTo(Math.round(xs) + 0.5, T + ph); c.stroke();
    c.setLineDash([]);
    /* space: area and line */
    if (n > 1) {
      c.beginPath();
      c.moveTo(xOf(0), yOf(0));
      for (let i = 0; i < n; i++) c.lineTo(xOf(i), yOf(space[i]));
      c.lineTo(xOf(n - 1), yOf(0));
      c.closePath();
      c.fillStyle = 'rgba(47, 111, 222, 0.14)';
      c.fill();
    }
    const line = (vals, color) => {
      c.strokeStyle = color;
      c.lineWidth = 2;
      c.beginPath();
      for (let i = 0; i < n; i++) (i ? c.lineTo : c.moveTo).call(c, xOf(i), yOf(vals[i]));
      c.stroke();
      for (let i = 0; i < n; i++) {
        c.beginPath();
        c.arc(xOf(i), yOf(vals[i]), i === S.dump ? 5 : 3, 0, 2 * Math.PI);
        c.fillStyle = i === S.dump ? color : '#fff';
        c.fill();
        c.lineWidth = 2;
        c.stroke();
      }
    };
    if (hasRss) {
      c.strokeStyle = '#7a8599';
      c.lineWidth = 1.5;
      c.setLineDash([5, 3]);
      c.beginPath();
      let started = false;
      for (let i = 0; i < n; i++) {
        if (rss[i] === null) continue;
        (started ? c.lineTo : c.moveTo).call(c, xOf(i), yOf(rss[i]));
        started = true;
      }
      if (n === 1 && rss[0] !== null) { c.moveTo(xOf(0) - 8, yOf(rss[0])); c.lineTo(xOf(0) + 8, yOf(rss[0])); }
      c.stroke();
      c.setLineDash([]);
    }
    line(alloc, '#f08c2e');
    line(space, '#2f6fde');
    for (let i = 0; i < n; i++) chartPts.push(xOf(i));
    chart.dataset.points = chartPts.map((x) => x.toFixed(1)).join(',');
  }

  function chartIndexAt(ev) {
    if (!chartPts.length) return -1;
    const r = chart.getBoundingClientRect();
    const x = ev.clientX - r.left;
    let best = 0;
    for (let i = 1; i < chartPts.length; i++) if (Math.abs(chartPts[i] - x) < Math.abs(chartPts[best] - x)) best = i;
    return best;
  }

  /* ---- memory over time ------------------------------------------------- */

  /*
   * Live bytes of the selected process and heap over time: from the event
   * trace when there is one (the heap's timeline: live bytes at the end of
   * each bucket and the highest within it), else a line through the dumps'
   * space.  Dumps are ticks on the time axis (click near one to show it);
   * a --from/--to window is a shaded band.
   */
  const tl = $('timeline');
  let tlGeom = null;

  function timelineSeries(p, h) {
    if (h && h.timeline && h.timeline.live && h.timeline.live.length) {
      const T = h.timeline, n = T.live.length, step = (T.t1 - T.t0) / n;
      const t = [T.t0], live = [T.base || 0], peak = [live[0]];
      for (let i = 0; i < n; i++) {
        t.push(T.t0 + step * (i + 1));
        live.push(T.live[i]);
        peak.push(Math.max(T.peak[i], T.live[i]));
      }
      return { source: 'trace', t, live, peak, t0: T.t0, t1: T.t1 };
    }
    if (h && p.dumps.length && !p.window) {
      const t = p.dumps.map((d) => d.ts - p.start);
      const live = h.dumps.map((d) => Math.max(0, d.tot[0]));
      const t1 = Math.max(t[t.length - 1], p.end > p.start ? p.end - p.start : 0, 1);
      return { source: 'dumps', t, live, peak: null, t0: 0, t1 };
    }
    return { source: 'none', t: [], live: [], peak: null, t0: 0, t1: 1 };
  }

  function renderTimeline() {
    const dpr = window.devicePixelRatio || 1;
    const W = Math.max(200, tl.clientWidth), H = 150;
    tl.width = Math.round(W * dpr);
    tl.height = Math.round(H * dpr);
    const c = tl.getContext('2d');
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.clearRect(0, 0, W, H);
    c.font = '11px system-ui, sans-serif';
    const p = curProc(), h = curHeap();
    const sr = p ? timelineSeries(p, h) : timelineSeries(null, null);
    const note = $('tl-note');
    note.classList.remove('warn');
    if (sr.source === 'trace') {
      note.textContent = 'from the event trace (' + traceText(p.trace) + ')' +
        (p.trace.anchor === 'end' ? '; counted back from the final dump, the oldest events being gone' : '') +
        (p.trace.complete ? '' : '; what was left out is missing from the curve');
      if (!p.trace.complete) note.classList.add('warn');
    } else if (sr.source === 'dumps') {
      note.textContent = 'from the dumps\u2019 live bytes (no event trace: record --trace charts every change)';
    } else {
      note.textContent = p && p.window ? 'no event trace for this process' : 'nothing recorded';
    }
    $('tl-peakkey').style.display = sr.peak ? '' : 'none';
    $('tl-winkey').style.display = p && p.window ? '' : 'none';
    $('tl-dumpkey').style.display = p && p.dumps.length && !p.window ? '' : 'none';
    tl.dataset.source = sr.source;
    tl.dataset.points = String(sr.t.length);
    tl.dataset.window = p && p.window ? p.window.from + ',' + p.window.to : '';
    tlGeom = null;
    if (!sr.t.length) {
      tl.dataset.max = '0';
      tl.dataset.final = '0';
      c.fillStyle = '#667085';
      c.fillText(note.textContent, 10, 20);
      return;
    }
    const L = 72, R = 16, T = 10, B = 24;
    const pw = W - L - R, ph = H - T - B;
    let max = 1;
    for (const v of sr.peak || sr.live) max = Math.max(max, v);
    tl.dataset.max = String(Math.max(...(sr.peak || sr.live)));
    tl.dataset.final = String(sr.live[sr.live.length - 1]);
    const span = Math.max(1, sr.t1 - sr.t0);
    const xOf = (t) => L + pw * (t - sr.t0) / span;
    const yOf = (v) => T + ph * (1 - Math.max(0, v) / max);
    tlGeom = { xOf, sr, L, pw };
    /* grid and axes */
    c.strokeStyle = '#e6e8ee';
    c.fillStyle = '#667085';
    c.lineWidth = 1;
    c.textAlign = 'right';
    c.textBaseline = 'middle';
    for (let k = 0; k <= 2; k++) {
      const v = max * k / 2, y = Math.round(yOf(v)) + 0.5;
      c.beginPath(); c.moveTo(L, y); c.lineTo(W - R, y); c.stroke();
      c.fillText(fmtBytes(v), L - 6, y);
    }
    c.textBaseline = 'alphabetic';
    for (let k = 0; k <= 4; k++) {
      const t = sr.t0 + span * k / 4;
      c.textAlign = k === 0 ? 'left' : k === 4 ? 'right' : 'center';
      c.fillText(rel(t), xOf(t), H - 6);
    }
    /* the window */
    if (p.window) {
      const x0 = xOf(p.window.from), x1 = xOf(p.window.to);
      c.fillStyle = 'rgba(255, 138, 42, 0.16)';
      c.fillRect(x0, T, Math.max(1, x1 - x0), ph);
      c.strokeStyle = '#ff8a2a';
      c.lineWidth = 1;
      for (const x of [x0, x1]) { c.beginPath(); c.moveTo(Math.round(x) + 0.5, T); c.lineTo(Math.round(x) + 0.5, T + ph); c.stroke(); }
      c.fillStyle = '#b54708';
      c.textAlign = x0 - L > pw / 2 ? 'right' : 'left';
      c.fillText(windowLabel(p), c.textAlign === 'left' ? x0 + 4 : x1 - 4, T + 12);
    }
    const n = sr.t.length;
    /* the highest within each bucket: an envelope above the line */
    if (sr.peak) {
      c.beginPath();
      c.moveTo(xOf(sr.t[0]), yOf(0));
      for (let i = 0; i < n; i++) c.lineTo(xOf(sr.t[i]), yOf(sr.peak[i]));
      c.lineTo(xOf(sr.t[n - 1]), yOf(0));
      c.closePath();
      c.fillStyle = 'rgba(47, 111, 222, 0.16)';
      c.fill();
    }
    c.strokeStyle = '#2f6fde';
    c.lineWidth = 1.8;
    c.beginPath();
    for (let i = 0; i < n; i++) (i ? c.lineTo : c.moveTo).call(c, xOf(sr.t[i]), yOf(sr.live[i]));
    if (n === 1) { c.moveTo(xOf(sr.t[0]) - 6, yOf(sr.live[0])); c.lineTo(xOf(sr.t[0]) + 6, yOf(sr.live[0])); }
    c.stroke();
    /* dumps: ticks on the axis, the shown one darker */
    if (!p.window) {
      p.dumps.forEach((d, i) => {
        const x = Math.round(xOf(d.ts - p.start)) + 0.5;
        c.strokeStyle = i === S.dump ? '#1d2330' : '#98a2b3';
        c.lineWidth = i === S.dump ? 2 : 1;
        c.beginPath(); c.moveTo(x, T + ph - (i === S.dump ? 12 : 7)); c.lineTo(x, T + ph); c.stroke();
      });
    }
  }

  /* The series index nearest the pointer, and the dump nearest it. */
  function timelineAt(ev) {
    if (!tlGeom) return null;
    const r = tl.getBoundingClientRect();
    const x = ev.clientX - r.left, g = tlGeom, sr = g.sr;
    const t = sr.t0 + (x - g.L) / g.pw * Math.max(1, sr.t1 - sr.t0);
    let best = 0;
    for (let i = 1; i < sr.t.length; i++) if (Math.abs(sr.t[i] - t) < Math.abs(sr.t[best] - t)) best = i;
    const p = curProc();
    let dump = -1;
    if (p && !p.window) {
      p.dumps.forEach((d, i) => {
        if (Math.abs(g.xOf(d.ts - p.start) - x) <= 6 && (dump < 0 || Math.abs(g.xOf(d.ts - p.start) - x) < Math.abs(g.xOf(p.dumps[dump].ts - p.start) - x))) dump = i;
      });
    }
    return { i: best, t, dump };
  }

  /* ---- flame graph ----------------------------------------------------- */

  const flame = $('flame');
  const fctx = flame.getContext('2d');
  let charW = 7;
  /* Laid-out frames: parallel arrays, and per depth the frames in x order. */
  let R = { x: [], w: [], d: [], node: [], anc: [], rows: [], W: 0 };

  function layoutFlame() {
    const t = curTree(), v = S.view;
    ensureKids(t, v);
    const W = Math.max(200, $('flame-wrap').clientWidth);
    const tot = t.total[v];
    const maxRows = Math.floor(MAX_CANVAS_H / ROW_H);
    const L = { x: [], w: [], d: [], node: [], anc: [], rows: [], W };
    const add = (node, x, w, d, anc) => {
      const k = L.x.length;
      L.x.push(x); L.w.push(w); L.d.push(d); L.node.push(node); L.anc.push(anc);
      (L.rows[d] || (L.rows[d] = [])).push(k);
    };
    if (!(tot[0] > 0)) return L;
    const chain = [];
    for (let x = S.zoom; x >= 0; x = t.parent[x]) chain.push(x);
    chain.reverse();
    chain.forEach((x, i) => add(x, 0, W, i, i < chain.length - 1));
    const z = S.zoom, zd = chain.length - 1;
    const scale = W / tot[z];
    const sn = [z], sx = [0], sd = [zd];
    const off = t.kidOff, kids = t.kids;
    while (sn.length) {
      const node = sn.pop(), x0 = sx.pop(), d = sd.pop();
      if (node !== z) add(node, x0, tot[node] * scale, d, false);
      if (d + 1 >= maxRows) continue;
      /* children left to right; pushed in reverse so the left one is next */
      let cx = x0, m = 0;
      const tmpN = [], tmpX = [];
      for (let k = off[node]; k < off[node + 1]; k++) {
        const c = kids[k], w = tot[c] * scale;
        if (w < MIN_W) break; /* sorted: the rest are narrower */
        tmpN.push(c); tmpX.push(cx);
        cx += w; m++;
      }
      for (let j = m - 1; j >= 0; j--) { sn.push(tmpN[j]); sx.push(tmpX[j]); sd.push(d + 1); }
    }
    return L;
  }

  function frameLabel(t, node) {
    if (node === 0) return t.rootName;
    return funcName[t.func[node]];
  }

  function paintFlame() {
    const t = curTree();
    const dpr = window.devicePixelRatio || 1;
    const W = R.W;
    const rows = Math.max(1, R.rows.length);
    const H = rows * ROW_H + 1;
    flame.style.height = H + 'px';
    flame.width = Math.round(W * dpr);
    flame.height = Math.round(H * dpr);
    fctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    fctx.clearRect(0, 0, W, H);
    fctx.font = FONT;
    fctx.textBaseline = 'middle';
    charW = fctx.measureText('0123456789').width / 10 || 7;
    const match = S.match;
    for (let k = 0; k < R.x.length; k++) {
      const node = R.node[k], f = node === 0 && !S.ftree ? -1 : t.func[node];
      const x = R.x[k], w = R.w[k], y = R.d[k] * ROW_H;
      let color;
      if (f < 0) color = ROOT_COLOR;
      else if (match) color = match[f] ? MATCH_COLOR : dimColor(f);
      else color = funcColor(f);
      fctx.globalAlpha = R.anc[k] ? 0.55 : 1;
      fctx.fillStyle = color;
      fctx.fillRect(x, y, w > 2 ? w - 1 : w, ROW_H - 1);
      if (node === S.hover) {
        fctx.strokeStyle = '#1d2330';
        fctx.lineWidth = 1.5;
        fctx.strokeRect(x + 0.75, y + 0.75, Math.max(0, (w > 2 ? w - 1 : w) - 1.5), ROW_H - 2.5);
      }
      if (w > 26) {
        const max = Math.floor((w - 8) / charW);
        let s = frameLabel(t, node);
        if (s.length > max) s = max > 2 ? s.slice(0, max - 1) + '\u2026' : '';
        if (s) {
          fctx.fillStyle = match && f >= 0 && match[f] ? '#fff' : '#1a1a1a';
          fctx.fillText(s, x + 4, y + ROW_H / 2);
        }
      }
    }
    fctx.globalAlpha = 1;
  }

  function renderFlame() {
    const t = curTree(), v = S.view;
    R = layoutFlame();
    const empty = $('empty');
    const tot = t.total[v][0];
    if (!(tot > 0)) {
      empty.hidden = false;
      empty.textContent = curProc() ? 'Nothing in view ' + VIEWS[v] + ' at this dump.' : 'No processes in this profile.';
    } else {
      empty.hidden = true;
    }
    paintFlame();
    flame.dataset.total = String(S.base.total[v][0]);
    flame.dataset.root = t.rootName;
    flame.dataset.shown = String(tot);
    flame.dataset.zoom = frameLabel(t, S.zoom);
    renderCrumbs();
    renderMatch();
  }

  function renderCrumbs() {
    const t = curTree();
    const chain = [];
    for (let x = S.zoom; x >= 0; x = t.parent[x]) chain.push(x);
    chain.reverse();
    const el = $('crumbs');
    el.textContent = '';
    if (chain.length < 2) return;
    chain.forEach((x, i) => {
      if (i) el.appendChild(document.createTextNode(' \u203a '));
      const a = document.createElement('a');
      a.textContent = frameLabel(t, x);
      a.addEventListener('click', () => setZoom(x));
      el.appendChild(a);
    });
  }

  function hitTest(ev) {
    const r = flame.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    const d = Math.floor(y / ROW_H);
    const row = R.rows[d];
    if (!row) return -1;
    let lo = 0, hi = row.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1, k = row[mid];
      if (x < R.x[k]) hi = mid - 1;
      else if (x >= R.x[k] + R.w[k]) lo = mid + 1;
      else return R.node[k];
    }
    return -1;
  }

  /* ---- tooltip ---------------------------------------------------------- */

  const tip = $('tip');
  function showTip(ev, html) {
    tip.innerHTML = html;
    tip.hidden = false;
    const pad = 14, w = tip.offsetWidth, h = tip.offsetHeight;
    let x = ev.clientX + pad, y = ev.clientY + pad;
    if (x + w > window.innerWidth - 4) x = Math.max(4, ev.clientX - w - pad);
    if (y + h > window.innerHeight - 4) y = Math.max(4, ev.clientY - h - pad);
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  }
  function hideTip() { tip.hidden = true; }

  function nodeTip(t, node) {
    const isRoot = node === 0;
    const f = isRoot && !S.ftree ? -1 : t.func[node];
    let h = '<div class="n">' + esc(frameLabel(t, node)) + '</div>';
    if (f >= 0) {
      const m = funcModule[f], file = funcFile[f], line = t.line[node];
      const loc = [];
      if (m >= 0 && m < modules.length) loc.push(baseName(modules[m]));
      if (file >= 0 && file < files.length) loc.push(files[file] + (line > 0 ? ':' + line : line < 0 ? ' (several lines)' : ''));
      if (loc.length) h += '<div class="loc">' + esc(loc.join('  \u00b7  ')) + '</div>';
    } else {
      h += '<div class="loc">every stack of this dump</div>';
    }
    h += '<table><tr><th></th><th>total</th><th></th><th>self</th></tr>';
    VIEWS.forEach((name, v) => {
      const tv = t.total[v][node], sv = t.self[v][node];
      h += '<tr' + (v === S.view ? ' class="on"' : '') + '><th>' + name + '</th><td>' + esc(fmtValLong(tv, v)) +
        '</td><td>' + pct(tv, S.base.total[v][0]) + '</td><td>' + esc(fmtVal(sv, v)) + '</td></tr>';
    });
    h += '</table>';
    if (S.zoom !== 0 && node !== S.zoom) {
      h += '<div class="loc" style="margin:6px 0 0">' + pct(t.total[S.view][node], t.total[S.view][S.zoom]) + ' of the zoomed frame</div>';
    }
    return h;
  }

  /* ---- search ----------------------------------------------------------- */

  function setSearch(text) {
    const input = $('search');
    input.classList.remove('bad');
    S.search = null;
    S.match = null;
    if (text) {
      let re = null;
      const m = /^\/(.*)\/([a-z]*)$/.exec(text);
      try {
        re = m ? new RegExp(m[1], m[2].replace(/[gy]/g, '')) : null;
      } catch (e) {
        input.classList.add('bad');
      }
      const lower = text.toLowerCase();
      const match = new Uint8Array(nF);
      for (let f = 0; f < nF; f++) {
        match[f] = re ? (re.test(funcName[f]) ? 1 : 0) : (!m && funcName[f].toLowerCase().includes(lower) ? 1 : 0);
      }
      S.search = text;
      S.match = match;
    }
    renderFlame();
  }

  function renderMatch() {
    const el = $('match');
    if (!S.match) { el.textContent = ''; delete el.dataset.value; delete el.dataset.pct; return; }
    const t = curTree(), v = S.view, tot = t.total[v];
    const covered = new Uint8Array(t.n);
    let sum = 0;
    for (let i = 1; i < t.n; i++) {
      if (!(tot[i] > 0)) continue;
      const p = t.parent[i], f = t.func[i];
      if (covered[p]) { covered[i] = 1; continue; }
      if (f >= 0 && S.match[f]) { covered[i] = 1; sum += tot[i]; }
    }
    if (S.ftree && S.match[S.focus]) sum = tot[0];
    const p = pct(sum, tot[0]);
    el.dataset.value = String(sum);
    el.dataset.pct = p;
    el.textContent = 'Matched: ' + fmtVal(sum, v) + ' (' + p + ')';
  }

  /* ---- top table -------------------------------------------------------- */

  function renderTop() {
    const t = S.base, v = S.view;
    const { selfF, totF, list } = topFuncs(t, v);
    const key = S.sortBy === 'total' ? totF : selfF, other = S.sortBy === 'total' ? selfF : totF;
    list.sort((a, b) => (key[b] - key[a]) || (other[b] - other[a]) || (funcName[a] < funcName[b] ? -1 : 1));
    const all = t.total[v][0];
    const body = $('top').tBodies[0];
    body.textContent = '';
    const maxKey = list.length ? key[list[0]] : 0;
    const frag = document.createDocumentFragment();
    list.slice(0, TOP_ROWS).forEach((f, i) => {
      const tr = document.createElement('tr');
      tr.dataset.func = funcName[f];
      tr.dataset.self = String(selfF[f]);
      tr.dataset.total = String(totF[f]);
      if (f === S.focus) tr.className = 'on';
      const m = funcModule[f];
      const bar = maxKey > 0 ? (100 * key[f] / maxKey).toFixed(1) : 0;
      tr.innerHTML = '<td class="num">' + (i + 1) + '</td>' +
        '<td class="num' + (S.sortBy === 'self' ? ' barcell' : '') + '">' + (S.sortBy === 'self' ? '<span class="b" style="width:' + bar + '%"></span>' : '') + '<span class="t">' + esc(fmtVal(selfF[f], v)) + '</span></td>' +
        '<td class="num">' + pct(selfF[f], all) + '</td>' +
        '<td class="num' + (S.sortBy === 'total' ? ' barcell' : '') + '">' + (S.sortBy === 'total' ? '<span class="b" style="width:' + bar + '%"></span>' : '') + '<span class="t">' + esc(fmtVal(totF[f], v)) + '</span></td>' +
        '<td class="num">' + pct(totF[f], all) + '</td>' +
        '<td class="fn">' + esc(funcName[f]) + '</td>' +
        '<td class="mod">' + esc(m >= 0 && m < modules.length ? baseName(modules[m]) : '') + '</td>';
      tr.addEventListener('click', () => setFocus(S.focus === f ? -1 : f));
      frag.appendChild(tr);
    });
    body.appendChild(frag);
    if (list.length > TOP_ROWS) {
      const tr = document.createElement('tr');
      tr.innerHTML = '<td></td><td colspan="6" class="hint">' + (list.length - TOP_ROWS) + ' more functions</td>';
      body.appendChild(tr);
    }
    for (const th of $('top').tHead.querySelectorAll('th.sortable')) th.classList.toggle('sorted', th.dataset.sort === S.sortBy);
  }

  function renderFocusBar() {
    const bar = $('focusbar');
    if (S.focus < 0) { bar.hidden = true; bar.textContent = ''; return; }
    bar.hidden = false;
    bar.innerHTML = '<span>Focused on <b>' + esc(funcName[S.focus]) + '</b>: every call of it, merged, with what it calls.</span><button type="button">Clear focus</button>';
    bar.querySelector('button').addEventListener('click', () => setFocus(-1));
  }

  /* ---- everything -------------------------------------------------------- */

  function renderAllButChart() {
    document.body.dataset.view = VIEWS[S.view];
    fillControls();
    renderSummary();
    renderFocusBar();
    renderFlame();
    renderTop();
  }

  function update(rebuildTree) {
    if (rebuildTree) rebuild();
    renderAllButChart();
    renderChart();
    renderTimeline();
  }

  function init() {
    const file = D.file || '';
    $('file').textContent = file;
    document.title = 'heapprof flame graph' + (file ? ': ' + file : '');
    /* the first process with a dump, its last dump */
    let first = procs.findIndex((p) => p.dumps.length > 0 && p.heaps.length > 0);
    if (first < 0) first = 0;
    S.proc = first;
    const p = curProc();
    S.dump = p ? Math.max(0, p.dumps.length - 1) : 0;

    $('proc').addEventListener('change', (e) => selectProc(+e.target.value));
    $('heap').addEventListener('change', (e) => selectHeap(+e.target.value));
    $('dump').addEventListener('change', (e) => selectDump(+e.target.value));
    for (const b of $('views').querySelectorAll('button')) {
      b.addEventListener('click', () => selectView(VIEWS.indexOf(b.dataset.view)));
    }
    $('reset').addEventListener('click', () => setZoom(0));
    $('search').addEventListener('input', (e) => setSearch(e.target.value.trim()));
    for (const th of $('top').tHead.querySelectorAll('th.sortable')) {
      th.addEventListener('click', () => { S.sortBy = th.dataset.sort; renderTop(); });
    }

    let pending = 0;
    const hoverRepaint = () => {
      if (pending) return;
      pending = requestAnimationFrame(() => { pending = 0; paintFlame(); });
    };
    flame.addEventListener('mousemove', (ev) => {
      const node = hitTest(ev);
      if (node !== S.hover) { S.hover = node; hoverRepaint(); }
      if (node < 0) hideTip(); else showTip(ev, nodeTip(curTree(), node));
    });
    flame.addEventListener('mouseleave', () => { S.hover = -1; hoverRepaint(); hideTip(); });
    flame.addEventListener('click', (ev) => {
      const node = hitTest(ev);
      if (node >= 0) setZoom(node === S.zoom ? (node === 0 ? 0 : curTree().parent[node]) : node);
    });
    chart.addEventListener('click', (ev) => {
      const i = chartIndexAt(ev);
      if (i >= 0 && i !== S.dump) selectDump(i);
    });
    chart.addEventListener('mousemove', (ev) => {
      const p = curProc(), h = curHeap(), i = chartIndexAt(ev);
      if (!p || !h || i < 0) { hideTip(); return; }
      const d = p.dumps[i], tot = h.dumps[i].tot;
      showTip(ev, '<div class="n">dump ' + (i + 1) + ' of ' + p.dumps.length + '</div><div class="loc">+' + secs(d.ts - p.start) +
        ' (' + esc(d.reason) + ')</div><table>' + VIEWS.map((name, v) => '<tr' + (v === S.view ? ' class="on"' : '') + '><th>' + name +
        '</th><td>' + esc(fmtValLong(tot[v], v)) + '</td></tr>').join('') + '</table>');
    });
    chart.addEventListener('mouseleave', hideTip);
    tl.addEventListener('mousemove', (ev) => {
      const at = timelineAt(ev);
      if (!at) { hideTip(); return; }
      const sr = tlGeom.sr, p = curProc();
      let h = '<div class="n">' + esc(rel(sr.t[at.i])) + '</div><table><tr><th>live</th><td>' + esc(fmtValLong(sr.live[at.i], 0)) + '</td></tr>';
      if (sr.peak) h += '<tr><th>highest since the point before</th><td>' + esc(fmtValLong(sr.peak[at.i], 0)) + '</td></tr>';
      h += '</table>';
      if (at.dump >= 0) h += '<div class="loc" style="margin:6px 0 0">dump ' + (at.dump + 1) + ' (' + esc(p.dumps[at.dump].reason) + '): click to show it</div>';
      showTip(ev, h);
    });
    tl.addEventListener('mouseleave', hideTip);
    tl.addEventListener('click', (ev) => {
      const at = timelineAt(ev);
      if (at && at.dump >= 0 && at.dump !== S.dump) selectDump(at.dump);
    });
    document.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape') {
        if (document.activeElement === $('search') && $('search').value) { $('search').value = ''; setSearch(''); } else setZoom(0);
      } else if (ev.key === '/' && document.activeElement !== $('search')) {
        ev.preventDefault();
        $('search').focus();
      }
    });
    let resizeFrame = 0;
    window.addEventListener('resize', () => {
      if (resizeFrame) return;
      resizeFrame = requestAnimationFrame(() => { resizeFrame = 0; renderFlame(); renderChart(); renderTimeline(); });
    });

    update(true);
    document.body.dataset.ready = '1';
  }

  try {
    init();
  } catch (e) {
    fatal(e.message);
    throw e;
  }
})();
