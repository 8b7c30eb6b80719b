#!/usr/bin/env python3
"""Several bench/compare runs as one table: the range of each system's median.

  compare_runs.py [--collective NAME] RUN_DIR [RUN_DIR ...]

Reads RUN_DIR/compare.csv of each run (bench/compare --out RUN_DIR) and prints
one markdown table, a row per size and, per regime, ringsync's median time,
the best peer's and ringsync / best peer, each as its range over the runs
that measured that size (the ratio is taken within each run, against the peer
that was fastest in that run). A ratio is bold when ringsync was slower in at
least one run. Times are microseconds up to 9999, milliseconds above.

Runs of one regime must share a topology (hosts x ranks); a run that does not
is refused, as is a directory with no compare.csv. Exit status 2 on either.
"""

import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_report import human  # noqa: E402  (sizes named as compare.md names them)

PEERS = [("openmpi", "Open MPI"), ("gloo", "Gloo"), ("torch", "torch gloo")]
REGIMES = ["shaped", "unshaped"]


class Refused(Exception):
    pass


def time_text(us):
    return f"{us / 1000:.1f} ms" if us >= 10000 else f"{us:.0f}"


def span(values, text):
    lo, hi = text(min(values)), text(max(values))
    if lo == hi:
        return lo
    if lo.endswith(" ms") and hi.endswith(" ms"):
        lo = lo[:-3]
    return f"{lo}–{hi}"


def number(text):
    return float(text) if text not in (None, "") else None


def read_run(directory, collective):
    """{(regime, size): (ringsync_us, best_peer_us, peer_key)} and {regime: (hosts, ranks)}."""
    path = os.path.join(directory, "compare.csv")
    if not os.path.isfile(path):
        raise Refused(f"{directory} has no compare.csv: give the --out directory of a bench/compare run")
    cells, topology = {}, {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("collective", "allreduce") != collective:
                continue
            regime = row["regime"]
            topology[regime] = (int(row["hosts"]), int(row["ranks_per_host"]))
            ours = number(row.get("ringsync_median_us"))
            peers = [(number(row.get(f"{k}_median_us")), k) for k, _ in PEERS]
            peers = [p for p in peers if p[0] is not None]
            if ours is None or not peers:
                continue
            best_us, best_key = min(peers)
            cells[(regime, int(row["size_bytes"]))] = (ours, best_us, best_key)
    return cells, topology


def table(runs, collective="allreduce"):
    """The markdown lines for the runs' directories."""
    measured, topology = [], {}
    for directory in runs:
        cells, topo = read_run(directory, collective)
        for regime, shape in topo.items():
            seen = topology.setdefault(regime, (shape, directory))
            if seen[0] != shape:
                raise Refused(f"{directory}: its {regime} runs are {shape[0]} hosts x {shape[1]} ranks, "
                              f"{seen[1]}'s {seen[0][0]} x {seen[0][1]}: compare one topology at a time")
        measured.append(cells)
    regimes = [r for r in REGIMES if any(key[0] == r for cells in measured for key in cells)]
    if not regimes:
        raise Refused(f"no {collective} rows with ringsync and a peer in {', '.join(runs)}")
    names = dict(PEERS)
    peer_of = {r: {cell[2] for c in measured for (regime, _), cell in c.items() if regime == r} for r in regimes}
    head, rule = ["size"], ["---:"]
    for r in regimes:
        peer = names[next(iter(peer_of[r]))] if len(peer_of[r]) == 1 else "best peer"
        head += [f"{r}: ringsync", peer, "ratio"]
        rule += ["---:"] * 3
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(rule) + "|"]
    sizes = sorted({key[1] for cells in measured for key in cells})
    for size in sizes:
        row = [human(size)]
        for r in regimes:
            got = [c[(r, size)] for c in measured if (r, size) in c]
            if not got:
                row += ["—"] * 3
                continue
            ratios = [ours / best for ours, best, _ in got]
            ratio = span(ratios, lambda v: f"{v:.2f}")
            row += [span([g[0] for g in got], time_text), span([g[1] for g in got], time_text),
                    f"**{ratio}**" if max(ratios) > 1.0 else ratio]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def main(argv):
    args = list(argv)
    collective = "allreduce"
    if args[:1] == ["--collective"]:
        if len(args) < 2:
            print("compare_runs: --collective needs a name", file=sys.stderr)
            return 2
        collective, args = args[1], args[2:]
    if not args or any(a.startswith("-") for a in args):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        print("\n".join(table(args, collective)))
    except Refused as why:
        print(f"compare_runs: {why}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
