#!/usr/bin/python3
# alloc.py ROUNDS
#
# The python3 benchmark workload: an allocation-heavy, deterministic script
# of the kind Python is used for. Each round builds a batch of small
# records (a dict of strings, ints and a list each), indexes them by tag
# in dicts of lists, sorts them by several keys, builds report strings
# piece by piece, groups them into tuples, then drops the oldest records.
# A few hundred thousand small objects per round. bench/workloads.sh runs
# it with PYTHONHASHSEED=0 and, by default, PYTHONMALLOC=malloc, so that
# every object goes through the profiled allocator (see docs/BENCHMARKS.md).
# Prints RESULT lines that must be the same under every profiler.
import sys


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    if rounds < 1:
        sys.exit("usage: alloc.py ROUNDS")

    state = 4242

    def rnd(n):
        nonlocal state
        state = (state * 1103515245 + 12345) % 2147483648
        return (state >> 8) % n

    words = ["".join(chr(97 + rnd(26)) for _ in range(3 + rnd(8)))
             for _ in range(3000)]

    records = {}    # id -> record dict
    index = {}      # tag -> [ids]
    next_id = 0
    checksum = 0
    batch = 12000
    keep = 20000

    for _ in range(rounds):
        # Make and parse a batch of text records.
        lines = []
        for _ in range(batch):
            tags = [words[rnd(len(words))] for _ in range(2 + rnd(5))]
            lines.append("%d,%d,%s" % (next_id, rnd(100000), ",".join(tags)))
            next_id += 1
        for line in lines:
            f = line.split(",")
            rid = int(f[0])
            tags = f[2:]
            rec = {
                "id": rid,
                "val": int(f[1]),
                "tags": tags,
                "title": " ".join(t.capitalize() for t in tags),
            }
            records[rid] = rec
            for t in tags:
                index.setdefault(t, []).append(rid)
        del lines

        # Query: the heaviest tags, sorted by weight then name.
        weight = {t: sum(records[i]["val"] for i in ids if i in records)
                  for t, ids in index.items()}
        top = sorted(weight.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
        checksum = (checksum * 31 + len("|".join(t for t, _ in top))) % 1000000007

        # Sort every record by two keys, as tuples (new objects each).
        order = sorted(((r["val"] % 997, r["title"], r["id"])
                        for r in records.values()), reverse=True)
        checksum = (checksum * 31 + order[0][2] + order[-1][2]) % 1000000007

        # Build a report string piece by piece, then throw it away.
        parts = []
        for _, title, rid in order:
            if rid % 5 == 0:
                parts.append("%d:%s;" % (rid, title.lower()))
        report = "".join(parts)
        checksum = (checksum * 31 + len(report)) % 1000000007
        del parts, report, order

        # Group titles by their first letter into lists of tuples.
        groups = {}
        for r in records.values():
            groups.setdefault(r["title"][:1], []).append((r["id"], len(r["tags"])))
        checksum = (checksum * 31 + sum(len(g) * len(k) for k, g in groups.items())) % 1000000007
        del groups, weight

        # Expire the oldest records and prune the index.
        cutoff = next_id - keep
        for rid in [i for i in records if i < cutoff]:
            del records[rid]
        for t in list(index):
            ids = [i for i in index[t] if i >= cutoff]
            if ids:
                index[t] = ids
            else:
                del index[t]

    print("RESULT python3 rounds=%d records=%d tags=%d checksum=%d"
          % (rounds, len(records), len(index), checksum))


main()
