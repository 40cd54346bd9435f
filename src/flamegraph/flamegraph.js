/*
 * heapprof flame graph page.  Reads the profile data embedded in the page
 * (script#hp-data, format in docs/FLAMEGRAPH.md), builds the call tree of
 * the selected process, heap and dump (or time window, or thread), and
 * draws it on a canvas: callers above callees, or inverted (the allocating
 * functions at the top), or for a focused function its callers and its
 * callees.  Beside it: one chart of memory over time (the heap and RSS,
 * the dumps marked: click one to show it, drag to pick a time window),
 * the allocations by size and a table of the top functions.  A process
 * opens on its peak dump.  Everything is computed here from the
 * data block; the page never fetches anything.  The state is kept in the
 * URL fragment (location.hash), so a copied link opens the same view.
 *
 * Test hooks: body[data-ready="1"] once drawn, body[data-view] the current
 * view.  canvas#flame: [data-total] the root total of the dump (or window,
 * or thread) before frames are hidden, [data-root] the root frame (all, or
 * the focused function), [data-shown] its total, [data-zoom] the zoomed
 * frame, [data-inverted] "1" when the graph is inverted, [data-kids] the
 * root's children, largest first, as JSON [[name, total], ...],
 * [data-hidden] the number of functions the hide box removed.
 * canvas#callers: data-root, data-shown and data-kids of the focused
 * function's callers ("" without a focus).  Rows of #top carry data-func, data-self and
 * data-total; #match carries data-value and data-pct.  canvas#timeline
 * (memory over time) carries data-source ("trace", "samples": the
 * session's ten a second, "dumps" or "none"), data-points (points drawn),
 * data-rss (RSS points drawn), data-max (the highest live bytes),
 * data-final (the last point's), data-window ("from,to" in ns since the
 * process started, or "": the page's --from/--to), data-selection (the
 * window dragged on it, the same way) and data-dumps (the x of each dump's
 * tick).  #winbar[data-source] says how the dragged window was computed
 * ("events" or "dumps").  canvas#sizes carries data-source ("events",
 * "blocks", "mean" or "none"), data-buckets (JSON [[k, amount], ...],
 * bucket k holding sizes [2^(k-1), 2^k), 0 a size of 0) and data-total.
 * select#thread has the thread ("" for all).
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
  /*
   * Frames hidden by default (the "hide frames" box starts with them): the
   * runtime's entry frames and Python's interpreter frames, which would
   * otherwise fill the first rows of every graph.  main is not one of them.
   */
  const DEFAULT_HIDE = [
    '_start', '__libc_start_main', '__libc_start_main_impl', '__libc_start_call_main',
    'start_thread', 'clone', 'clone3', '__clone', '__clone3', '__GI___clone', '__GI___clone3',
    '_PyEval_EvalFrameDefault', '_PyEval_EvalFrame', '_PyEval_Vector', '_PyFunction_Vectorcall',
    'PyEval_EvalCode', 'run_eval_code_obj', 'run_mod', 'pyrun_file', '_PyRun_SimpleFileObject',
    '_PyRun_AnyFileObject', 'pymain_run_file_obj', 'pymain_run_file', 'pymain_run_python',
    'Py_RunMain', 'Py_BytesMain',
  ];
  const reEscape = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const DEFAULT_HIDE_TEXT = '/^(' + DEFAULT_HIDE.map(reEscape).join('|') + ')$/';
  const ROW_H = 18;
  const MIN_W = 0.3; /* narrower frames are not drawn */
  const MAX_CANVAS_H = 30000;
  const FONT = '11.5px ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", "Liberation Mono", monospace';
  const TOP_ROWS = 100;
  const KIDS_HOOK = 1000; /* children listed in data-kids */
  const FP_ONE = 65536; /* one object in 16.16 fixed point */
  const DRAG_MIN = 4; /* px: a shorter drag on the timeline is a click */

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
  const isLive = (v) => v === 0 || v === 2;
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
  /* "+1.500 s to +3.000 s", microseconds for a window of a few milliseconds */
  function spanLabel(w) {
    const d = w.to - w.from < 1e8 ? 6 : 3;
    return rel(w.from, d) + ' to ' + rel(w.to, d);
  }
  /* --from/--to: "window +1.500 s to +3.000 s" */
  function windowLabel(p) {
    return 'window ' + spanLabel(p.window);
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
  /* The size bucket of an allocation: 0 for 0 bytes, k for [2^(k-1), 2^k). */
  function sizeBucket(s) {
    if (!(s >= 1)) return 0;
    return s < 4294967296 ? 32 - Math.clz32(s) : Math.floor(Math.log2(s)) + 1;
  }
  function bucketLabel(k) {
    if (k === 0) return '0';
    const b = Math.pow(2, k - 1);
    const u = ['', 'K', 'M', 'G', 'T', 'P'];
    let x = b, i = 0;
    while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
    return x + u[i];
  }
  function bucketRange(k) {
    if (k === 0) return '0 B';
    return fmtBytes(Math.pow(2, k - 1)) + ' to ' + fmtBytes(Math.pow(2, k) - 1);
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

  /*
   * The allocation events of a heap ("ev", a traced process whose events
   * fit in the page), decoded once: per allocation its time (ns since the
   * process's start, ascending), global node, requested size, charged
   * bytes, when it was freed (Infinity: not in the trace), thread and
   * objects (16.16; null: one each).  null if the heap has none or they
   * are malformed.
   */
  function heapEvents(h) {
    if (!h) return null;
    if (h.evDecoded !== undefined) return h.evDecoded;
    if (!h.ev) return null;
    const ev = h.ev, n = ev.n;
    let E = null;
    const ok = (a) => Array.isArray(a) && a.length === n;
    if (n >= 0 && ok(ev.t) && ok(ev.node) && ok(ev.size) && ok(ev.free) && ok(ev.tid) &&
      (!ev.charged || ok(ev.charged)) && (!ev.fp || ok(ev.fp))) {
      E = {
        n, t: new Float64Array(n), node: new Int32Array(n), size: Float64Array.from(ev.size),
        charged: Float64Array.from(ev.charged || ev.size), end: new Float64Array(n),
        tid: Float64Array.from(ev.tid), fp: ev.fp ? Float64Array.from(ev.fp) : null,
      };
      let t = 0;
      for (let i = 0; i < n; i++) {
        t += ev.t[i];
        E.t[i] = t;
        const nd = ev.node[i] + 1;
        E.node[i] = nd >= 1 && nd < N ? nd : 0;
        E.end[i] = ev.free[i] >= 0 ? t + ev.free[i] : Infinity;
      }
    }
    h.evDecoded = E;
    h.ev = null;
    return E;
  }
  /* Whether the page has process p's allocation events. */
  function hasEvents(p) {
    return !!(p && p.trace && p.trace.in_page && p.heaps.some((h) => h.ev || h.evDecoded));
  }
  /* The threads of process p that allocated (from its events): tid -> count. */
  function threadsOf(p) {
    if (!p) return new Map();
    if (p.threads) return p.threads;
    const m = new Map();
    if (hasEvents(p)) {
      for (const h of p.heaps) {
        const E = heapEvents(h);
        if (!E) continue;
        for (let i = 0; i < E.n; i++) m.set(E.tid[i], (m.get(E.tid[i]) || 0) + 1);
      }
    }
    p.threads = m;
    return m;
  }

  /* ---- trees ----------------------------------------------------------- */

  /*
   * A tree: parallel arrays over nodes, callers before callees (parent[i] <
   * i), node 0 the root, func[0] -1 for "all" or the focused function.
   * self[v] / total[v] per view; kids (per view, nonzero only, largest
   * first) are built on demand.  down: a top-down tree, whose self is
   * what the function allocated itself (in a bottom-up tree, self is where
   * the stacks end).
   */
  function makeTree(parent, func, line, self, rootName, down) {
    const n = parent.length;
    const total = self.map((a) => Float64Array.from(a));
    const t0 = total[0], t1 = total[1], t2 = total[2], t3 = total[3];
    for (let i = n - 1; i > 0; i--) {
      const p = parent[i];
      t0[p] += t0[i]; t1[p] += t1[i]; t2[p] += t2[i]; t3[p] += t3[i];
    }
    return { n, parent, func, line, self, total, rootName, down, kidsView: -1, kidOff: null, kids: null };
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

  function hasValue(t, i) {
    const T = t.total;
    return T[0][i] > 0 || T[1][i] > 0 || T[2][i] > 0 || T[3][i] > 0;
  }

  /*
   * A tree built node by node, merged by (parent, function): node(p, f, l)
   * is the node of function f under node p (line l; -1 once its lines
   * differ), made if new.  An open-addressing table over typed arrays: the
   * inverted tree of a million stacks makes millions of look-ups.
   */
  function treeBuilder(rootFunc, rootLine) {
    let cap = 1024, n = 1;
    let parent = new Int32Array(cap), func = new Int32Array(cap), line = new Int32Array(cap);
    let self = VIEWS.map(() => new Float64Array(cap));
    parent[0] = -1;
    func[0] = rootFunc;
    line[0] = rootLine;
    let hcap = 2048, hlen = 0;
    let hp = new Int32Array(hcap).fill(-1), hf = new Int32Array(hcap), hv = new Int32Array(hcap);
    const slot = (p, f) => {
      let h = Math.imul(p, 0x9e3779b1) ^ Math.imul(f + 1, 0x85ebca6b);
      h ^= h >>> 15;
      h = Math.imul(h, 0x2c1b3c6d);
      h = (h ^ (h >>> 13)) & (hcap - 1);
      while (hp[h] !== -1 && (hp[h] !== p || hf[h] !== f)) h = (h + 1) & (hcap - 1);
      return h;
    };
    const growNodes = () => {
      cap *= 2;
      const g = (a, T) => { const b = new T(cap); b.set(a); return b; };
      parent = g(parent, Int32Array); func = g(func, Int32Array); line = g(line, Int32Array);
      self = self.map((a) => g(a, Float64Array));
    };
    const growTable = () => {
      const op = hp, of = hf, ov = hv;
      hcap *= 2;
      hp = new Int32Array(hcap).fill(-1); hf = new Int32Array(hcap); hv = new Int32Array(hcap);
      for (let i = 0; i < op.length; i++) {
        if (op[i] === -1) continue;
        const h = slot(op[i], of[i]);
        hp[h] = op[i]; hf[h] = of[i]; hv[h] = ov[i];
      }
    };
    let rootSeen = false;
    return {
      node(p, f, l) {
        const h = slot(p, f);
        if (hp[h] !== -1) {
          const m = hv[h];
          if (line[m] !== l) line[m] = -1;
          return m;
        }
        if (n === cap) growNodes();
        const m = n++;
        parent[m] = p; func[m] = f; line[m] = l;
        hp[h] = p; hf[h] = f; hv[h] = m;
        if (++hlen * 2 > hcap) growTable();
        return m;
      },
      /* the root's line: that of its first node, -1 if they differ */
      rootLine(l) {
        if (!rootSeen) { line[0] = l; rootSeen = true; } else if (line[0] !== l) line[0] = -1;
      },
      /* adds vals[v][i] of every view to node m */
      add(m, vals, i) {
        self[0][m] += vals[0][i]; self[1][m] += vals[1][i]; self[2][m] += vals[2][i]; self[3][m] += vals[3][i];
      },
      done(rootName, down) {
        return makeTree(parent.slice(0, n), func.slice(0, n), line.slice(0, n), self.map((a) => a.slice(0, n)), rootName, down);
      },
    };
  }

  /* The tree of the global nodes with these self values. */
  function globalTree(self) {
    const t = makeTree(gParent, gFunc, gLine, self, 'all', true);
    t.global = true;
    return t;
  }

  /*
   * t without the frames of the functions hide[f] marks: their callees
   * attach to their caller, merged with its other callees of the same
   * function.  t itself when no frame with a value is hidden.
   */
  function hideTree(t, hide) {
    const n = t.n;
    let any = false;
    for (let i = 1; i < n && !any; i++) { const f = t.func[i]; if (f >= 0 && hide[f] && hasValue(t, i)) any = true; }
    if (!any) return t;
    const map = new Int32Array(n);
    const B = treeBuilder(t.func[0], t.line[0]);
    B.add(0, t.self, 0);
    for (let i = 1; i < n; i++) {
      if (!hasValue(t, i)) continue; /* nor have its callees */
      const mp = map[t.parent[i]], f = t.func[i];
      const m = f >= 0 && hide[f] ? mp : B.node(mp, f, t.line[i]);
      map[i] = m;
      B.add(m, t.self, i);
    }
    return B.done(t.rootName, t.down);
  }

  /*
   * The callees of function F: every outermost call of F in t, with what
   * it calls, merged into one tree rooted at F.  A stack is counted once
   * however often F recurses on it.
   */
  function focusTree(t, F) {
    const n = t.n;
    const map = new Int32Array(n).fill(-1);
    const B = treeBuilder(F, 0);
    for (let i = 1; i < n; i++) {
      if (!hasValue(t, i)) continue;
      const mp = map[t.parent[i]];
      let m;
      if (mp >= 0) {
        m = B.node(mp, t.func[i], t.line[i]);
      } else if (t.func[i] === F) {
        m = 0;
        B.rootLine(t.line[i]);
      } else {
        continue;
      }
      map[i] = m;
      B.add(m, t.self, i);
    }
    return B.done(funcName[F], true);
  }

  /*
   * A bottom-up tree: from each top-down node starts[k] up to the root,
   * one node per frame under the root (rootFunc), merged by (parent,
   * function); vals[v][src[k]] is added where the path ends.  Built level
   * by level with the paths grouped by their node, so that a child is
   * found in an array by function: no hashing, linear in the frames.
   */
  function bottomUp(t, rootFunc, rootLine, starts, src, vals, rootName) {
    let k = starts.length;
    let cq = new Int32Array(k), cy = Int32Array.from(starts), cs = Int32Array.from(src);
    let cap = Math.max(1024, k + 1), n = 1;
    let parent = new Int32Array(cap), func = new Int32Array(cap), line = new Int32Array(cap);
    parent[0] = -1;
    func[0] = rootFunc;
    line[0] = rootLine;
    const stamp = new Int32Array(nF + 1).fill(-1), child = new Int32Array(nF + 1);
    const tf = t.func, tl = t.line, tp = t.parent;
    const endQ = [], endS = []; /* paths that ended: their node and source */
    while (k > 0) {
      const first = n;
      const nq = new Int32Array(k), ny = new Int32Array(k), ns = new Int32Array(k);
      let m = 0;
      for (let a = 0; a < k; a++) {
        const q = cq[a], y = cy[a];
        if (y <= 0) { endQ.push(q); endS.push(cs[a]); continue; }
        const f = tf[y] + 1;
        let c;
        if (stamp[f] === q) {
          c = child[f];
          if (line[c] !== tl[y]) line[c] = -1;
        } else {
          if (n === cap) {
            cap *= 2;
            const g = (x) => { const b = new Int32Array(cap); b.set(x); return b; };
            parent = g(parent); func = g(func); line = g(line);
          }
          c = n++;
          parent[c] = q; func[c] = tf[y]; line[c] = tl[y];
          stamp[f] = q; child[f] = c;
        }
        nq[m] = c; ny[m] = tp[y]; ns[m] = cs[a]; m++;
      }
      /* the next level grouped by node: a counting sort on [first, n) */
      const cnt = new Int32Array(n - first + 1);
      for (let a = 0; a < m; a++) cnt[nq[a] - first + 1]++;
      for (let i = 1; i < cnt.length; i++) cnt[i] += cnt[i - 1];
      cq = new Int32Array(m); cy = new Int32Array(m); const cs2 = new Int32Array(m);
      for (let a = 0; a < m; a++) {
        const j = cnt[nq[a] - first]++;
        cq[j] = nq[a]; cy[j] = ny[a]; cs2[j] = ns[a];
      }
      cs = cs2;
      k = m;
    }
    const self = VIEWS.map((name, v) => {
      const a = new Float64Array(n), x = vals[v];
      for (let i = 0; i < endQ.length; i++) a[endQ[i]] += x[endS[i]];
      return a;
    });
    return makeTree(parent.slice(0, n), func.slice(0, n), line.slice(0, n), self, rootName, false);
  }

  /*
   * The callers of function F: F at the root, then the functions that
   * called it, merged over every stack it is on (the stack's innermost call
   * of F, so recursion shows as F calling F and each stack counts once).
   */
  function callersTree(t, F) {
    const n = t.n;
    const inner = new Int32Array(n).fill(-1);
    const w = VIEWS.map(() => new Float64Array(n));
    for (let i = 1; i < n; i++) {
      const j = t.func[i] === F ? i : inner[t.parent[i]];
      inner[i] = j;
      if (j >= 0) for (let v = 0; v < 4; v++) w[v][j] += t.self[v][i];
    }
    const starts = [], src = [];
    let rootLine = 0, seen = false;
    for (let j = 1; j < n; j++) {
      if (t.func[j] !== F || !(w[0][j] > 0 || w[1][j] > 0 || w[2][j] > 0 || w[3][j] > 0)) continue;
      if (!seen) { rootLine = t.line[j]; seen = true; } else if (rootLine !== t.line[j]) rootLine = -1;
      starts.push(t.parent[j]);
      src.push(j);
    }
    return bottomUp(t, F, rootLine, starts, src, w, funcName[F]);
  }

  /*
   * The inverted (bottom-up) tree: under the root, the functions that
   * allocated, each with its callers below it, merged.  Its root's children
   * hold each function's self amount.
   */
  function invertTree(t) {
    const n = t.n, starts = [];
    const S0 = t.self[0], S1 = t.self[1], S2 = t.self[2], S3 = t.self[3];
    for (let i = 0; i < n; i++) if (S0[i] > 0 || S1[i] > 0 || S2[i] > 0 || S3[i] > 0) starts.push(i);
    return bottomUp(t, -1, 0, starts, starts, t.self, t.rootName);
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

  /* ---- what a graph shows: a dump, a window, a thread ------------------- */

  /* Self per global node at one dump (d rows of a node summed). */
  function dumpSelf(dump) {
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
    return self;
  }

  /*
   * Calls fn(i, live) for each allocation event i of E made in [lo, hi)
   * (or [lo, hi] with incl) by thread tid (-1: any); live: not freed
   * before hi (with incl: by hi), as tr_window and the dumps count.
   */
  function scanEvents(E, lo, hi, incl, tid, fn) {
    let a = 0, b = E.n;
    while (a < b) { const m = (a + b) >> 1; if (E.t[m] < lo) a = m + 1; else b = m; }
    for (let i = a; i < E.n; i++) {
      const t = E.t[i];
      if (incl ? t > hi : t >= hi) break;
      if (tid >= 0 && E.tid[i] !== tid) continue;
      const e = E.end[i];
      fn(i, incl ? !(e <= hi) : !(e < hi));
    }
  }

  /* Self per global node from the events: see scanEvents. */
  function eventSelf(E, lo, hi, incl, tid) {
    const self = VIEWS.map(() => new Float64Array(N));
    const s0 = self[0], s1 = self[1], s2 = self[2], s3 = self[3];
    const fp = E.fp, fpLive = fp ? new Float64Array(N) : null, fpAll = fp ? new Float64Array(N) : null;
    scanEvents(E, lo, hi, incl, tid, (i, live) => {
      const nd = E.node[i], c = E.charged[i];
      s1[nd] += c;
      if (fp) fpAll[nd] += fp[i]; else s3[nd] += 1;
      if (live) {
        s0[nd] += c;
        if (fp) fpLive[nd] += fp[i]; else s2[nd] += 1;
      }
    });
    if (fp) {
      /* rounded per node as the dumps round per stack */
      for (let i = 0; i < N; i++) {
        if (fpAll[i] > 0) s3[i] = Math.floor((fpAll[i] + FP_ONE / 2) / FP_ONE);
        if (fpLive[i] > 0) s2[i] = Math.floor((fpLive[i] + FP_ONE / 2) / FP_ONE);
      }
    }
    return self;
  }

  /* The dumps around window w of process p: the last at or before its
     start (-1: none, the start of the process) and the first at or after
     its end (the last dump if none). */
  function dumpsAround(p, w) {
    let before = -1, after = -1;
    p.dumps.forEach((d, i) => { if (d.ts - p.start <= w.from) before = i; });
    for (let i = p.dumps.length - 1; i >= 0; i--) if (p.dumps[i].ts - p.start >= w.to) after = i;
    if (after < 0) after = p.dumps.length - 1;
    return { before, after };
  }

  /* Self per global node between two dumps: what grew (never below 0). */
  function diffSelf(h, before, after) {
    const self = VIEWS.map(() => new Float64Array(N));
    if (after < 0 || after <= before) return self;
    const A = dumpSelf(h.dumps[after]), B = before >= 0 ? dumpSelf(h.dumps[before]) : null;
    for (let v = 0; v < 4; v++) {
      const s = self[v], a = A[v], b = B && B[v];
      for (let i = 0; i < N; i++) { const x = b ? a[i] - b[i] : a[i]; if (x > 0) s[i] = x; }
    }
    return self;
  }

  /* Whether a window can be picked on process p's timeline. */
  function canWindow(p) {
    return !!p && p.heaps.length > 0 && (hasEvents(p) || (!p.window && p.dumps.length > 0));
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

  const procs = D.procs || [];
  const DEFAULT_VIEW = Math.max(0, VIEWS.indexOf(D.view));
  /* the first process with a dump, its peak dump (or last) */
  const FIRST_PROC = Math.max(0, procs.findIndex((p) => p.dumps.length > 0 && p.heaps.length > 0));

  const S = {
    proc: 0, heap: 0, dump: 0, view: DEFAULT_VIEW,
    sel: null, /* a window dragged on the timeline: {from, to}, ns since the start */
    tid: -1, /* the thread shown, -1: all */
    inverted: false,
    hideText: DEFAULT_HIDE_TEXT, hide: null, hideBad: false,
    focus: -1, focusName: null, /* focusName: from the URL, until resolved */
    search: null, match: null, sortBy: 'self',
    src: null, /* how base was computed: {kind: 'dump' | 'events' | 'dumps', ...} */
    base: null, /* the tree of the dump, window or thread */
    tree: null, /* base without the hidden frames */
    hidden: 0, /* functions hidden */
  };

  function curProc() { return procs[S.proc]; }
  function curHeap() { const p = curProc(); return p && p.heaps[S.heap]; }
  function curDumpState() { const h = curHeap(); return h && h.dumps[S.dump]; }
  /* The dump a process opens on: the one flamegraph --dump named, else
     its peak (the last dump at the peak: peaks only rise), else its last. */
  function firstDump(p) {
    if (!p) return 0;
    if (Number.isInteger(p.open) && p.open >= 0 && p.open < p.dumps.length) return p.open;
    for (let i = p.dumps.length - 1; i >= 0; i--) if (p.dumps[i].at_max) return i;
    return Math.max(0, p.dumps.length - 1);
  }

  /* Which functions match text: a case-insensitive substring, or
     /regex/flags.  {match: Uint8Array by function, or null; bad: an
     invalid regex}. */
  function matcher(text) {
    if (!text) return { match: null, bad: false };
    const m = /^\/(.*)\/([a-z]*)$/.exec(text);
    let re = null, bad = false;
    try {
      re = m ? new RegExp(m[1], m[2].replace(/[gy]/g, '')) : null;
    } catch (e) {
      bad = true;
    }
    const lower = text.toLowerCase();
    const match = new Uint8Array(nF);
    for (let f = 0; f < nF; f++) {
      match[f] = re ? (re.test(funcName[f]) ? 1 : 0) : (!m && funcName[f].toLowerCase().includes(lower) ? 1 : 0);
    }
    return { match, bad };
  }

  /* The self values the graph shows, and how they were computed. */
  function computeSource() {
    const p = curProc(), h = curHeap();
    if (!p || !h) return { kind: 'dump', self: dumpSelf(null) };
    const E = hasEvents(p) ? heapEvents(h) : null;
    if (S.sel) {
      if (E) return { kind: 'events', self: eventSelf(E, S.sel.from, S.sel.to, false, S.tid) };
      const a = dumpsAround(p, S.sel);
      return { kind: 'dumps', before: a.before, after: a.after, self: diffSelf(h, a.before, a.after) };
    }
    if (S.tid >= 0 && E) {
      if (p.window) return { kind: 'events', self: eventSelf(E, p.window.from, p.window.to, false, S.tid) };
      const d = p.dumps[S.dump];
      return { kind: 'events', self: eventSelf(E, -Infinity, d ? d.ts - p.start : Infinity, true, S.tid) };
    }
    return { kind: 'dump', self: dumpSelf(curDumpState()) };
  }

  /* The function named name with the largest total in t (any, if none
     has a value); -1 if no function has that name. */
  function funcByName(t, name) {
    let best = -1, bestV = -1;
    const totF = new Float64Array(nF);
    for (let i = 1; i < t.n; i++) if (t.func[i] >= 0) totF[t.func[i]] = Math.max(totF[t.func[i]], t.total[S.view][i]);
    for (let f = 0; f < nF; f++) {
      if (funcName[f] === name && totF[f] > bestV) { best = f; bestV = totF[f]; }
    }
    return best;
  }

  /* Rebuilds from the source (level 3), the hidden frames (2) or only
     the graphs of the focus and the inversion (1). */
  function rebuild(level) {
    if (level >= 3) {
      S.src = computeSource();
      S.base = globalTree(S.src.self);
      S.src.self = null;
    }
    if (level >= 2) {
      if (S.focusName !== null) {
        S.focus = funcByName(S.base, S.focusName);
        S.focusName = null;
      }
      let hide = S.hide;
      if (hide && S.focus >= 0 && hide[S.focus]) {
        /* the focused function is never hidden */
        hide = hide.slice();
        hide[S.focus] = 0;
      }
      S.tree = hide ? hideTree(S.base, hide) : S.base;
      /* functions with a frame that the hide box took out */
      S.hidden = 0;
      if (hide && S.tree !== S.base) {
        const seen = new Uint8Array(nF), t = S.base;
        for (let i = 1; i < t.n; i++) {
          const f = t.func[i];
          if (f >= 0 && hide[f] && !seen[f] && hasValue(t, i)) { seen[f] = 1; S.hidden++; }
        }
      }
    }
    const prev = FL.tree;
    if (S.focus >= 0) {
      FL.tree = focusTree(S.tree, S.focus);
      CL.tree = callersTree(S.tree, S.focus);
    } else {
      FL.tree = S.inverted ? invertTree(S.tree) : S.tree;
      CL.tree = null;
    }
    /* Node numbers stay only in the global tree. */
    if (!(FL.tree.global && prev && prev.global) || FL.zoom >= FL.tree.n || !(FL.tree.total[S.view][FL.zoom] > 0)) FL.zoom = 0;
    CL.zoom = 0;
  }

  /* ---- summary --------------------------------------------------------- */

  function renderSummary() {
    const el = $('summary');
    const p = curProc();
    if (!p) { el.innerHTML = '<h2>No processes in this profile</h2>'; return; }
    const ds = curDumpState();
    const d = p.dumps[S.dump];
    const tot = S.src && S.src.kind !== 'dump' ? VIEWS.map((n, v) => S.base.total[v][0]) : ds ? ds.tot : [0, 0, 0, 0];
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
    if (S.sel) {
      h += '<tr class="on" title="the window dragged on the memory over time chart"><td>selected</td><td class="num">' + esc(spanLabel(S.sel)) + '</td></tr>';
    }
    if (S.tid >= 0) {
      h += '<tr class="on" title="from the trace\u2019s allocation events of this thread"><td>thread</td><td class="num">' + S.tid + '</td></tr>';
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

  /* A chart canvas at the screen's pixel density, cleared: its 2D
   * context in CSS pixels, and its width. */
  function canvasCtx(el, minW, H) {
    const dpr = window.devicePixelRatio || 1;
    const W = Math.max(minW, el.clientWidth);
    el.width = Math.round(W * dpr);
    el.height = Math.round(H * dpr);
    const c = el.getContext('2d');
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.clearRect(0, 0, W, H);
    return { c, W };
  }

  /* ---- memory over time ------------------------------------------------- */

  /*
   * Live bytes of the selected process and heap over time: from the event
   * trace when there is one (the heap's timeline: live bytes at the end of
   * each bucket and the highest within it), else a line through the dumps'
   * space.  Dumps are ticks on the time axis (click near one to show it);
   * a --from/--to window is a shaded band, and so is the window dragged on
   * it (S.sel; tlDrag while the mouse button is down).
   */
  const tl = $('timeline');
  let tlGeom = null;
  let tlDrag = null; /* {x0, x1}: px in the canvas */

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
    if (h && h.curve && h.curve.t.length && !p.window) {
      /* the samples, and each dump's live bytes at its time (the peak
         falls between two samples) */
      const pts = h.curve.t.map((t, i) => [t, h.curve.v[i]]);
      p.dumps.forEach((d, i) => { if (h.dumps[i]) pts.push([d.ts - p.start, Math.max(0, h.dumps[i].tot[0])]); });
      pts.sort((a, b) => a[0] - b[0]);
      const t = pts.map((x) => x[0]), live = pts.map((x) => x[1]);
      const t1 = Math.max(t[t.length - 1], p.end > p.start ? p.end - p.start : 0, 1);
      const ct = h.curve.t, cn = ct.length;
      const rate = cn > 1 ? Math.round((cn - 1) / Math.max(1e-9, (ct[cn - 1] - ct[0]) / 1e9)) : 0;
      return { source: 'samples', t, live, peak: null, t0: 0, t1, rate };
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
    const H = 150;
    const { c, W } = canvasCtx(tl, 200, H);
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
    } else if (sr.source === 'samples') {
      note.textContent = 'sampled ' + (sr.rate ? sr.rate + ' times a second' : 'once') + ', the dumps\u2019 points added' +
        (p.interval > 1 ? ' (live bytes estimated from the samples)' : '') + '; record --trace charts every change';
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
    tl.dataset.selection = S.sel ? S.sel.from + ',' + S.sel.to : '';
    tl.dataset.dumps = '';
    $('tl-drag').style.display = canWindow(p) ? '' : 'none';
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
    /* RSS beside the heap (the session's samples; heapprof's tables left
       out), on the same axis, where the profile has it */
    const rss = p && p.rss && !p.window ? p.rss : null;
    $('tl-rsskey').style.display = rss ? '' : 'none';
    if (rss) for (const v of rss.v) max = Math.max(max, v);
    tl.dataset.rss = rss ? String(rss.t.length) : '0';
    tl.dataset.max = String(Math.max(...(sr.peak || sr.live)));
    tl.dataset.final = String(sr.live[sr.live.length - 1]);
    const span = Math.max(1, sr.t1 - sr.t0);
    const xOf = (t) => L + pw * (t - sr.t0) / span;
    const yOf = (v) => T + ph * (1 - Math.max(0, v) / max);
    tlGeom = { xOf, sr, L, pw, tOf: (x) => Math.round(sr.t0 + Math.min(1, Math.max(0, (x - L) / pw)) * span) };
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
    /* the window dragged on the chart, and one being dragged */
    const band = (x0, x1, fill, stroke) => {
      c.fillStyle = fill;
      c.fillRect(x0, T, Math.max(1, x1 - x0), ph);
      c.strokeStyle = stroke;
      c.lineWidth = 1;
      for (const x of [x0, x1]) { c.beginPath(); c.moveTo(Math.round(x) + 0.5, T); c.lineTo(Math.round(x) + 0.5, T + ph); c.stroke(); }
    };
    if (S.sel) {
      const x0 = xOf(S.sel.from), x1 = xOf(S.sel.to);
      band(x0, x1, 'rgba(217, 70, 239, 0.13)', '#c026d3');
      c.fillStyle = '#86198f';
      c.textAlign = x0 - L > pw / 2 ? 'right' : 'left';
      c.fillText(spanLabel(S.sel), c.textAlign === 'left' ? x1 + 4 : x0 - 4, T + 12);
    }
    if (tlDrag) {
      band(Math.min(tlDrag.x0, tlDrag.x1), Math.max(tlDrag.x0, tlDrag.x1), 'rgba(29, 35, 48, 0.10)', '#667085');
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
    if (rss) {
      c.strokeStyle = '#7a8599';
      c.lineWidth = 1.5;
      c.setLineDash([5, 3]);
      c.beginPath();
      for (let i = 0; i < rss.t.length; i++) (i ? c.lineTo : c.moveTo).call(c, xOf(rss.t[i]), yOf(rss.v[i]));
      c.stroke();
      c.setLineDash([]);
    }
    c.strokeStyle = '#2f6fde';
    c.lineWidth = 1.8;
    c.beginPath();
    for (let i = 0; i < n; i++) (i ? c.lineTo : c.moveTo).call(c, xOf(sr.t[i]), yOf(sr.live[i]));
    if (n === 1) { c.moveTo(xOf(sr.t[0]) - 6, yOf(sr.live[0])); c.lineTo(xOf(sr.t[0]) + 6, yOf(sr.live[0])); }
    c.stroke();
    /* dumps: ticks on the axis, the shown one darker */
    if (!p.window) {
      tl.dataset.dumps = p.dumps.map((d) => xOf(d.ts - p.start).toFixed(1)).join(',');
      p.dumps.forEach((d, i) => {
        const x = Math.round(xOf(d.ts - p.start)) + 0.5;
        c.strokeStyle = i === S.dump ? '#1d2330' : '#98a2b3';
        c.lineWidth = i === S.dump ? 2 : 1;
        c.beginPath(); c.moveTo(x, T + ph - (i === S.dump ? 12 : 7)); c.lineTo(x, T + ph); c.stroke();
        if (i === S.dump) {
          c.lineWidth = 1;
          c.setLineDash([3, 3]);
          c.beginPath(); c.moveTo(x, T); c.lineTo(x, T + ph - 12); c.stroke();
          c.setLineDash([]);
        }
        if (d.reason === 'peak') {
          c.fillStyle = i === S.dump ? '#1d2330' : '#667085';
          c.textAlign = 'center';
          c.fillText('peak', x, T + 10);
        }
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

  /* ---- allocation sizes ------------------------------------------------ */

  /*
   * The allocations of what the graph shows by size, in the current view:
   * from the trace's events (exact), from the live blocks a dump kept
   * ("sizes", exact, space and objects), else from each stack's mean size
   * (bytes / objects of the stack: an estimate).
   */
  function sizeHist() {
    const p = curProc(), h = curHeap(), ds = curDumpState(), v = S.view;
    const b = new Float64Array(66);
    if (!p || !h) return { source: 'none', b };
    const E = hasEvents(p) ? heapEvents(h) : null;
    const plainDump = !S.sel && S.tid < 0 && !p.window;
    if (plainDump && isLive(v) && ds && Array.isArray(ds.sizes)) {
      const z = ds.sizes;
      for (let k = 0; k + 2 < z.length; k += 3) {
        if (z[k] >= 0 && z[k] < b.length) b[z[k]] += isBytes(v) ? z[k + 2] : z[k + 1];
      }
      return { source: 'blocks', b };
    }
    if (E && (!plainDump || p.trace.complete)) {
      let lo = -Infinity, hi = Infinity, incl = true;
      if (S.sel) { lo = S.sel.from; hi = S.sel.to; incl = false; } else if (p.window) { lo = p.window.from; hi = p.window.to; incl = false; } else if (p.dumps[S.dump]) hi = p.dumps[S.dump].ts - p.start;
      const live = isLive(v), bytes = isBytes(v), fp = E.fp;
      scanEvents(E, lo, hi, incl, S.tid, (i, alive) => {
        if (live && !alive) return;
        b[sizeBucket(E.size[i])] += bytes ? E.charged[i] : fp ? fp[i] / FP_ONE : 1;
      });
      if (!bytes) for (let k = 0; k < b.length; k++) b[k] = Math.round(b[k]);
      return { source: 'events', b };
    }
    /* each stack's mean size: bytes / objects in the base tree's nodes */
    const t = S.base, bv = isLive(v) ? 0 : 1, ov = isLive(v) ? 2 : 3;
    const sb = t.self[bv], so = t.self[ov], sv = t.self[v];
    for (let i = 1; i < t.n; i++) {
      if (!(sv[i] > 0) || !(so[i] > 0)) continue;
      b[sb[i] > 0 ? sizeBucket(Math.max(1, Math.round(sb[i] / so[i]))) : 0] += sv[i];
    }
    return { source: 'mean', b };
  }

  const sizes = $('sizes');
  let sizeGeom = null;

  function renderSizes() {
    const H = 130;
    const { c, W } = canvasCtx(sizes, 160, H);
    c.font = '11px system-ui, sans-serif';
    const v = S.view, hs = sizeHist(), b = hs.b;
    let lo = -1, hi = -1, total = 0, max = 0;
    for (let k = 0; k < b.length; k++) {
      if (b[k] > 0) { if (lo < 0) lo = k; hi = k; total += b[k]; max = Math.max(max, b[k]); }
    }
    const note = $('sizes-note');
    note.textContent = {
      events: 'exact, from the trace\u2019s allocation events',
      blocks: 'exact, from the live blocks the dump kept',
      mean: 'estimated: each stack\u2019s mean size (' + (isLive(v) ? 'space / objects' : 'alloc_space / alloc_objects') + ')',
      none: '',
    }[hs.source];
    sizes.dataset.source = lo < 0 && hs.source === 'mean' ? 'none' : hs.source;
    sizes.dataset.total = String(total);
    const list = [];
    for (let k = Math.max(0, lo); lo >= 0 && k <= hi; k++) if (b[k] > 0) list.push([k, b[k]]);
    sizes.dataset.buckets = JSON.stringify(list);
    sizeGeom = null;
    if (lo < 0) {
      c.fillStyle = '#667085';
      c.fillText('nothing in view ' + VIEWS[v], 10, 20);
      return;
    }
    /* at least 8 buckets wide, so one bucket isn't one huge bar */
    while (hi - lo < 7) { if (lo > 0) lo--; else hi++; if (hi - lo < 7) hi++; }
    const L = 8, R = 8, T = 16, B = 20, pw = W - L - R, ph = H - T - B;
    const nb = hi - lo + 1, bw = pw / nb;
    c.fillStyle = '#667085';
    c.textAlign = 'left';
    c.fillText('largest: ' + fmtVal(max, v), L, 11);
    c.textAlign = 'center';
    const every = Math.max(1, Math.ceil(28 / bw));
    for (let k = lo; k <= hi; k++) {
      const x = L + (k - lo) * bw, hgt = ph * b[k] / max;
      c.fillStyle = isBytes(v) ? '#2f6fde' : '#f08c2e';
      if (b[k] > 0) c.fillRect(x + 1, T + ph - Math.max(1, hgt), Math.max(1, bw - 2), Math.max(1, hgt));
      if ((k - lo) % every === 0) { c.fillStyle = '#667085'; c.fillText(bucketLabel(k), x + bw / 2, H - 6); }
    }
    c.strokeStyle = '#e6e8ee';
    c.beginPath(); c.moveTo(L, T + ph + 0.5); c.lineTo(W - R, T + ph + 0.5); c.stroke();
    sizeGeom = { L, bw, lo, hi, b, total };
  }

  function sizesAt(ev) {
    if (!sizeGeom) return -1;
    const r = sizes.getBoundingClientRect();
    const k = sizeGeom.lo + Math.floor((ev.clientX - r.left - sizeGeom.L) / sizeGeom.bw);
    return k >= sizeGeom.lo && k <= sizeGeom.hi ? k : -1;
  }

  /* ---- flame graphs ---------------------------------------------------- */

  /*
   * A flame graph on a canvas: its tree, zoomed frame and laid-out frames.
   * flip draws the root at the bottom (the callers of a focused function,
   * above the graph of its callees).
   */
  function makeFlame(canvas, flip) {
    return { canvas, ctx: canvas.getContext('2d'), flip, tree: null, zoom: 0, hover: -1,
      R: { x: [], w: [], d: [], node: [], anc: [], rows: [], W: 0 } };
  }
  const flame = $('flame');
  const FL = makeFlame(flame, false);
  const CL = makeFlame($('callers'), true);
  let charW = 7;

  /* Laid-out frames: parallel arrays, and per depth the frames in x order. */
  function layoutFlame(F) {
    const t = F.tree, v = S.view;
    ensureKids(t, v);
    const W = Math.max(200, F.canvas.parentNode.clientWidth);
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
    for (let x = F.zoom; x >= 0; x = t.parent[x]) chain.push(x);
    chain.reverse();
    chain.forEach((x, i) => add(x, 0, W, i, i < chain.length - 1));
    const z = F.zoom, zd = chain.length - 1;
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
    return t.func[node] >= 0 ? funcName[t.func[node]] : '[unknown frame]';
  }

  function paintFlame(F) {
    const t = F.tree, R = F.R, canvas = F.canvas, ctx = F.ctx;
    const dpr = window.devicePixelRatio || 1;
    const W = R.W;
    const rows = Math.max(1, R.rows.length);
    const H = rows * ROW_H + 1;
    canvas.style.height = H + 'px';
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(H * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    ctx.font = FONT;
    ctx.textBaseline = 'middle';
    charW = ctx.measureText('0123456789').width / 10 || 7;
    const match = S.match;
    for (let k = 0; k < R.x.length; k++) {
      const node = R.node[k], f = t.func[node];
      const x = R.x[k], w = R.w[k], y = (F.flip ? rows - 1 - R.d[k] : R.d[k]) * ROW_H;
      let color;
      if (f < 0) color = ROOT_COLOR;
      else if (match) color = match[f] ? MATCH_COLOR : dimColor(f);
      else color = funcColor(f);
      ctx.globalAlpha = R.anc[k] ? 0.55 : 1;
      ctx.fillStyle = color;
      ctx.fillRect(x, y, w > 2 ? w - 1 : w, ROW_H - 1);
      if (node === F.hover) {
        ctx.strokeStyle = '#1d2330';
        ctx.lineWidth = 1.5;
        ctx.strokeRect(x + 0.75, y + 0.75, Math.max(0, (w > 2 ? w - 1 : w) - 1.5), ROW_H - 2.5);
      }
      if (w > 26) {
        const max = Math.floor((w - 8) / charW);
        let s = frameLabel(t, node);
        if (s.length > max) s = max > 2 ? s.slice(0, max - 1) + '\u2026' : '';
        if (s) {
          ctx.fillStyle = match && f >= 0 && match[f] ? '#fff' : '#1a1a1a';
          ctx.fillText(s, x + 4, y + ROW_H / 2);
        }
      }
    }
    ctx.globalAlpha = 1;
  }

  /* The root's children, largest first, as JSON (a test hook). */
  function kidsHook(t) {
    const v = S.view, tot = t.total[v], out = [];
    ensureKids(t, v);
    for (let k = t.kidOff[0]; k < t.kidOff[1] && out.length < KIDS_HOOK; k++) out.push([frameLabel(t, t.kids[k]), tot[t.kids[k]]]);
    return JSON.stringify(out);
  }

  function renderFlame() {
    const t = FL.tree, v = S.view;
    FL.R = layoutFlame(FL);
    const empty = $('empty');
    const tot = t.total[v][0];
    if (!(tot > 0)) {
      empty.hidden = false;
      empty.textContent = !curProc() ? 'No processes in this profile.' :
        'Nothing in view ' + VIEWS[v] + (S.sel ? ' in this window.' : S.tid >= 0 ? ' for this thread.' : ' at this dump.');
    } else {
      empty.hidden = true;
    }
    paintFlame(FL);
    flame.dataset.total = String(S.base.total[v][0]);
    flame.dataset.root = t.rootName;
    flame.dataset.shown = String(tot);
    flame.dataset.zoom = frameLabel(t, FL.zoom);
    flame.dataset.inverted = S.inverted ? '1' : '0';
    flame.dataset.kids = kidsHook(t);
    flame.dataset.hidden = String(S.hidden);
    const cw = $('callers-wrap'), cc = CL.canvas;
    if (CL.tree) {
      cw.hidden = false;
      $('callers-head').textContent = 'Callers of ' + funcName[S.focus] + ', merged over every stack it is on (the nearest call first, above it):';
      CL.R = layoutFlame(CL);
      paintFlame(CL);
      cc.dataset.root = CL.tree.rootName;
      cc.dataset.shown = String(CL.tree.total[v][0]);
      cc.dataset.kids = kidsHook(CL.tree);
    } else {
      cw.hidden = true;
      cc.dataset.root = cc.dataset.shown = cc.dataset.kids = '';
    }
    $('flame-head').textContent = CL.tree ? 'Callees of ' + funcName[S.focus] + ', merged over every call of it:' :
      S.inverted ? 'Inverted: the functions that allocated at the top, their callers below them.' : '';
    $('flame-head').hidden = !CL.tree && !S.inverted;
    renderCrumbs();
    renderMatch();
  }

  function renderCrumbs() {
    const t = FL.tree;
    const chain = [];
    for (let x = FL.zoom; x >= 0; x = t.parent[x]) chain.push(x);
    chain.reverse();
    const el = $('crumbs');
    el.textContent = '';
    if (chain.length < 2) return;
    chain.forEach((x, i) => {
      if (i) el.appendChild(document.createTextNode(S.inverted && !CL.tree ? ' \u2039 ' : ' \u203a '));
      const a = document.createElement('a');
      a.textContent = frameLabel(t, x);
      a.addEventListener('click', () => setZoom(FL, x));
      el.appendChild(a);
    });
  }

  function hitTest(F, ev) {
    const R = F.R;
    const r = F.canvas.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    let d = Math.floor(y / ROW_H);
    if (F.flip) d = Math.max(1, R.rows.length) - 1 - d;
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

  function nodeTip(F, node) {
    const t = F.tree;
    const f = t.func[node];
    let h = '<div class="n">' + esc(frameLabel(t, node)) + '</div>';
    if (f >= 0) {
      const m = funcModule[f], file = funcFile[f], line = t.line[node];
      const loc = [];
      if (m >= 0 && m < modules.length) loc.push(baseName(modules[m]));
      if (file >= 0 && file < files.length) loc.push(files[file] + (line > 0 ? ':' + line : line < 0 ? ' (several lines)' : ''));
      if (loc.length) h += '<div class="loc">' + esc(loc.join('  \u00b7  ')) + '</div>';
    } else {
      h += '<div class="loc">every stack ' + (S.sel ? 'of this window' : 'of this dump') + '</div>';
    }
    if (node !== 0 && !t.down) {
      h += '<div class="loc">' + (F === CL ? 'on the stacks where it calls ' + esc(t.rootName) + ' (through the frames below it)' :
        'on the stacks where it calls the frames above it') + '</div>';
    }
    h += '<table><tr><th></th><th>total</th><th></th>' + (t.down ? '<th>self</th>' : '') + '</tr>';
    VIEWS.forEach((name, v) => {
      const tv = t.total[v][node], sv = t.self[v][node];
      h += '<tr' + (v === S.view ? ' class="on"' : '') + '><th>' + name + '</th><td>' + esc(fmtValLong(tv, v)) +
        '</td><td>' + pct(tv, S.base.total[v][0]) + '</td>' + (t.down ? '<td>' + esc(fmtVal(sv, v)) + '</td>' : '') + '</tr>';
    });
    h += '</table>';
    if (F.zoom !== 0 && node !== F.zoom) {
      h += '<div class="loc" style="margin:6px 0 0">' + pct(t.total[S.view][node], t.total[S.view][F.zoom]) + ' of the zoomed frame</div>';
    }
    return h;
  }

  /* ---- search ----------------------------------------------------------- */

  function setSearch(text) {
    const r = matcher(text);
    $('search').classList.toggle('bad', r.bad);
    S.search = text || null;
    S.match = r.match;
    renderFlame();
    syncHash();
  }

  function renderMatch() {
    const el = $('match');
    if (!S.match) { el.textContent = ''; delete el.dataset.value; delete el.dataset.pct; return; }
    const t = FL.tree, v = S.view, tot = t.total[v];
    const covered = new Uint8Array(t.n);
    let sum = 0;
    const f0 = t.func[0];
    if (f0 >= 0 && S.match[f0]) {
      sum = tot[0];
    } else {
      for (let i = 1; i < t.n; i++) {
        if (!(tot[i] > 0)) continue;
        const p = t.parent[i], f = t.func[i];
        if (covered[p]) { covered[i] = 1; continue; }
        if (f >= 0 && S.match[f]) { covered[i] = 1; sum += tot[i]; }
      }
    }
    const p = pct(sum, tot[0]);
    el.dataset.value = String(sum);
    el.dataset.pct = p;
    el.textContent = 'Matched: ' + fmtVal(sum, v) + ' (' + p + ')';
  }

  /* ---- hidden frames ----------------------------------------------------- */

  function setHide(text, render) {
    const r = matcher(text);
    S.hideText = text;
    S.hide = r.match;
    S.hideBad = r.bad;
    const input = $('hide');
    input.classList.toggle('bad', r.bad);
    if (input.value !== text) input.value = text;
    if (render) {
      rebuild(2);
      renderAllButChart();
    }
  }

  /* ---- top table -------------------------------------------------------- */

  function renderTop() {
    const t = S.tree, v = S.view;
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
    const v = S.view, tot = FL.tree.total[v][0];
    bar.innerHTML = '<span>Focused on <b>' + esc(funcName[S.focus]) + '</b>: ' + esc(fmtValLong(tot, v)) + ' (' + pct(tot, S.base.total[v][0]) +
      '), every stack it is on counted once. Its callers above, its callees below.</span><button type="button">Clear focus</button>';
    bar.querySelector('button').addEventListener('click', () => setFocus(-1));
  }

  /* The bar above the graph when it shows a dragged window. */
  function renderWinBar() {
    const bar = $('winbar'), p = curProc(), src = S.src;
    if (!S.sel || !p || !src) { bar.hidden = true; bar.textContent = ''; delete bar.dataset.source; return; }
    bar.hidden = false;
    bar.dataset.source = src.kind;
    let note;
    if (src.kind === 'events') {
      note = 'from the trace\u2019s allocation events: alloc_space and alloc_objects are what was allocated in the window, ' +
        'space and objects what of it was still live at its end (as heapprof flamegraph --from/--to).';
      if (!p.trace.complete) note += ' The trace is incomplete: events it left out are missing.';
      if (S.tid >= 0) note += ' Thread ' + S.tid + ' only.';
    } else {
      const dn = (i) => i < 0 ? 'the start' : 'dump ' + (i + 1) + ' (' + rel(p.dumps[i].ts - p.start) + ')';
      note = src.after <= src.before ? 'no dump after the window\u2019s start: nothing to compare.' :
        'the difference between ' + dn(src.before) + ' and ' + dn(src.after) + ', the dumps around it: alloc_space and alloc_objects ' +
        'are what was allocated between them; space and objects only show the stacks that grew.';
      note += p.trace && !p.trace.in_page ? ' (The trace\u2019s ' + fmtInt(p.trace.events) + ' events are more than the page carries, ' +
        fmtInt(p.trace.page_limit) + ' allocations.)' : ' (No event trace: heapprof record --trace gives exact windows.)';
    }
    bar.innerHTML = '<span><b>Window ' + esc(spanLabel(S.sel)) + '</b>: ' + esc(note) + '</span><button type="button" id="clearwin" class="link" title="Esc">clear window</button>';
    bar.querySelector('button').addEventListener('click', () => setSel(null));
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
    /* threads: where the page has the trace's events */
    const th = $('thread'), threads = threadsOf(p);
    $('thread-label').hidden = threads.size === 0;
    th.textContent = '';
    const add = (value, text) => {
      const o = document.createElement('option');
      o.value = value;
      o.textContent = text;
      if (value === (S.tid >= 0 ? String(S.tid) : '')) o.selected = true;
      th.appendChild(o);
    };
    add('', 'all threads');
    [...threads.entries()].sort((a, b) => (b[1] - a[1]) || (a[0] - b[0])).forEach(([tid, n]) => {
      add(String(tid), tid + (p && tid === p.pid ? ' (main)' : '') + ', ' + fmtInt(n) + (n === 1 ? ' allocation' : ' allocations'));
    });
    th.value = S.tid >= 0 ? String(S.tid) : '';
    $('inverted').checked = S.inverted;
  }

  function selectProc(i) {
    S.proc = i;
    S.heap = 0;
    S.dump = firstDump(curProc());
    S.sel = null;
    S.tid = -1;
    FL.zoom = 0;
    S.focus = -1;
    update(3);
  }
  function selectHeap(i) { S.heap = i; update(3); }
  function selectDump(i) { S.dump = i; S.sel = null; update(3); }
  function selectView(v) { S.view = v; if (!(FL.tree.total[v][FL.zoom] > 0)) FL.zoom = 0; if (!(CL.tree && CL.tree.total[v][CL.zoom] > 0)) CL.zoom = 0; update(0); }
  function selectThread(tid) { S.tid = tid; update(3); }
  function setZoom(F, node) { F.zoom = node; renderFlame(); }
  function setFocus(f) {
    S.focus = f;
    rebuild(2);
    renderAllButChart();
  }
  function setInverted(on) {
    S.inverted = on;
    rebuild(1);
    renderAllButChart();
  }
  /* A window [from, to) in ns since the start, or null. */
  function setSel(w) {
    S.sel = w && w.to > w.from ? { from: w.from, to: w.to } : null;
    update(3);
  }

  /* ---- the URL fragment -------------------------------------------------- */

  /*
   * #view=objects&dump=2&focus=main&inv=1&hide=...&q=...&win=FROM,TO&tid=N
   * &proc=ID&heap=NAME: only what differs from the page's first state.
   * Unknown keys and bad values are ignored.
   */
  let lastHash = null;

  function hashOf() {
    const a = [];
    const put = (k, v) => a.push(k + '=' + encodeURIComponent(String(v)));
    const p = curProc();
    if (p && S.proc !== FIRST_PROC) put('proc', p.id || p.pid);
    if (p && S.heap !== 0 && p.heaps[S.heap]) put('heap', p.heaps[S.heap].name);
    if (p && S.dump !== firstDump(p)) put('dump', S.dump + 1);
    if (S.view !== DEFAULT_VIEW) put('view', VIEWS[S.view]);
    if (S.sel) put('win', S.sel.from + ',' + S.sel.to);
    if (S.tid >= 0) put('tid', S.tid);
    if (S.focus >= 0) put('focus', funcName[S.focus]);
    if (S.inverted) put('inv', 1);
    if (S.hideText !== DEFAULT_HIDE_TEXT) put('hide', S.hideText);
    if (S.search) put('q', S.search);
    return a.join('&');
  }

  function syncHash() {
    const h = hashOf();
    const want = h ? '#' + h : '';
    if (location.hash === want || (!h && !location.hash)) { lastHash = location.hash; return; }
    try {
      history.replaceState(null, '', want || location.pathname + location.search);
    } catch (e) {
      /* a browser that refuses replaceState here: the fragment itself */
      location.hash = h;
    }
    lastHash = location.hash;
  }

  /* The state the fragment asks for, applied to S (from the first state). */
  function applyHash(hash) {
    const m = new Map();
    for (const part of hash.replace(/^#/, '').split('&')) {
      const i = part.indexOf('=');
      if (i <= 0) continue;
      try { m.set(part.slice(0, i), decodeURIComponent(part.slice(i + 1))); } catch (e) { /* bad escape: ignored */ }
    }
    if (m.has('proc')) {
      const i = procs.findIndex((p) => String(p.id || p.pid) === m.get('proc'));
      if (i >= 0) { S.proc = i; S.dump = firstDump(procs[i]); }
    }
    const p = curProc();
    if (!p) return;
    if (m.has('heap')) {
      const i = p.heaps.findIndex((h) => h.name === m.get('heap'));
      if (i >= 0) S.heap = i;
    }
    const int = (s) => /^-?\d{1,18}$/.test(s || '') ? Number(s) : NaN;
    const d = int(m.get('dump'));
    if (d >= 1 && d <= p.dumps.length) S.dump = d - 1;
    const v = VIEWS.indexOf(m.get('view'));
    if (v >= 0) S.view = v;
    const w = /^(-?\d{1,18}),(-?\d{1,18})$/.exec(m.get('win') || '');
    if (w && Number(w[1]) < Number(w[2]) && canWindow(p)) S.sel = { from: Number(w[1]), to: Number(w[2]) };
    const tid = int(m.get('tid'));
    if (threadsOf(p).has(tid)) S.tid = tid;
    if (m.get('inv') === '1') S.inverted = true;
    if (m.has('hide')) S.hideText = m.get('hide');
    if (m.has('q')) S.search = m.get('q') || null;
    if (m.has('focus')) S.focusName = m.get('focus');
  }

  /* The page's first state, then what the fragment says. */
  function loadState() {
    S.proc = FIRST_PROC;
    S.heap = 0;
    S.dump = firstDump(curProc());
    S.view = DEFAULT_VIEW;
    S.sel = null;
    S.tid = -1;
    S.inverted = false;
    S.hideText = DEFAULT_HIDE_TEXT;
    S.search = null;
    S.focus = -1;
    S.focusName = null;
    FL.zoom = CL.zoom = 0;
    try {
      applyHash(location.hash || '');
    } catch (e) {
      /* a fragment that isn't ours: the first state */
    }
    setHide(S.hideText, false);
    const r = matcher(S.search || '');
    S.match = r.match;
    $('search').value = S.search || '';
    $('search').classList.toggle('bad', r.bad);
  }

  /* ---- everything -------------------------------------------------------- */

  function renderAllButChart() {
    document.body.dataset.view = VIEWS[S.view];
    fillControls();
    renderSummary();
    renderFocusBar();
    renderWinBar();
    renderFlame();
    renderTop();
    renderSizes();
    syncHash();
  }

  /* level: what to rebuild (see rebuild; 0 nothing) */
  function update(level) {
    if (level) rebuild(level);
    renderAllButChart();
    renderTimeline();
  }

  function escapeKey() {
    if (document.activeElement === $('search') && $('search').value) {
      $('search').value = '';
      setSearch('');
    } else if (tlDrag) {
      tlDrag = null;
      renderTimeline();
    } else if (S.sel) {
      setSel(null);
    } else {
      FL.zoom = CL.zoom = 0;
      renderFlame();
    }
  }

  function flameEvents(F) {
    let pending = 0;
    const hoverRepaint = () => {
      if (pending) return;
      pending = requestAnimationFrame(() => { pending = 0; paintFlame(F); });
    };
    F.canvas.addEventListener('mousemove', (ev) => {
      const node = hitTest(F, ev);
      if (node !== F.hover) { F.hover = node; hoverRepaint(); }
      if (node < 0) hideTip(); else showTip(ev, nodeTip(F, node));
    });
    F.canvas.addEventListener('mouseleave', () => { F.hover = -1; hoverRepaint(); hideTip(); });
    F.canvas.addEventListener('click', (ev) => {
      const node = hitTest(F, ev);
      if (node >= 0) setZoom(F, node === F.zoom ? (node === 0 ? 0 : F.tree.parent[node]) : node);
    });
  }

  function init() {
    const file = D.file || '';
    $('file').textContent = file;
    document.title = 'heapprof flame graph' + (file ? ': ' + file : '');
    $('hide').title = 'Frames of the functions matching this (a substring, or /regex/) are left out of every stack; ' +
      'their callees attach to their caller. By default the runtime\u2019s entry frames and Python\u2019s interpreter frames: ' +
      DEFAULT_HIDE.join(', ') + '. Clear the box to see every frame.';

    $('proc').addEventListener('change', (e) => selectProc(+e.target.value));
    $('heap').addEventListener('change', (e) => selectHeap(+e.target.value));
    $('dump').addEventListener('change', (e) => selectDump(+e.target.value));
    $('thread').addEventListener('change', (e) => selectThread(e.target.value === '' ? -1 : Number(e.target.value)));
    $('inverted').addEventListener('change', (e) => setInverted(e.target.checked));
    for (const b of $('views').querySelectorAll('button')) {
      b.addEventListener('click', () => selectView(VIEWS.indexOf(b.dataset.view)));
    }
    $('reset').addEventListener('click', () => { CL.zoom = 0; setZoom(FL, 0); });
    $('search').addEventListener('input', (e) => setSearch(e.target.value.trim()));
    let hideTimer = 0;
    const hideNow = () => { clearTimeout(hideTimer); hideTimer = 0; if ($('hide').value.trim() !== S.hideText) setHide($('hide').value.trim(), true); };
    $('hide').addEventListener('input', () => { clearTimeout(hideTimer); hideTimer = setTimeout(hideNow, 150); });
    $('hide').addEventListener('change', hideNow);
    $('hide-default').addEventListener('click', () => setHide(DEFAULT_HIDE_TEXT, true));
    for (const th of $('top').tHead.querySelectorAll('th.sortable')) {
      th.addEventListener('click', () => { S.sortBy = th.dataset.sort; renderTop(); });
    }
    flameEvents(FL);
    flameEvents(CL);

    /* the timeline: hover, click a dump's tick, drag a window */
    const tlX = (ev) => ev.clientX - tl.getBoundingClientRect().left;
    let noClick = false;
    tl.addEventListener('mousemove', (ev) => {
      if (tlDrag) return;
      const at = timelineAt(ev);
      if (!at) { hideTip(); return; }
      const sr = tlGeom.sr, p = curProc();
      let h = '<div class="n">' + esc(rel(sr.t[at.i])) + '</div><table><tr><th>live</th><td>' + esc(fmtValLong(sr.live[at.i], 0)) + '</td></tr>';
      if (sr.peak) h += '<tr><th>highest since the point before</th><td>' + esc(fmtValLong(sr.peak[at.i], 0)) + '</td></tr>';
      if (p.rss && !p.window && p.rss.t.length) {
        let k = 0;
        for (let j = 1; j < p.rss.t.length; j++) if (Math.abs(p.rss.t[j] - at.t) < Math.abs(p.rss.t[k] - at.t)) k = j;
        h += '<tr><th>RSS</th><td>' + esc(fmtValLong(p.rss.v[k], 0)) + '</td></tr>';
      }
      h += '</table>';
      if (at.dump >= 0) h += '<div class="loc" style="margin:6px 0 0">dump ' + (at.dump + 1) + ' (' + esc(p.dumps[at.dump].reason) + '): click to show it</div>';
      if (canWindow(p)) h += '<div class="loc" style="margin:6px 0 0">drag to show a time window</div>';
      showTip(ev, h);
    });
    tl.addEventListener('mouseleave', () => { if (!tlDrag) hideTip(); });
    tl.addEventListener('mousedown', (ev) => {
      if (ev.button !== 0 || !tlGeom || !canWindow(curProc())) return;
      ev.preventDefault();
      tlDrag = { x0: tlX(ev), x1: tlX(ev) };
    });
    window.addEventListener('mousemove', (ev) => {
      if (!tlDrag) return;
      tlDrag.x1 = tlX(ev);
      hideTip();
      renderTimeline();
    });
    window.addEventListener('mouseup', (ev) => {
      if (!tlDrag) return;
      const d = tlDrag;
      tlDrag = null;
      d.x1 = tlX(ev);
      if (Math.abs(d.x1 - d.x0) < DRAG_MIN || !tlGeom) { renderTimeline(); return; }
      /* the click that follows this mouseup is not a click on a dump */
      noClick = true;
      setTimeout(() => { noClick = false; }, 0);
      const a = tlGeom.tOf(Math.min(d.x0, d.x1)), b = tlGeom.tOf(Math.max(d.x0, d.x1));
      if (b > a) setSel({ from: a, to: b }); else renderTimeline();
    });
    tl.addEventListener('click', (ev) => {
      if (noClick) { noClick = false; return; }
      const at = timelineAt(ev);
      if (at && at.dump >= 0 && (at.dump !== S.dump || S.sel)) selectDump(at.dump);
    });

    sizes.addEventListener('mousemove', (ev) => {
      const k = sizesAt(ev), v = S.view;
      if (k < 0) { hideTip(); return; }
      const g = sizeGeom;
      showTip(ev, '<div class="n">' + esc(bucketRange(k)) + '</div><table><tr class="on"><th>' + VIEWS[v] + '</th><td>' +
        esc(fmtValLong(g.b[k], v)) + '</td><td>' + pct(g.b[k], g.total) + '</td></tr></table>');
    });
    sizes.addEventListener('mouseleave', hideTip);

    document.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape') {
        escapeKey();
      } else if (ev.key === '/' && document.activeElement !== $('search') && document.activeElement !== $('hide')) {
        ev.preventDefault();
        $('search').focus();
      }
    });
    let resizeFrame = 0;
    window.addEventListener('resize', () => {
      if (resizeFrame) return;
      resizeFrame = requestAnimationFrame(() => { resizeFrame = 0; renderFlame(); renderTimeline(); renderSizes(); });
    });
    /* a fragment typed or pasted into the address bar */
    window.addEventListener('hashchange', () => {
      if (location.hash === lastHash) return;
      loadState();
      update(3);
    });

    loadState();
    update(3);
    document.body.dataset.ready = '1';
  }

  try {
    init();
  } catch (e) {
    fatal(e.message);
    throw e;
  }
})();
