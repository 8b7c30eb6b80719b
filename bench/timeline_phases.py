#!/usr/bin/env python3
"""Where a collective's time goes, from the daemons' timelines.

  timeline_phases.py NODE0.json [NODE1.json ...] [--skip N]

Reads each daemon's --timeline file (Chrome trace events: service/observe/timeline.h)
and prints, per node and phase, how many events there were
and the 10th, 50th and 90th percentile of their durations in microseconds, in
the order the phases first appear; then the median period between the starts of
consecutive events of the most frequent phase (one per collective: the time per
collective as the daemon sees it). --skip N drops each node's first N events of
every phase (warm-up). A file cut short (a daemon still running or killed) is
read up to its last whole event.
"""

import json
import sys


def load(path):
    text = open(path).read().rstrip().rstrip(",")
    if not text.endswith("]"):
        text += "]"
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        # Cut mid-event: keep whole lines only.
        lines = [l.rstrip(",") for l in text.splitlines() if l.strip().startswith("{") and l.rstrip(",").endswith("}")]
        return [json.loads(l) for l in lines]


def percentile(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def summarize(path, skip):
    events = [e for e in load(path) if e.get("ph") == "X"]
    phases, order = {}, []
    for e in events:
        name = e["name"]
        if name not in phases:
            phases[name] = []
            order.append(name)
        phases[name].append(e)
    out = [f"{path}:", f"  {'phase':<24} {'count':>7} {'p10':>9} {'p50':>9} {'p90':>9}  (us)"]
    for name in order:
        kept = phases[name][skip:]
        durs = [e.get("dur", 0.0) for e in kept]
        out.append(f"  {name:<24} {len(durs):>7} {percentile(durs, 0.1):>9.1f} "
                   f"{percentile(durs, 0.5):>9.1f} {percentile(durs, 0.9):>9.1f}")
    if order:
        busiest = max(order, key=lambda n: len(phases[n]))
        starts = sorted(e["ts"] for e in phases[busiest][skip:])
        gaps = [b - a for a, b in zip(starts, starts[1:])]
        if gaps:
            out.append(f"  period between {busiest} starts: median {percentile(gaps, 0.5):.1f} us "
                       f"(p10 {percentile(gaps, 0.1):.1f}, p90 {percentile(gaps, 0.9):.1f})")
    return out


def main(argv):
    skip = 0
    paths = []
    i = 0
    while i < len(argv):
        if argv[i] == "--skip":
            skip = int(argv[i + 1])
            i += 2
            continue
        paths.append(argv[i])
        i += 1
    if not paths:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    for path in paths:
        print("\n".join(summarize(path, skip)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
