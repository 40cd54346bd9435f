#!/usr/bin/env node
/*
 * check_flamegraph.js: opens a page written by `heapprof flamegraph` in
 * headless Chromium and reports what it shows, for
 * tests/integration/test_flamegraph.sh.  No npm packages: Chromium is driven
 * over the DevTools protocol on a pipe (--remote-debugging-pipe: we write
 * NUL-terminated JSON messages to its fd 3 and read its replies from fd 4).
 *
 * usage: node check_flamegraph.js PAGE.html SCREENSHOT.png [TIMEOUT_S]
 *
 * Prints "key=value" lines on stdout:
 *   space_top, space_top_self, space_total      top row of the top table
 *                                                (by self) and the root
 *                                                total in view space
 *   objects_top, objects_top_self, objects_total  the same after clicking
 *                                                the objects view button
 *   search_value, search_pct                     after searching for the
 *                                                space top function
 *   tooltip                                      1 if hovering showed one
 *   requests, requests_page (those of the page itself),
 *   screenshot_bytes, screenshot_colors
 *   ready_ms                                     from navigation to drawn
 *   zoom, zoom_after_escape                      the zoomed frame after a
 *                                                click on the flame graph
 *                                                (at 12% of its width, row
 *                                                4), then after Escape
 *   focus_root, focus_shown, focus_cleared       after a click on the top
 *                                                row of the table: the
 *                                                graph's root and total;
 *                                                the root after "Clear"
 *   dumps; dump1_top, dump1_top_self, dump1_total  with several dumps: the
 *                                                probe after a click on
 *                                                the memory chart's first
 *                                                dump tick
 * and with HP_FG_CHECKS (a comma-separated list of hide, inverted, focus,
 * threads, sizes, drag, url):
 *   hide_default, hide_default_first, hide_default_hidden, hide_default_shown
 *                                                the hide box's default and
 *                                                the graph's first frame
 *                                                under the root with it;
 *   hide_middle, hide_middle_first, hide_middle_shown, hide_middle_total,
 *   hide_middle_in_top                           after hiding that frame
 *                                                (/^name$/);
 *   hide_none_first, hide_none_hidden            with the box cleared
 *   inverted_kids, inverted_shown                the inverted graph's
 *                                                root children
 *                                                (name=total;... by name)
 *   focus_F_callees, focus_F_callers, focus_F_callers_root,
 *   focus_F_callers_kids                         for each F of HP_FG_FOCUS
 *                                                (a click on its row, every
 *                                                frame shown)
 *   threads                                      tid:space:alloc_space;...
 *                                                for each thread
 *   sizes_space*, sizes_alloc*, sizes_allocobj*  the size chart's source,
 *                                                total and buckets
 *                                                (k:amount;...)
 *   drag_selection, drag_source, drag_VIEW, drag_sizes_source,
 *   drag_after_escape                            after a drag over the
 *                                                timeline (HP_FG_DRAG: "A,B"
 *                                                fractions of its width, or
 *                                                "dumps": between the first
 *                                                two dumps), then Escape
 *   url_hash, url_reload_*                       a state set with the
 *                                                controls, then reloaded
 *   frag_*                                       the page opened afresh at
 *                                                #HP_FG_FRAGMENT
 *   bad_*                                        the page opened with a
 *                                                broken fragment
 * and "error=..." lines for every problem: a request other than the page
 * itself (data: and blob: URLs excepted), a console error, an uncaught
 * exception, a page that never became ready.  Exit status 0 if there were
 * no errors, 1 otherwise, 2 on bad usage.  Chromium is killed on every
 * path, and everything is bounded by TIMEOUT_S (default 60).
 */
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const zlib = require('zlib');
const { pathToFileURL } = require('url');

const [pagePath, shotPath, timeoutArg] = process.argv.slice(2);
if (!pagePath || !shotPath) {
  process.stderr.write('usage: check_flamegraph.js PAGE.html SCREENSHOT.png [TIMEOUT_S]\n');
  process.exit(2);
}
const TIMEOUT_MS = 1000 * (Number(timeoutArg) > 0 ? Number(timeoutArg) : 60);
const pageUrl = pathToFileURL(path.resolve(pagePath)).href;
const chromiumBin = process.env.CHROMIUM || 'chromium';

const errors = [];
const results = {};
const requests = [];
function error(msg) {
  errors.push(String(msg).replace(/\s+/g, ' ').slice(0, 500));
}

/* ---- Chromium --------------------------------------------------------- */

const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hp-chromium-'));
const chromeLog = path.join(userDir, 'chromium.log');
const logFd = fs.openSync(chromeLog, 'w');
const child = spawn(chromiumBin, [
  '--headless=new', '--no-sandbox', '--disable-gpu', '--remote-debugging-pipe',
  '--user-data-dir=' + userDir, '--no-first-run', '--no-default-browser-check',
  '--disable-background-networking', '--disable-component-update',
  '--disable-default-apps', '--disable-extensions', '--disable-sync',
  '--disable-domain-reliability', '--disable-client-side-phishing-detection',
  '--disable-breakpad', '--metrics-recording-only', '--no-pings',
  '--disable-features=Translate,OptimizationHints,MediaRouter,InterestFeedContentSuggestions',
  '--hide-scrollbars', '--mute-audio', '--window-size=1400,1000',
  '--force-device-scale-factor=1', 'about:blank',
], { stdio: ['ignore', logFd, logFd, 'pipe', 'pipe'], detached: true });
let childExited = false;
child.on('exit', () => { childExited = true; });
child.on('error', (e) => { error('cannot start ' + chromiumBin + ': ' + e.message); finish(); });

function killChromium() {
  if (childExited || !child.pid) return;
  /* its own process group (detached): the browser and its helpers */
  try { process.kill(-child.pid, 'SIGKILL'); } catch (e) { /* gone */ }
  try { child.kill('SIGKILL'); } catch (e) { /* gone */ }
}

const toChrome = child.stdio[3];
const fromChrome = child.stdio[4];
let nextId = 1;
const pending = new Map();
const listeners = [];
let buf = Buffer.alloc(0);
fromChrome.on('data', (chunk) => {
  buf = Buffer.concat([buf, chunk]);
  let end;
  while ((end = buf.indexOf(0)) >= 0) {
    const text = buf.subarray(0, end).toString('utf8');
    buf = buf.subarray(end + 1);
    let msg;
    try { msg = JSON.parse(text); } catch (e) { error('bad CDP message: ' + text.slice(0, 200)); continue; }
    if (msg.id && pending.has(msg.id)) {
      const p = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) p.reject(new Error(p.method + ': ' + JSON.stringify(msg.error)));
      else p.resolve(msg.result);
    } else if (msg.method) {
      for (const l of listeners) l(msg);
    }
  }
});
fromChrome.on('error', () => {});
toChrome.on('error', () => {});

function send(method, params, sessionId) {
  const id = nextId++;
  const msg = { id, method, params: params || {} };
  if (sessionId) msg.sessionId = sessionId;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject, method });
    toChrome.write(JSON.stringify(msg) + '\0');
  });
}

/* Resolves when pred(message) holds for an event, bounded by the deadline. */
function waitEvent(pred, what, ms) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { done(); reject(new Error('timed out waiting for ' + what)); }, ms);
    const l = (msg) => { if (pred(msg)) { done(); resolve(msg); } };
    const done = () => { clearTimeout(timer); const i = listeners.indexOf(l); if (i >= 0) listeners.splice(i, 1); };
    listeners.push(l);
  });
}

/* ---- the checks ---------------------------------------------------------- */

function watch(sessionId) {
  listeners.push((msg) => {
    if (msg.sessionId !== sessionId) return;
    const p = msg.params || {};
    switch (msg.method) {
    case 'Network.requestWillBeSent': {
      const url = p.request && p.request.url || '';
      requests.push(url);
      if (url.split('#')[0] !== pageUrl && !/^(data|blob):/.test(url)) error('network request: ' + url);
      break;
    }
    case 'Runtime.consoleAPICalled':
      if (p.type === 'error' || p.type === 'assert') {
        error('console.' + p.type + ': ' + (p.args || []).map((a) => a.value !== undefined ? a.value : a.description).join(' '));
      }
      break;
    case 'Runtime.exceptionThrown': {
      const d = p.exceptionDetails || {};
      error('uncaught exception: ' + (d.exception && d.exception.description || d.text));
      break;
    }
    case 'Log.entryAdded':
      if (p.entry && p.entry.level === 'error') error('log error: ' + p.entry.text + (p.entry.url ? ' (' + p.entry.url + ')' : ''));
      break;
    default:
    }
  });
}

async function evaluate(sessionId, expr) {
  const r = await send('Runtime.evaluate', { expression: expr, returnByValue: true, awaitPromise: true }, sessionId);
  if (r.exceptionDetails) throw new Error('evaluate failed: ' + (r.exceptionDetails.exception && r.exceptionDetails.exception.description || r.exceptionDetails.text));
  return r.result.value;
}

/* Polls expr until it is truthy; bounded. */
async function waitFor(sessionId, expr, what, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await evaluate(sessionId, expr);
    if (v) return v;
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const PROBE = `(() => {
  const row = document.querySelector('#top tbody tr[data-func]');
  return {
    ready: document.body.dataset.ready || '',
    view: document.body.dataset.view || '',
    top: row ? row.dataset.func : '',
    topSelf: row ? row.dataset.self : '',
    total: document.getElementById('flame').dataset.total || '',
  };
})()`;

/* Decodes an 8-bit RGB(A) PNG and counts its colours (up to 1000). */
function pngColors(png) {
  if (png.length < 33 || png.readUInt32BE(0) !== 0x89504e47) throw new Error('not a PNG');
  let off = 8, width = 0, height = 0, depth = 0, ctype = 0;
  const idat = [];
  while (off + 8 <= png.length) {
    const len = png.readUInt32BE(off), type = png.toString('latin1', off + 4, off + 8);
    const data = png.subarray(off + 8, off + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0); height = data.readUInt32BE(4); depth = data[8]; ctype = data[9];
      if (data[12] !== 0) throw new Error('interlaced PNG');
    } else if (type === 'IDAT') {
      idat.push(data);
    } else if (type === 'IEND') {
      break;
    }
    off += 12 + len;
  }
  const bpp = ctype === 6 ? 4 : ctype === 2 ? 3 : 0;
  if (depth !== 8 || !bpp) throw new Error('unsupported PNG (depth ' + depth + ', colour type ' + ctype + ')');
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * bpp;
  let prev = Buffer.alloc(stride), cur = Buffer.alloc(stride);
  const colors = new Set();
  for (let y = 0; y < height; y++) {
    const base = y * (stride + 1), filter = raw[base];
    for (let i = 0; i < stride; i++) {
      const x = raw[base + 1 + i], a = i >= bpp ? cur[i - bpp] : 0, b = prev[i], c = i >= bpp ? prev[i - bpp] : 0;
      let v;
      switch (filter) {
      case 0: v = x; break;
      case 1: v = x + a; break;
      case 2: v = x + b; break;
      case 3: v = x + ((a + b) >> 1); break;
      case 4: {
        const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
        v = x + (pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
        break;
      }
      default: throw new Error('bad PNG filter ' + filter);
      }
      cur[i] = v & 255;
    }
    if (colors.size < 1000) {
      for (let i = 0; i < stride; i += bpp) colors.add(cur.readUIntBE(i, 3));
    }
    [prev, cur] = [cur, prev];
  }
  return { width, height, colors: colors.size };
}

async function run() {
  await send('Target.setDiscoverTargets', { discover: true });
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  watch(sessionId);
  await send('Network.enable', {}, sessionId);
  await send('Runtime.enable', {}, sessionId);
  await send('Log.enable', {}, sessionId);
  await send('Page.enable', {}, sessionId);
  await send('Emulation.setDeviceMetricsOverride', { width: 1400, height: 1000, deviceScaleFactor: 1, mobile: false }, sessionId);
  const loaded = waitEvent((m) => m.sessionId === sessionId && m.method === 'Page.loadEventFired', 'the page load', 30000);
  const t0 = Date.now();
  const nav = await send('Page.navigate', { url: pageUrl }, sessionId);
  if (nav.errorText) throw new Error('navigation failed: ' + nav.errorText);
  await loaded;
  await waitFor(sessionId, "document.body && ['1', 'error'].includes(document.body.dataset.ready)", 'the page to render', 30000);
  results.ready_ms = Date.now() - t0;
  let s = await evaluate(sessionId, PROBE);
  if (s.ready !== '1') throw new Error('the page reported an error: ' + await evaluate(sessionId, "(document.querySelector('.fatal') || {}).textContent || ''"));
  results.space_view = s.view;
  results.space_top = s.top;
  results.space_top_self = s.topSelf;
  results.space_total = s.total;
  /* the dump the page opened on, and its memory chart */
  results.first_dump = await evaluate(sessionId, "document.getElementById('dump').value");
  results.first_dump_text = await evaluate(sessionId, "(document.getElementById('dump').selectedOptions[0] || {}).textContent || ''");
  results.timeline_source = await evaluate(sessionId, "document.getElementById('timeline').dataset.source || ''");
  results.timeline_points = await evaluate(sessionId, "document.getElementById('timeline').dataset.points || ''");
  results.timeline_rss = await evaluate(sessionId, "document.getElementById('timeline').dataset.rss || ''");
  results.timeline_max = await evaluate(sessionId, "document.getElementById('timeline').dataset.max || ''");

  /* search for the top function: the matched share of the graph */
  await evaluate(sessionId, `(() => { const i = document.getElementById('search'); i.value = ${JSON.stringify(s.top)}; i.dispatchEvent(new Event('input')); })()`);
  const m = await evaluate(sessionId, "(() => { const e = document.getElementById('match'); return { v: e.dataset.value || '', p: e.dataset.pct || '' }; })()");
  results.search_value = m.v;
  results.search_pct = m.p;
  await evaluate(sessionId, "(() => { const i = document.getElementById('search'); i.value = ''; i.dispatchEvent(new Event('input')); })()");

  /* switch to objects with the page's own control */
  await evaluate(sessionId, "document.querySelector('#views button[data-view=\"objects\"]').click()");
  await waitFor(sessionId, "document.body.dataset.view === 'objects'", 'the objects view', 10000);
  s = await evaluate(sessionId, PROBE);
  results.objects_top = s.top;
  results.objects_top_self = s.topSelf;
  results.objects_total = s.total;

  /* back to space, hover the widest frame below the root for a tooltip in
   * the screenshot, then capture it */
  await evaluate(sessionId, "document.querySelector('#views button[data-view=\"space\"]').click()");
  await waitFor(sessionId, "document.body.dataset.view === 'space'", 'the space view', 10000);
  /* a frame of the first row under the root (main in known: the default
   * hide box takes out _start and the libc frames above it), else the root */
  let tipShown = false;
  for (const row of [1, 0]) {
    hoverRow = row;
    const pt = await evaluate(sessionId, `(() => {
      window.scrollTo(0, 0);
      const r = document.getElementById('flame').getBoundingClientRect();
      return { x: r.left + r.width * 0.12, y: r.top + 18 * ${row} + 9 };
    })()`);
    await send('Input.dispatchMouseEvent', { type: 'mouseMoved', x: pt.x, y: pt.y }, sessionId);
    try {
      await waitFor(sessionId, "!document.getElementById('tip').hidden", 'the tooltip', 3000);
      tipShown = true;
      break;
    } catch (e) { /* try the next row */ }
  }
  if (!tipShown) error('no tooltip when hovering the flame graph');
  results.tooltip = tipShown ? 1 : 0;
  const shot = await send('Page.captureScreenshot', { format: 'png', captureBeyondViewport: false }, sessionId);
  const png = Buffer.from(shot.data, 'base64');
  fs.writeFileSync(shotPath, png);
  results.screenshot_bytes = png.length;
  const info = pngColors(png);
  results.screenshot_size = info.width + 'x' + info.height;
  results.screenshot_colors = info.colors;
  await clickChecks(sessionId);
  await featureChecks(sessionId);
  closing = true;
  try { await Promise.race([send('Browser.close'), new Promise((r) => setTimeout(r, 3000))]); } catch (e) { /* killed below */ }
}

/* Real mouse clicks: zoom, focus from the top table, another dump. */
async function click(sessionId, x, y) {
  for (const type of ['mousePressed', 'mouseReleased']) {
    await send('Input.dispatchMouseEvent', { type, x, y, button: 'left', clickCount: 1 }, sessionId);
  }
}

async function clickChecks(sessionId) {
  const FLAME = "document.getElementById('flame').dataset";
  /* a click on the hovered frame (main in known) zooms to it */
  if (hoverRow > 0) {
    const pt = await evaluate(sessionId, `(() => {
      const r = document.getElementById('flame').getBoundingClientRect();
      return { x: r.left + r.width * 0.12, y: r.top + 18 * ${hoverRow} + 9 };
    })()`);
    await click(sessionId, pt.x, pt.y);
    results.zoom = await waitFor(sessionId, `${FLAME}.zoom !== 'all' && ${FLAME}.zoom`, 'a zoom', 5000);
    await send('Input.dispatchKeyEvent', { type: 'keyDown', key: 'Escape', code: 'Escape', windowsVirtualKeyCode: 27 }, sessionId);
    await send('Input.dispatchKeyEvent', { type: 'keyUp', key: 'Escape', code: 'Escape', windowsVirtualKeyCode: 27 }, sessionId);
    results.zoom_after_escape = await waitFor(sessionId, `${FLAME}.zoom === 'all' && ${FLAME}.zoom`, 'the zoom reset', 5000);
  }

  /* focus on the top function: its row in the top table */
  const row = await evaluate(sessionId, `(() => {
    const tr = document.querySelector('#top tbody tr[data-func]');
    tr.scrollIntoView({ block: 'center' });
    const r = tr.getBoundingClientRect();
    return { x: r.left + r.width / 2, y: r.top + r.height / 2, f: tr.dataset.func };
  })()`);
  await click(sessionId, row.x, row.y);
  await waitFor(sessionId, `${FLAME}.root === ${JSON.stringify(row.f)}`, 'the focus', 5000);
  results.focus_root = await evaluate(sessionId, `${FLAME}.root`);
  results.focus_shown = await evaluate(sessionId, `${FLAME}.shown`);
  await evaluate(sessionId, "document.querySelector('#focusbar button').click()");
  results.focus_cleared = await waitFor(sessionId, `${FLAME}.root === 'all' && ${FLAME}.root`, 'the focus to clear', 5000);

  /* another dump: click the first dump's tick on the memory chart */
  const pts = await evaluate(sessionId, `(() => {
    const c = document.getElementById('timeline');
    c.scrollIntoView({ block: 'center' });
    const r = c.getBoundingClientRect();
    return { left: r.left, top: r.top, h: r.height, xs: (c.dataset.dumps || '').split(',').filter(Boolean).map(Number) };
  })()`);
  results.dumps = pts.xs.length;
  if (pts.xs.length > 1) {
    await click(sessionId, pts.left + pts.xs[0], pts.top + pts.h - 30);
    await waitFor(sessionId, "document.getElementById('dump').value === '0'", 'the first dump', 5000);
    const s = await evaluate(sessionId, PROBE);
    results.dump1_top = s.top;
    results.dump1_top_self = s.topSelf;
    results.dump1_total = s.total;
  }
}

/* ---- the graph's other controls (HP_FG_CHECKS) ---------------------------- */

const CHECKS = new Set((process.env.HP_FG_CHECKS || '').split(',').filter(Boolean));
const FLAME_DS = "document.getElementById('flame').dataset";
const TL_DS = "document.getElementById('timeline').dataset";
/* What the page shows, to compare before and after a reload. */
const STATE = `(() => {
  const f = document.getElementById('flame').dataset;
  return {
    ready: document.body.dataset.ready || '', view: document.body.dataset.view || '',
    root: f.root || '', shown: f.shown || '', total: f.total || '', inverted: f.inverted || '',
    checkbox: document.getElementById('inverted').checked ? '1' : '0',
    hide: document.getElementById('hide').value, search: document.getElementById('search').value,
    selection: document.getElementById('timeline').dataset.selection || '',
    thread: document.getElementById('thread').value,
    callers: document.getElementById('callers').dataset.shown || '',
  };
})()`;
const reEsc = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

async function featureChecks(sid) {
  if (!CHECKS.size) return;
  const kids = (id) => evaluate(sid, `JSON.parse(document.getElementById('${id}').dataset.kids || '[]')`);
  const fmtKids = (k) => k.map(([n, v]) => n + '=' + v).sort().join(';');
  const ds = (expr) => evaluate(sid, expr);
  const view = async (v) => {
    await evaluate(sid, `document.querySelector('#views button[data-view="${v}"]').click()`);
    await waitFor(sid, `document.body.dataset.view === '${v}'`, 'view ' + v, 5000);
  };
  /* the hide box's change event (its input event waits a little) */
  const setHide = (text) => evaluate(sid, `(() => { const i = document.getElementById('hide'); i.value = ${JSON.stringify(text)};
    i.dispatchEvent(new Event('change')); })()`);
  const defaultHide = await evaluate(sid, "document.getElementById('hide').value");
  results.hide_default = defaultHide;
  await view('space');

  if (CHECKS.has('hide')) {
    /* the default list: the first frame under the root */
    let k = await kids('flame');
    results.hide_default_first = k.length ? k[0][0] : '';
    results.hide_default_hidden = await ds(FLAME_DS + '.hidden');
    results.hide_default_shown = await ds(FLAME_DS + '.shown');
    /* hiding a function in the middle of the stacks */
    const mid = results.hide_default_first;
    results.hide_middle = mid;
    await setHide('/^' + reEsc(mid) + '$/');
    k = await kids('flame');
    results.hide_middle_first = k.length ? k[0][0] : '';
    results.hide_middle_shown = await ds(FLAME_DS + '.shown');
    results.hide_middle_total = await ds(FLAME_DS + '.total');
    results.hide_middle_in_top = await ds(`[...document.querySelectorAll('#top tbody tr[data-func]')].filter((r) => r.dataset.func === ${JSON.stringify(mid)}).length`);
    /* nothing hidden */
    await setHide('');
    k = await kids('flame');
    results.hide_none_first = k.length ? k[0][0] : '';
    results.hide_none_hidden = await ds(FLAME_DS + '.hidden');
  }

  if (CHECKS.has('inverted')) {
    await setHide('');
    await evaluate(sid, "document.getElementById('inverted').click()");
    await waitFor(sid, `${FLAME_DS}.inverted === '1'`, 'the inverted graph', 5000);
    results.inverted_kids = fmtKids(await kids('flame'));
    results.inverted_shown = await ds(FLAME_DS + '.shown');
    await evaluate(sid, "document.getElementById('inverted').click()");
    await waitFor(sid, `${FLAME_DS}.inverted === '0'`, 'the graph back', 5000);
  }

  if (CHECKS.has('focus')) {
    /* every frame shown, so the callers go up to the root */
    await setHide('');
    for (const fn of (process.env.HP_FG_FOCUS || '').split(',').filter(Boolean)) {
      const row = await evaluate(sid, `(() => {
        const tr = [...document.querySelectorAll('#top tbody tr[data-func]')].find((r) => r.dataset.func === ${JSON.stringify(fn)});
        if (!tr) return null;
        tr.scrollIntoView({ block: 'center' });
        const r = tr.getBoundingClientRect();
        return { x: r.left + r.width / 2, y: r.top + r.height / 2 };
      })()`);
      if (!row) { error('focus: no row for ' + fn + ' in the top table'); continue; }
      await click(sid, row.x, row.y);
      await waitFor(sid, `${FLAME_DS}.root === ${JSON.stringify(fn)}`, 'the focus on ' + fn, 5000);
      results['focus_' + fn + '_callees'] = await ds(FLAME_DS + '.shown');
      results['focus_' + fn + '_callers'] = await ds("document.getElementById('callers').dataset.shown");
      results['focus_' + fn + '_callers_root'] = await ds("document.getElementById('callers').dataset.root");
      results['focus_' + fn + '_callers_kids'] = fmtKids(await kids('callers'));
      await evaluate(sid, "document.querySelector('#focusbar button').click()");
      await waitFor(sid, `${FLAME_DS}.root === 'all'`, 'the focus to clear', 5000);
    }
  }
  await setHide(defaultHide);

  if (CHECKS.has('threads')) {
    const tids = await evaluate(sid, "[...document.querySelectorAll('#thread option')].map((o) => o.value).filter(Boolean)");
    const out = [];
    for (const tid of tids) {
      await evaluate(sid, `(() => { const s = document.getElementById('thread'); s.value = ${JSON.stringify(tid)}; s.dispatchEvent(new Event('change')); })()`);
      await waitFor(sid, `document.getElementById('thread').value === ${JSON.stringify(tid)}`, 'thread ' + tid, 5000);
      const space = await ds(FLAME_DS + '.total');
      await view('alloc_space');
      out.push(tid + ':' + space + ':' + await ds(FLAME_DS + '.total'));
      await view('space');
    }
    results.threads = out.sort().join(';');
    await evaluate(sid, "(() => { const s = document.getElementById('thread'); s.value = ''; s.dispatchEvent(new Event('change')); })()");
  }

  if (CHECKS.has('sizes')) {
    const hist = async () => {
      const r = await evaluate(sid, "(() => { const d = document.getElementById('sizes').dataset; return { s: d.source, t: d.total, b: JSON.parse(d.buckets || '[]') }; })()");
      return [r.s, r.t, r.b.map(([k, v]) => k + ':' + v).join(';')];
    };
    [results.sizes_space_source, results.sizes_space_total, results.sizes_space] = await hist();
    await view('alloc_space');
    [results.sizes_alloc_source, results.sizes_alloc_total, results.sizes_alloc] = await hist();
    await view('alloc_objects');
    [results.sizes_allocobj_source, results.sizes_allocobj_total, results.sizes_allocobj] = await hist();
    await view('space');
  }

  if (CHECKS.has('drag')) {
    /* a drag over the memory over time chart: HP_FG_DRAG is "A,B" (from and
     * to as fractions of the plot's width) or "dumps" (between the first
     * two dumps' ticks) */
    const spec = process.env.HP_FG_DRAG || '0.3,0.7';
    const g = await evaluate(sid, `(() => {
      const c = document.getElementById('timeline');
      c.scrollIntoView({ block: 'center' });
      const r = c.getBoundingClientRect();
      return { left: r.left, top: r.top, width: r.width, height: r.height,
        dumps: (c.dataset.dumps || '').split(',').filter(Boolean).map(Number) };
    })()`);
    let x0, x1;
    if (spec === 'dumps') {
      if (g.dumps.length < 2) throw new Error('drag: fewer than two dumps on the timeline');
      x0 = g.left + g.dumps[0] + 3;
      x1 = g.left + g.dumps[1] - 3;
    } else {
      const [a, b] = spec.split(',').map(Number);
      /* the plot: 72 px on the left for the axis, 16 on the right */
      x0 = g.left + 72 + (g.width - 88) * a;
      x1 = g.left + 72 + (g.width - 88) * b;
    }
    const y = g.top + g.height / 2;
    await send('Input.dispatchMouseEvent', { type: 'mousePressed', x: x0, y, button: 'left', buttons: 1, clickCount: 1 }, sid);
    await send('Input.dispatchMouseEvent', { type: 'mouseMoved', x: (x0 + x1) / 2, y, button: 'left', buttons: 1 }, sid);
    await send('Input.dispatchMouseEvent', { type: 'mouseMoved', x: x1, y, button: 'left', buttons: 1 }, sid);
    await send('Input.dispatchMouseEvent', { type: 'mouseReleased', x: x1, y, button: 'left', buttons: 0, clickCount: 1 }, sid);
    results.drag_selection = await waitFor(sid, `${TL_DS}.selection`, 'a window from the drag', 5000);
    results.drag_source = await ds("document.getElementById('winbar').dataset.source || ''");
    for (const v of ['space', 'alloc_space', 'objects', 'alloc_objects']) {
      await view(v);
      results['drag_' + v] = await ds(FLAME_DS + '.total');
    }
    await view('space');
    results.drag_sizes_source = await ds("document.getElementById('sizes').dataset.source");
    await send('Input.dispatchKeyEvent', { type: 'keyDown', key: 'Escape', code: 'Escape', windowsVirtualKeyCode: 27 }, sid);
    await send('Input.dispatchKeyEvent', { type: 'keyUp', key: 'Escape', code: 'Escape', windowsVirtualKeyCode: 27 }, sid);
    await waitFor(sid, `${TL_DS}.selection === ''`, 'Escape to clear the window', 5000);
    results.drag_after_escape = await ds(FLAME_DS + '.total');
  }

  if (CHECKS.has('url')) {
    /* a state set with the controls, then the page reloaded with its URL */
    const fn = (process.env.HP_FG_FOCUS || '').split(',').filter(Boolean)[0];
    await view('objects');
    await evaluate(sid, "(() => { const i = document.getElementById('search'); i.value = 'do_'; i.dispatchEvent(new Event('input')); })()");
    await setHide('/^_start$/');
    await evaluate(sid, "document.getElementById('inverted').click()");
    if (fn) {
      await evaluate(sid, `[...document.querySelectorAll('#top tbody tr[data-func]')].find((r) => r.dataset.func === ${JSON.stringify(fn)}).click()`);
      await waitFor(sid, `${FLAME_DS}.root === ${JSON.stringify(fn)}`, 'the focus', 5000);
    }
    const before = await evaluate(sid, STATE);
    results.url_hash = await evaluate(sid, 'location.hash');
    const reload = async (url) => {
      await evaluate(sid, 'window.hpOld = 1');
      const loaded = waitEvent((m) => m.sessionId === sid && m.method === 'Page.loadEventFired', 'the page load', 30000);
      if (url) {
        const nav = await send('Page.navigate', { url }, sid);
        if (nav.errorText) throw new Error('navigation failed: ' + nav.errorText);
      } else {
        await send('Page.reload', {}, sid);
      }
      await loaded;
      if (url === 'about:blank') return null;
      await waitFor(sid, "!window.hpOld && document.body && ['1', 'error'].includes(document.body.dataset.ready)", 'the page to render again', 30000);
      return evaluate(sid, STATE);
    };
    const after = await reload(null);
    results.url_reload_same = JSON.stringify(before) === JSON.stringify(after) ? 1 : 0;
    if (!results.url_reload_same) error('reload: ' + JSON.stringify(before) + ' became ' + JSON.stringify(after));
    results.url_reload_view = after.view;
    results.url_reload_root = after.root;
    results.url_reload_inverted = after.checkbox;
    results.url_reload_hide = after.hide;
    results.url_reload_search = after.search;
    /* a link written by hand (HP_FG_FRAGMENT), opened afresh */
    const frag = process.env.HP_FG_FRAGMENT;
    if (frag) {
      await reload('about:blank');
      const s = await reload(pageUrl + '#' + frag);
      results.frag_view = s.view;
      results.frag_root = s.root;
      results.frag_inverted = s.checkbox;
      results.frag_shown = s.shown;
      results.frag_total = s.total;
      results.frag_callers = s.callers;
      results.frag_selection = s.selection;
    }
    /* a broken fragment: ignored */
    await reload('about:blank');
    const bad = await reload(pageUrl + '#view=bogus&dump=99&focus=no_such_function&win=1,x&tid=abc&inv=2&%zz=%&hide=%E0%A4%A&=1&&q');
    results.bad_ready = bad.ready;
    results.bad_view = bad.view;
    results.bad_root = bad.root;
    results.bad_inverted = bad.checkbox;
    results.bad_hide_default = bad.hide === defaultHide ? 1 : 0;
    results.bad_selection = bad.selection;
  }
}

let hoverRow = -1;
let finished = false;
let closing = false;
function finish() {
  if (finished) return;
  finished = true;
  killChromium();
  results.requests = requests.length;
  results.requests_page = requests.filter((u) => u.split('#')[0] === pageUrl).length;
  let out = '';
  for (const [k, v] of Object.entries(results)) out += k + '=' + v + '\n';
  for (const e of errors) out += 'error=' + e + '\n';
  if (errors.length) {
    try {
      const log = fs.readFileSync(chromeLog, 'utf8').split('\n').filter((l) => l && !/unexpected operator|dbus\//.test(l)).slice(-5);
      for (const l of log) out += 'chromium: ' + l + '\n';
    } catch (e) { /* no log */ }
  }
  process.stdout.write(out);
  try { fs.rmSync(userDir, { recursive: true, force: true }); } catch (e) { /* best effort */ }
  process.exit(errors.length ? 1 : 0);
}

const overall = setTimeout(() => { error('timed out after ' + TIMEOUT_MS / 1000 + ' s'); finish(); }, TIMEOUT_MS);
child.on('exit', (code, sig) => { if (!finished && !closing) { error('chromium exited early (' + (sig || code) + ')'); finish(); } });
run().then(finish, (e) => { error(e.message); finish(); });
