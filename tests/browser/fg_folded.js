#!/usr/bin/env node
/*
 * fg_folded.js: reads the data block of a page written by `heapprof
 * flamegraph` (no browser) and prints the stacks of one process, heap and
 * dump as folded lines, callers first, for tests/integration/
 * test_flamegraph.sh:
 *
 *   main;do_malloc 60000
 *
 * A frame with a known source line is printed as name@file:line.
 *
 * usage: node fg_folded.js PAGE.html [VIEW [PROC [HEAP [DUMP]]]]
 *   VIEW space (default), alloc_space, objects or alloc_objects; PROC, HEAP
 *   and DUMP are 0-based indexes (DUMP -1, the default, is the last).
 *
 * Also checks the format: exactly one data block, parents before children,
 * indexes in range, the allocation events ("ev") well formed.  Exit status 1 (message on stderr) if it is broken.
 */
'use strict';
const fs = require('fs');

function die(msg) {
  process.stderr.write('fg_folded: ' + msg + '\n');
  process.exit(1);
}

const [page, viewArg, procArg, heapArg, dumpArg] = process.argv.slice(2);
if (!page) die('usage: fg_folded.js PAGE.html [VIEW [PROC [HEAP [DUMP]]]]');
const html = fs.readFileSync(page, 'utf8');
const open = '<script type="application/json" id="hp-data">';
const start = html.indexOf(open);
if (start < 0 || html.indexOf(open, start + 1) >= 0) die('expected exactly one data block');
const end = html.indexOf('</script>', start);
if (end < 0) die('unterminated data block');
const D = JSON.parse(html.slice(start + open.length, end));
if (D.format !== 'heapprof-flamegraph' || D.version !== 1) die('unknown format');

const views = ['space', 'alloc_space', 'objects', 'alloc_objects'];
const v = views.indexOf(viewArg || 'space');
if (v < 0) die('bad view ' + viewArg);
const { parent, func, line } = D.nodes;
const n = parent.length;
if (func.length !== n || line.length !== n) die('node arrays differ in length');
const nF = D.funcs.name.length;
for (let i = 0; i < n; i++) {
  if (!(parent[i] >= -1 && parent[i] < i)) die('node ' + i + ': parent ' + parent[i] + ' does not come first');
  if (!(func[i] >= 0 && func[i] < nF)) die('node ' + i + ': bad func ' + func[i]);
}
for (let f = 0; f < nF; f++) {
  const m = D.funcs.module[f], file = D.funcs.file[f];
  if (!(m >= -1 && m < D.modules.length)) die('func ' + f + ': bad module');
  if (!(file >= -1 && file < D.files.length)) die('func ' + f + ': bad file');
}

/* A traced process's allocation events ("ev"): parallel arrays of one
   length, known nodes, times ascending, frees after their allocation. */
for (const pr of D.procs) {
  for (const h of pr.heaps) {
    const ev = h.ev;
    if (!ev) continue;
    for (const k of ['t', 'node', 'size', 'free', 'tid', 'charged', 'fp']) {
      if (ev[k] !== undefined && (!Array.isArray(ev[k]) || ev[k].length !== ev.n)) die('ev.' + k + ': not ' + ev.n + ' values');
    }
    if (!ev.t || !ev.node || !ev.size || !ev.free || !ev.tid) die('ev without t, node, size, free or tid');
    for (let i = 0; i < ev.n; i++) {
      if (!(ev.node[i] >= 0 && ev.node[i] < n)) die('event of unknown node ' + ev.node[i]);
      if (i && !(ev.t[i] >= 0)) die('events out of time order');
      if (!(ev.free[i] >= -1)) die('bad free time ' + ev.free[i]);
    }
    if (!pr.trace || !pr.trace.in_page) die('events of a process whose trace says they are not in the page');
  }
}

const proc = D.procs[Number(procArg || 0)];
if (!proc) die('no process ' + (procArg || 0));
const heap = proc.heaps[Number(heapArg || 0)];
if (!heap) die('no heap ' + (heapArg || 0));
if (heap.dumps.length !== proc.dumps.length) die('heap and process dump counts differ');
let di = Number(dumpArg === undefined ? -1 : dumpArg);
if (di < 0) di += heap.dumps.length;
const dump = heap.dumps[di];
if (!dump) die('no dump ' + dumpArg);

function label(i) {
  const f = func[i];
  const file = D.funcs.file[f];
  let s = D.funcs.name[f];
  if (file >= 0 && line[i] > 0) s += '@' + D.files[file] + ':' + line[i];
  return s;
}
const paths = new Map();
function path(i) {
  let p = paths.get(i);
  if (p === undefined) {
    p = parent[i] < 0 ? label(i) : path(parent[i]) + ';' + label(i);
    paths.set(i, p);
  }
  return p;
}
const sums = new Map();
const d = dump.d;
if (d.length % 5) die('sample array length is not a multiple of 5');
const tot = [0, 0, 0, 0];
for (let k = 0; k < d.length; k += 5) {
  if (!(d[k] >= 0 && d[k] < n)) die('sample of unknown node ' + d[k]);
  for (let j = 0; j < 4; j++) tot[j] += d[k + 1 + j];
  const x = d[k + 1 + v];
  if (!x) continue;
  const p = path(d[k]);
  sums.set(p, (sums.get(p) || 0) + x);
}
for (let j = 0; j < 4; j++) if (tot[j] !== dump.tot[j]) die('totals differ from the samples in view ' + views[j]);
const out = [...sums].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([p, x]) => p + ' ' + x);
process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
