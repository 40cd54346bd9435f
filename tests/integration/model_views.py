#!/usr/bin/env python3
"""model_views.py HEAPPROF PROFILE WORKDIR [--go] [FUNC=VALUE...]
   model_views.py HEAPPROF --live PID SERVE_URL WORKDIR [--go] [FUNC=VALUE...]

For tests/integration/test_model.sh: reads one profile through every view
heapprof has -- the SQL table experimental_flamegraph, the page of
`heapprof flamegraph`, `heapprof pprof` (through `go tool pprof -raw`, with
--go), `heapprof report`, `heapprof check` and `heapprof diff` -- and checks
that they give the same numbers per node (a path of functions from the
root) and per function, for every process, every heap and its first and
last dumps, in the four views.  A function is named here as the heap model
names it (docs/ARCHITECTURE.md, "The heap model"): its name, its module's
file name and, when symbolized offline, its source file's name.

--expect NAME@MODULE[@FILE]:VIEW=N (repeatable) also checks that the self
value of that function in the first process's libc.malloc heap at its last
dump is N in every view.

--live: a running process that `heapprof serve` (at SERVE_URL) profiles,
read through `heapprof top --once` (the four views), serve's /metrics
(heapprof_function_live_bytes) and /debug/pprof/heap (with --go): the
functions of its libc.malloc heap must have the same self values in each.
FUNC=VALUE checks then name the function as top does (NAME, or
"NAME (MODULE[ FILE])" when two functions share NAME).

Prints one line per mismatch and "checked: ..." at the end; exit status 1
on any mismatch, 2 on a broken input.
"""
import csv
import io
import json
import os
import re
import subprocess
import sys
import urllib.request

VIEWS = ["space", "alloc_space", "objects", "alloc_objects"]


def base(p):
    return os.path.basename(p) if p else ""


class Checker:
    def __init__(self, hp, db, work, go):
        self.hp, self.db, self.work, self.go = hp, db, work, go
        self.bad = []
        self.checked = 0

    def run(self, *args, ok=(0,)):
        r = subprocess.run([self.hp, *args], capture_output=True, text=True,
                           timeout=120)
        if r.returncode not in ok:
            sys.exit("model_views: heapprof %s: exit %d: %s" %
                     (" ".join(args), r.returncode, r.stderr[:300]))
        return r.stdout

    def sql(self, q):
        out = self.run("sql", self.db, q, "--csv")
        rows = list(csv.reader(io.StringIO(out)))
        return rows[1:]  # the header

    def same(self, what, a, b):
        """a, b: dicts key -> value; zero values are the same as none."""
        def nz(d):
            return {k: v for k, v in d.items()
                    if (any(v) if isinstance(v, (tuple, list)) else v)}
        a, b = nz(a), nz(b)
        self.checked += 1
        for k in sorted(set(a) | set(b), key=repr):
            if a.get(k) != b.get(k):
                self.bad.append("%s: %r: %s vs %s" %
                                (what, k, a.get(k), b.get(k)))

    # ---- the model as the SQL table gives it ------------------------------
    def sql_nodes(self, ts, upid, heap):
        """path -> [self values in VIEWS order]"""
        rows = self.sql(
            "select id, parent_id, name, map_name, source_file, size,"
            " alloc_size, count, alloc_count from experimental_flamegraph"
            "(%d, %d, 'native', '%s') order by id" % (ts, upid, heap))
        paths, nodes = {}, {}
        for r in rows:
            i, par = int(r[0]), r[1]
            key = (r[2], base(r[3]), base(r[4]))
            p = (paths[int(par)] if par != "" else ()) + (key,)
            paths[i] = p
            if p in nodes:
                self.bad.append("sql: two nodes with the path %r" % (p,))
            nodes[p] = [int(x) for x in r[5:9]]
        return nodes

    # ---- the page -----------------------------------------------------------
    def page(self):
        out = os.path.join(self.work, "page.html")
        self.run("flamegraph", self.db, "-o", out)
        html = open(out, encoding="utf-8").read()
        tag = '<script type="application/json" id="hp-data">'
        i = html.index(tag) + len(tag)
        d = json.loads(html[i:html.index("</script>", i)])
        nodes = d["nodes"]
        f = d["funcs"]
        keys = []
        for k in range(len(nodes["parent"])):
            fn = nodes["func"][k]
            m, fl = f["module"][fn], f["file"][fn]
            key = (f["name"][fn], base(d["modules"][m]) if m >= 0 else "",
                   base(d["files"][fl]) if fl >= 0 else "")
            par = nodes["parent"][k]
            keys.append((keys[par] if par >= 0 else ()) + (key,))
        page = {}
        for p in d["procs"]:
            for h in p["heaps"]:
                for di, dump in enumerate(h["dumps"]):
                    acc = {}
                    s = dump["d"]
                    for j in range(0, len(s), 5):
                        v = acc.setdefault(keys[s[j]], [0, 0, 0, 0])
                        for x in range(4):
                            v[x] += s[j + 1 + x]
                    page[(p["upid"], h["name"], di)] = acc
        return page

    # ---- pprof --------------------------------------------------------------
    def pprof(self, pid_id, heap, dump):
        out = os.path.join(self.work, "x.pb.gz")
        self.run("pprof", self.db, "--pid", pid_id, "--heap", heap,
                 "--dump", str(dump), "-o", out)
        return self.pprof_file(out)

    def pprof_file(self, out):
        raw = subprocess.run(["go", "tool", "pprof", "-raw", out],
                             capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, PPROF_BINARY_PATH="/nonexistent"))
        if raw.returncode:
            sys.exit("model_views: go tool pprof -raw failed: " +
                     raw.stderr[:300])
        section, samples, locs, maps, cur = None, [], {}, {}, None
        order = [0, 1, 2, 3]
        for line in raw.stdout.splitlines():
            if line in ("Samples:", "Locations", "Mappings"):
                section = line
                continue
            if section == "Samples:":
                m = re.match(r"^\s+([-\d ]+):((?: \d+)*)\s*$", line)
                if m:
                    vals = [int(x) for x in m.group(1).split()]
                    samples.append(([vals[k] for k in order],
                                    [int(x) for x in m.group(2).split()]))
                elif "/" in line:
                    # the sample types: heapprof's names or Go's
                    names = [t.split("/")[0].replace("inuse_", "")
                             for t in line.split()]
                    order = [names.index(v) for v in VIEWS]
            elif section == "Locations":
                m = re.match(r"^\s+(\d+): 0x[0-9a-f]+ M=(\d+) (.*) (\S*):\d+ s=\d+(?:\(.*\))?$",
                             line)
                if m:
                    cur = int(m.group(1))
                    locs[cur] = (int(m.group(2)), [(m.group(3), m.group(4))])
                    continue
                m = re.match(r"^\s+(.*) (\S*):\d+ s=\d+(?:\(.*\))?$", line)
                if m and cur is not None:
                    locs[cur][1].append((m.group(1), m.group(2)))
            elif section == "Mappings":
                m = re.match(r"^(\d+): \S+ (\S+)", line)
                if m:
                    maps[int(m.group(1))] = m.group(2)
        acc = {}
        for vals, ids in samples:
            path = ()
            for lid in reversed(ids):
                mid, lines = locs[lid]
                for name, fl in reversed(lines):
                    path += ((name, base(maps.get(mid, "")), base(fl)),)
            v = acc.setdefault(path, [0, 0, 0, 0])
            for x in range(4):
                v[x] += vals[x]
        return acc

    # ---- report -------------------------------------------------------------
    def report(self, pid_id, dump, view):
        """{heap: ({func: self}, {func: inclusive})}"""
        out = self.run("report", self.db, "--pid", pid_id, "--dump",
                       str(dump), "--view", view, "--top", "100000")
        res, heap, table = {}, None, None
        for line in out.splitlines():
            m = re.match(r"^  Heap (\S+), view ", line)
            if m:
                heap = m.group(1)
                res[heap] = ({}, {})
                table = None
                continue
            m = re.match(r"^  Top \d+ by (self|inclusive) ", line)
            if m and heap:
                table = res[heap][0 if m.group(1) == "self" else 1]
                continue
            if not line.startswith("    ") or table is None:
                if line.strip() == "" or line.startswith("  Leaks") or \
                        line.startswith("  Top ") or line.startswith("  Heap"):
                    if not line.startswith("  Top ") and line.strip():
                        table = None
                continue
            # bytes "1.50 KiB (1536 B)" or "512 B"; objects "12"
            m = re.match(r"^\s+\d+\s+(?:-?[\d.]+ \S+ \((-?\d+) B\)|(-?\d+)(?: B)?)"
                         r"\s+\S+%\s+(.*)$", line)
            if not m:
                continue
            val = int(m.group(1) or m.group(2))
            cols = re.split(r"\s{2,}", m.group(3).strip())
            name, mod = cols[0], cols[1]
            if re.match(r"^0x[0-9a-f]+$", name):
                name = mod + "+" + name  # report's label of an unnamed frame
            fl = cols[2].rsplit(":", 1)[0] if len(cols) > 2 else ""
            key = (name, mod, fl)
            if key in table:
                self.bad.append("report: %s listed twice" % (key,))
            table[key] = val
        return res

    # ---- check --------------------------------------------------------------
    def check(self, pid_id, heap, dump, view, pattern):
        out = self.run("check", self.db, "--pid", pid_id, "--heap", heap,
                       "--dump", str(dump),
                       "%s(%s) <= 0" % (view, pattern), ok=(0, 1))
        m = re.search(r"(?:\((-?\d+) B\)|: (-?\d+)(?: |,|$))", out)
        if not m:
            self.bad.append("check: no value in %r" % out[:200])
            return None
        if "nothing sampled" in out:
            return 0
        return int(m.group(1) or m.group(2))

    def diff(self, pid_id, heap, d1, d2, view):
        out = self.run("diff", self.db, "--dumps", "%d,%d" % (d1, d2),
                       "--pid", pid_id, "--heap", heap, "--view", view,
                       "--top", "100000")
        res, on = {}, False
        for line in out.splitlines():
            if re.match(r"^  Top \d+ (growing|shrinking) functions", line):
                on = True
                continue
            if re.match(r"^  Top ", line):
                on = False
            if not on:
                continue
            m = re.match(r"^\s+\d+\s+([-+]\d+)\s+\S+\s+-?\d+\s+-?\d+\s+"
                         r"(.*) \((\S+)(?: (\S+))?\)$", line)
            if m:
                name = m.group(2)
                if re.match(r"^0x[0-9a-f]+$", name):
                    name = m.group(3) + "+" + name  # an unnamed frame
                res[(name, m.group(3), m.group(4) or "")] = int(m.group(1))
        return res


def fmt_bytes(b):
    """as heapprof's hp_fmt_bytes_short"""
    v, u = abs(float(b)), 0
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    while v >= 1024.0 and u + 1 < len(units):
        v /= 1024.0
        u += 1
    if u == 0:
        return "%d B" % b
    return "%s%.2f %s" % ("-" if b < 0 else "", v, units[u])


def top_labels(funcs):
    """function key -> top's label (its name, or "name (module[ file])"
    when two functions of funcs share the name)."""
    count = {}
    for f in funcs:
        count[f[0]] = count.get(f[0], 0) + 1
    return {f: f[0] if count[f[0]] < 2 else
            "%s (%s%s)" % (f[0], f[1] or "?", " " + f[2] if f[2] else "")
            for f in funcs}


def live_main(args):
    hp, pid, surl, work = args[0], args[2], args[3], args[4]
    go = "--go" in args
    expects = [a.split("=", 1) for a in args[5:] if "=" in a]
    c = Checker(hp, None, work, go)
    tops = {}
    for vi, view in enumerate(VIEWS):
        out = c.run("top", "--once", "-p", pid, "--view", view, "--top",
                    "100000")
        rows, on = {}, False
        for line in out.splitlines():
            if re.match(r"^\s+\S+\s+\S+/s\s+%\s+FUNCTION", line):
                on = True
                continue
            if not on or not line.strip():
                on = on and bool(line.strip())
                continue
            cols = re.split(r"\s{2,}", line.strip(), maxsplit=3)
            if len(cols) < 4:
                continue
            if cols[0] not in ("0", "0 B"):
                rows[cols[3].split(" <- ")[0]] = cols[0]
        tops[view] = rows
    body = urllib.request.urlopen(surl + "/metrics", timeout=30).read()
    metrics = {}
    for line in body.decode().splitlines():
        m = re.match(r'^heapprof_function_live_bytes\{pid="%s",.*'
                     r'heap="libc.malloc",function="((?:[^"\\]|\\.)*)"\} '
                     r'(-?\d+)$' % pid, line)
        if m:
            metrics[m.group(1).replace('\\"', '"').replace(
                "\\\\", "\\")] = int(m.group(2))
    fns = None
    if go:
        gz = os.path.join(work, "live.pb.gz")
        with open(gz, "wb") as f:
            f.write(urllib.request.urlopen(
                surl + "/debug/pprof/heap?pid=%s" % pid, timeout=60).read())
        c.db = None
        nodes = c.pprof_file(gz)
        self_, _ = by_function(nodes)
        labels = top_labels(set(f for p in nodes for f in p))
        fns = {labels[k]: v for k, v in self_.items()}
        for vi, view in enumerate(VIEWS):
            want = {k: (fmt_bytes(v[vi]) if vi in (0, 1) else str(v[vi]))
                    for k, v in fns.items() if v[vi]}
            c.same("live: top --view %s vs /debug/pprof/heap" % view,
                   tops[view], want)
        c.same("live: /metrics function live bytes vs /debug/pprof/heap",
               metrics, {k: v[0] for k, v in fns.items() if v[0] > 0})
    else:
        c.same("live: /metrics function live bytes vs top",
               {k: fmt_bytes(v) for k, v in metrics.items()},
               {k: v for k, v in tops["space"].items() if k in metrics})
    for spec, value in expects:
        label, view = spec.rsplit(":", 1)
        got = tops[view].get(label)
        want = fmt_bytes(int(value)) if view in ("space", "alloc_space") \
            else value
        c.checked += 1
        if got != want:
            c.bad.append("live: expected %s = %s, top says %s" %
                         (spec, want, got))
        if view == "space":
            c.checked += 1
            if metrics.get(label) != int(value):
                c.bad.append("live: expected %s = %s, /metrics says %s" %
                             (spec, value, metrics.get(label)))
    for b in c.bad[:40]:
        print(b)
    print("checked: %d comparisons of a live process, %d mismatches" %
          (c.checked, len(c.bad)))
    sys.exit(1 if c.bad else 0)


def by_function(nodes):
    """self and inclusive per function from node paths."""
    self_, incl = {}, {}
    for path, v in nodes.items():
        if not path:
            continue
        f = path[-1]
        s = self_.setdefault(f, [0, 0, 0, 0])
        for x in range(4):
            s[x] += v[x]
        for g in set(path):
            i = incl.setdefault(g, [0, 0, 0, 0])
            for x in range(4):
                i[x] += v[x]
    return self_, incl


def main():
    args = sys.argv[1:]
    if len(args) >= 5 and args[1] == "--live":
        return live_main(args)
    if len(args) < 3:
        sys.exit(__doc__)
    hp, db, work = args[:3]
    go = "--go" in args
    expects = [a.split("=", 1) for a in args if "=" in a and "@" in a]
    c = Checker(hp, db, work, go)
    procs = c.sql("select upid, pid from process order by upid")
    page = c.page()
    nth = {}
    for upid, pid in procs:
        upid = int(upid)
        nth[pid] = nth.get(pid, 0) + 1
        pid_id = "%s.%d" % (pid, nth[pid])
        dumps = [int(r[0]) for r in c.sql(
            "select ts from heapprof_dump where upid = %d order by ts" % upid)]
        heaps = [r[0] for r in c.sql(
            "select distinct heap_name from heap_profile_allocation"
            " where upid = %d order by 1" % upid)]
        if not dumps:
            continue
        picks = sorted(set([1, len(dumps)]))
        states = {}
        for heap in heaps:
            for d in picks:
                nodes = c.sql_nodes(dumps[d - 1], upid, heap)
                states[(heap, d)] = nodes
                where = "process %s heap %s dump %d" % (pid_id, heap, d)
                c.same(where + ": page vs sql nodes",
                       {k: tuple(v) for k, v in
                        page.get((upid, heap, d - 1), {}).items()},
                       {k: tuple(v) for k, v in nodes.items()})
                if go:
                    c.same(where + ": pprof vs sql nodes",
                           {k: tuple(v) for k, v in
                            c.pprof(pid_id, heap, d).items()},
                           {k: tuple(v) for k, v in nodes.items()})
                self_, incl = by_function(nodes)
                for vi, view in enumerate(VIEWS):
                    # check: every stack through a function named helper,
                    # and through main then (inward) helper.
                    def through(p, *names):
                        k = 0
                        for f in p:
                            if k < len(names) and f[0] == names[k]:
                                k += 1
                        return k == len(names)
                    for pat, test in (
                            ("helper", lambda p: through(p, "helper")),
                            ("main>helper",
                             lambda p: through(p, "main", "helper"))):
                        want = sum(v[vi] for p, v in nodes.items() if test(p))
                        got = c.check(pid_id, heap, d, view, pat)
                        c.checked += 1
                        if got is not None and got != want:
                            c.bad.append("%s: check %s(%s) = %s, the model"
                                         " %s" % (where, view, pat, got,
                                                  want))
        for d in picks:
            for vi, view in enumerate(VIEWS):
                rep = c.report(pid_id, d, view)
                for heap in heaps:
                    self_, incl = by_function(states[(heap, d)])
                    r = rep.get(heap, ({}, {}))
                    where = "process %s heap %s dump %d view %s" % (
                        pid_id, heap, d, view)
                    c.same(where + ": report self vs sql",
                           r[0], {k: v[vi] for k, v in self_.items()})
                    c.same(where + ": report inclusive vs sql",
                           r[1], {k: v[vi] for k, v in incl.items()})
        if len(picks) == 2:
            for heap in heaps:
                a, _ = by_function(states[(heap, 1)])
                b, _ = by_function(states[(heap, len(dumps))])
                for vi, view in enumerate(VIEWS):
                    want = {k: b.get(k, [0] * 4)[vi] - a.get(k, [0] * 4)[vi]
                            for k in set(a) | set(b)}
                    c.same("process %s heap %s view %s: diff of dumps 1 and"
                           " %d vs sql" % (pid_id, heap, view, len(dumps)),
                           c.diff(pid_id, heap, 1, len(dumps), view), want)
    for spec, value in expects:
        fn, view = spec.rsplit(":", 1)
        parts = fn.split("@") + [""]
        key = (parts[0], parts[1], parts[2])
        upid = int(procs[0][0])
        dumps = [int(r[0]) for r in c.sql(
            "select ts from heapprof_dump where upid = %d order by ts" % upid)]
        self_, _ = by_function(c.sql_nodes(dumps[-1], upid, "libc.malloc"))
        got = self_.get(key, [0] * 4)[VIEWS.index(view)]
        c.checked += 1
        if got != int(value):
            c.bad.append("expected %s = %s, got %s" % (spec, value, got))
    for b in c.bad[:40]:
        print(b)
    print("checked: %d comparisons over %d processes, %d mismatches" %
          (c.checked, len(procs), len(c.bad)))
    sys.exit(1 if c.bad else 0)


if __name__ == "__main__":
    main()
