#!/usr/bin/env python3
"""Tables and plot of a bench/compare run.

  compare_report.py OUT_DIR

Reads what bench/compare left under OUT_DIR/raw (meta.txt; per regime a directory
with limit.txt, status.tsv and one CSV per system in ringsync-bench's --csv format;
raw/scaling/h<H>/ the same for the scaling mode) and writes OUT_DIR/compare.md,
OUT_DIR/compare.csv, OUT_DIR/busbw.png (matplotlib, else gnuplot, else a note) and,
for --scaling, OUT_DIR/scaling.csv. Prints compare.md.

One section per collective in the CSVs (allreduce first). The limits (S bytes as
nccl-tests sizes them, B the measured TCP rate of one host's link in bytes/s, H
hosts, N = H x R ranks), as t >= F * S/B:
  allreduce: a flat ring over all N ranks (Open MPI, Gloo, torch) F = 2(N-1)/N, so
    busbw (nccl-tests: algbw * 2(N-1)/N) <= B; ringsync, hierarchical (a host's ranks
    reduce through its daemon's shared memory, the ring runs over the H hosts)
    F = 2(H-1)/H, so busbw <= B * ((N-1)/N) / ((H-1)/H);
  reduce_scatter, allgather: the same with F = (N-1)/N and (H-1)/H (one phase);
  broadcast: F = 1 for both;
  alltoall: nothing combines on the way, so every system's F is what a host's link
    must carry, R(H-1)/H (R ranks each sending (H-1)/H of S off the host).
"""

import csv
import os
import shutil
import subprocess
import sys

SYSTEMS = [("ringsync", "ringsync"), ("openmpi", "Open MPI"), ("gloo", "Gloo"),
           ("torch", "torch gloo")]
REGIMES = ["shaped", "unshaped"]
COLLECTIVES = ["allreduce", "reduce_scatter", "alltoall", "allgather", "broadcast"]


def bus_text(collective):
    """busbw / algbw for N ranks (nccl-tests), as text."""
    return {"allreduce": "2(N-1)/N", "broadcast": "1"}.get(collective, "(N-1)/N")


def bus_factor(collective, n):
    if collective == "allreduce":
        return 2 * (n - 1) / n
    if collective == "broadcast":
        return 1.0
    return (n - 1) / n


def phase_factor(collective, members, hosts, ranks):
    """F of t >= F x S/B for a collective over `members` ring members."""
    if collective == "alltoall":
        return ranks * (hosts - 1) / hosts
    if collective == "broadcast":
        return 1.0
    f = (members - 1) / members
    return 2 * f if collective == "allreduce" else f


def factor_text(collective, who):
    """F as text; who is "N" (a flat ring) or "H" (ringsync's ring of hosts)."""
    if collective == "alltoall":
        return "R(H-1)/H"
    if collective == "broadcast":
        return "1"
    return ("2" if collective == "allreduce" else "") + f"({who}-1)/{who}"


def read_kv(path):
    kv = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if "=" in line:
                    k, v = line.rstrip("\n").split("=", 1)
                    kv[k] = v
    return kv


def read_status(path):
    status = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t", 2)
                if len(parts) == 3:
                    status[parts[0]] = (parts[1], parts[2])
    return status


def read_rows(path):
    """{collective: {size_bytes: (time_us, busbw_gbps, wrong, median_us)}} of one CSV;
    median_us is None in a CSV without that column."""
    rows = {}
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for r in csv.DictReader(f):
            median = r.get("median_us") or None
            by_size = rows.setdefault(r.get("collective") or "allreduce", {})
            by_size[int(r["size_bytes"])] = (float(r["time_us"]), float(r["busbw_gbps"]),
                                             r.get("wrong", ""),
                                             None if median is None else float(median))
    return rows

def human(size):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def fmt(value, digits=3):
    if value is None:
        return "—"
    if value >= 100:
        return f"{value:.0f}"
    return f"{value:.{digits}g}"


class Regime:
    """One topology and one shaping: the measured limit and every system's rows."""

    def __init__(self, name, directory, hosts, ranks):
        self.name, self.hosts, self.ranks = name, hosts, ranks
        limit = read_kv(os.path.join(directory, "limit.txt"))
        self.bps = float(limit["bps"]) if limit.get("bps") else None
        self.tool = limit.get("tool", "?")
        self.shaping = limit.get("shaping", "")
        self.status = read_status(os.path.join(directory, "status.tsv"))
        self.by_collective = {key: read_rows(os.path.join(directory, key + ".csv"))
                              for key, _ in SYSTEMS}
        found = {c for rows in self.by_collective.values() for c in rows}
        self.collectives = [c for c in COLLECTIVES if c in found]
        self.select(self.collectives[0] if self.collectives else "allreduce")

    def select(self, collective):
        """Points rows, sizes, bounds and limits at one collective's rows."""
        self.collective = collective
        self.rows = {key: rows.get(collective, {}) for key, rows in self.by_collective.items()}
        self.sizes = sorted({s for rows in self.rows.values() for s in rows})

    @property
    def n(self):
        return self.hosts * self.ranks

    @property
    def link_gbytes(self):  # B in GB/s, nccl-tests' unit
        return self.bps / 8e9 if self.bps else None

    def factor(self, members):
        return phase_factor(self.collective, members, self.hosts, self.ranks)

    def bound_us(self, size, members):
        """F x S/B in microseconds (allreduce: F = 2(M-1)/M, a ring of M members)."""
        if not self.bps or members < 2:
            return None
        return self.factor(members) * size / (self.bps / 8) * 1e6

    def limit_busbw(self, members):
        """The busbw (over all N ranks) of a run that takes exactly bound_us(members)."""
        if not self.bps or members < 2:
            return None
        return self.link_gbytes * bus_factor(self.collective, self.n) / self.factor(members)

    def one_limit(self):
        """Whether every system has the same bound (alltoall, broadcast)."""
        return self.collective in ("alltoall", "broadcast")

    def bound_members(self, key):
        return self.hosts if key == "ringsync" else self.n

    def present(self):
        return [(k, label) for k, label in SYSTEMS if self.rows[k]]

    def median_us(self, key, size):
        return self.rows[key].get(size, (None,) * 4)[3]

    def versus_best_peer(self, size):
        """(ringsync's median time / the fastest other system's, that system's label)
        at `size`, or None when ringsync or every peer lacks the size."""
        mine = self.median_us("ringsync", size)
        peers = [(self.median_us(k, size), label) for k, label in self.present()
                 if k != "ringsync" and self.median_us(k, size)]
        if not mine or not peers:
            return None
        best, label = min(peers)
        return mine / best, label


def status_lines(regime):
    lines = []
    for key, label in SYSTEMS:
        state, detail = regime.status.get(key, ("not run", ""))
        every = [r for rows in regime.by_collective[key].values() for r in rows.values()]
        if state == "ok" and not every:
            state, detail = "failed", "no rows in its CSV"
        wrong = sum(int(r[2]) for r in every if r[2].strip().isdigit())
        if state == "ok" and wrong:
            state, detail = "WRONG RESULTS", f"{wrong} elements differ"
        lines.append(f"- {label}: {state}" + (f" ({detail})" if detail else ""))
    return lines


def regime_markdown(regime):
    b = regime.link_gbytes
    out = [f"## {regime.name}: {regime.hosts} hosts x {regime.ranks} ranks (N = {regime.n})", ""]
    out.append(f"Link: {regime.shaping or 'veth, no shaping'}. Measured TCP rate between two "
               "hosts (one stream, " + regime.tool + "): " +
               (f"B = {regime.bps / 1e9:.3f} Gbit/s = {b:.4f} GB/s." if b else "not measured."))
    if "tbf" in regime.shaping:
        out.append("A token bucket starts full: sizes whose traffic is near its burst can beat "
                   "the bound, as a real switch's buffer would not let them.")
    elif b:
        out.append("Unshaped, the veth is a memory copy: B and every system are bound by this "
                   "machine's CPUs, which all ranks, daemons and the kernel share.")
    out.append("")
    out += status_lines(regime)
    out.append("")
    if not regime.collectives:
        out.append("No system produced rows.")
        return out
    for c in regime.collectives:
        regime.select(c)
        out += collective_markdown(regime)
    regime.select(regime.collectives[0])
    return out


def collective_markdown(regime):
    """The tables of the collective regime.select() chose."""
    c = regime.collective
    present = regime.present()
    labels = [label for _, label in present]
    out = [f"### {c}", ""]
    if c != "allreduce":
        skipped = [label for key, label in SYSTEMS
                   if regime.status.get(key, ("",))[0] == "ok" and not regime.rows[key]]
        if skipped:
            out += [", ".join(skipped) + f": no {c} rows (not measured by that harness).", ""]
    out.append(f"busbw (GB/s; nccl-tests: algbw x {bus_text(c)}) and the limits it can reach:")
    out.append("")
    if regime.one_limit():
        out.append("| size | " + " | ".join(labels) + " | limit (host link) |")
        out.append("|---:|" + "---:|" * (len(labels) + 1))
    else:
        out.append("| size | " + " | ".join(labels) +
                   " | limit flat ring | limit ringsync |")
        out.append("|---:|" + "---:|" * (len(labels) + 2))
    for s in regime.sizes:
        cells = [fmt(regime.rows[k].get(s, (None, None))[1]) for k, _ in present]
        limits = f" | {fmt(regime.limit_busbw(regime.n))}"
        if not regime.one_limit():
            limits += f" | {fmt(regime.limit_busbw(regime.hosts))}"
        out.append(f"| {human(s)} | " + " | ".join(cells) + limits + " |")
    out.append("")
    flat, ring = factor_text(c, "N"), factor_text(c, "H")
    if regime.one_limit():
        out.append(f"time per {c} (us) next to its bound (every system: {flat} x S/B):")
    else:
        out.append(f"time per {c} (us) next to its bound (flat ring: {flat} x S/B; ringsync: "
                   f"{ring} x S/B):")
    out.append("")
    head = ["size"]
    for key, label in present:
        head.append(label)
        if key == "ringsync" and not regime.one_limit():
            head.append(f"bound {ring}")
    head.append(f"bound {flat}")
    out.append("| " + " | ".join(head) + " |")
    out.append("|---:|" + "---:|" * (len(head) - 1))
    for s in regime.sizes:
        cells = [human(s)]
        for key, _ in present:
            cells.append(fmt(regime.rows[key].get(s, (None,))[0], 4))
            if key == "ringsync" and not regime.one_limit():
                cells.append(fmt(regime.bound_us(s, regime.hosts), 4))
        cells.append(fmt(regime.bound_us(s, regime.n), 4))
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out.append(f"median time per {c} (us; each rank's median iteration, the slowest rank's), "
               "and ringsync's time over the fastest peer's at that size (below 1: ringsync is faster):")
    out.append("")
    compared = "ringsync" in dict(present) and len(present) > 1
    out.append("| size | " + " | ".join(labels) + (" | ringsync / best peer |" if compared else " |"))
    out.append("|---:|" + "---:|" * (len(labels) + (1 if compared else 0)))
    slower = []
    for s in regime.sizes:
        cells = [fmt(regime.median_us(k, s), 4) for k, _ in present]
        if compared:
            versus = regime.versus_best_peer(s)
            cells.append(f"{versus[0]:.2f} ({versus[1]})" if versus else "")
            if versus and versus[0] > 1:
                slower.append(f"{human(s)} ({versus[0]:.2f}x {versus[1]})")
        out.append(f"| {human(s)} | " + " | ".join(cells) + " |")
    out.append("")
    if compared:
        measured = sum(1 for s in regime.sizes if regime.versus_best_peer(s))
        out.append(f"ringsync no slower than the best peer at {measured - len(slower)} of {measured} sizes" +
                   (f"; slower at {', '.join(slower)}." if slower else "."))
        out.append("")
    return out

def cell(v):
    return "" if v is None else f"{v:.6g}"


def csv_rows(r):
    """compare.csv's rows of the collective r.select() chose."""
    for s in r.sizes:
        row = [r.name, r.collective, r.hosts, r.ranks, s]
        row += [cell(r.rows[k].get(s, (None, None))[1]) for k, _ in SYSTEMS]
        row += [cell(r.limit_busbw(r.n)), cell(r.limit_busbw(r.hosts)),
                cell(r.bps / 1e9 if r.bps else None)]
        row += [cell(r.rows[k].get(s, (None,))[0]) for k, _ in SYSTEMS]
        row += [cell(r.bound_us(s, r.n)), cell(r.bound_us(s, r.hosts))]
        row += [cell(r.rows[k].get(s, (None,) * 4)[3]) for k, _ in SYSTEMS]
        yield row


def write_csv(path, regimes):
    head = ["regime", "collective", "hosts", "ranks_per_host", "size_bytes"]
    head += [f"{k}_busbw_gbps" for k, _ in SYSTEMS]
    head += ["limit_flat_ring_busbw_gbps", "limit_ringsync_busbw_gbps", "link_gbit_s"]
    head += [f"{k}_time_us" for k, _ in SYSTEMS]
    head += ["bound_flat_ring_time_us", "bound_ringsync_time_us"]
    head += [f"{k}_median_us" for k, _ in SYSTEMS]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(head)
        for r in regimes:
            for c in r.collectives:
                r.select(c)
                w.writerows(csv_rows(r))
            if r.collectives:
                r.select(r.collectives[0])


def panels(regimes):
    """(row, column, regime) per plotted panel, a collective per row and a regime per
    column, with regime.select() pointing at the row's collective."""
    collectives = [c for c in COLLECTIVES if any(c in r.collectives for r in regimes)]
    for row, c in enumerate(collectives):
        for column, r in enumerate(regimes):
            r.select(c)
            if r.present():
                yield row, column, r
    for r in regimes:
        r.select(r.collectives[0])


def limit_lines(r):
    """(busbw, style, label) of the limits drawn in a panel."""
    if not r.bps:
        return []
    if r.one_limit():
        return [(r.limit_busbw(r.n), "dashed", f"limit host link (B = {r.bps / 1e9:.2f} Gbit/s)")]
    return [(r.limit_busbw(r.n), "dashed", f"limit flat ring (B = {r.bps / 1e9:.2f} Gbit/s)"),
            (r.limit_busbw(r.hosts), "dotted",
             f"limit ringsync, {factor_text(r.collective, 'H')}")]


def plot_matplotlib(path, regimes):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = len([c for c in COLLECTIVES if any(c in r.collectives for r in regimes)])
    fig, axes = plt.subplots(rows, len(regimes), figsize=(6.5 * len(regimes), 4.8 * rows),
                             squeeze=False)
    for row, column, r in panels(regimes):
        ax = axes[row][column]
        for key, label in r.present():
            sizes = sorted(r.rows[key])
            ax.plot(sizes, [r.rows[key][s][1] for s in sizes], marker="o", label=label)
        for value, style, label in limit_lines(r):
            ax.axhline(value, linestyle=style, color="black" if style == "dashed" else "gray",
                       label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(f"{r.collective}, {r.name}: {r.hosts} hosts x {r.ranks} ranks")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_gnuplot(path, regimes, workdir):
    rows = len([c for c in COLLECTIVES if any(c in r.collectives for r in regimes)])
    commands = [f"set terminal png size {640 * len(regimes)},{480 * rows}",
                f"set output '{path}'", f"set multiplot layout {rows},{len(regimes)}",
                "set logscale xy 2", "set key left top", "set xlabel 'size (bytes)'",
                "set ylabel 'busbw (GB/s)'", "set grid"]
    for _, _, r in panels(regimes):
        plots = []
        for key, label in r.present():
            data = os.path.join(workdir, f"plot-{r.name}-{r.collective}-{key}.dat")
            with open(data, "w") as f:
                for s in sorted(r.rows[key]):
                    f.write(f"{s} {r.rows[key][s][1]}\n")
            plots.append(f"'{data}' using 1:2 with linespoints title '{label}'")
        for value, style, label in limit_lines(r):
            dash, colour = (2, "black") if style == "dashed" else (3, "gray")
            plots.append(f"{value} with lines dashtype {dash} lc '{colour}' "
                         f"title '{label.split(' (')[0]}'")
        commands.append(f"set title '{r.collective}, {r.name}'")
        commands.append("plot " + ", ".join(plots))
    commands.append("unset multiplot")
    script = os.path.join(workdir, "busbw.gp")
    with open(script, "w") as f:
        f.write("\n".join(commands) + "\n")
    subprocess.run(["gnuplot", script], check=True, timeout=60)


def plot(out_dir, regimes):
    """A note on where the plot is, or why there is none."""
    regimes = [r for r in regimes if r.collectives]
    if not regimes:
        return "No plot: no rows."
    path = os.path.join(out_dir, "busbw.png")
    try:
        plot_matplotlib(path, regimes)
        return "Plot: busbw.png (matplotlib)."
    except ImportError:
        pass
    if shutil.which("gnuplot"):
        try:
            plot_gnuplot(path, regimes, os.path.join(out_dir, "raw"))
            return "Plot: busbw.png (gnuplot)."
        except (subprocess.SubprocessError, OSError) as e:
            return f"No plot: gnuplot failed: {e}"
    return ("No plot: neither python3-matplotlib nor gnuplot is installed "
            "(apt-get install python3-matplotlib).")


def scaling_section(out_dir, meta):
    base = os.path.join(out_dir, "raw", "scaling")
    if not os.path.isdir(base):
        return []
    size = int(meta.get("scaling_size", "0"))
    runs = []
    for name in os.listdir(base):
        if name.startswith("h") and name[1:].isdigit():
            runs.append(Regime(f"scaling-{name}", os.path.join(base, name), int(name[1:]), 1))
    runs.sort(key=lambda r: r.hosts)
    present = [(k, label) for k, label in SYSTEMS if any(r.rows[k] for r in runs)]
    out = ["## Scaling: hosts x 1 rank, shaped, allreduce of " + human(size), ""]
    out.append("With one rank per host N = H, and every system's bound is the ring law "
               "t = 2(N-1)/N x S/B (B measured on each topology). Cells: measured time (ms) "
               "and measured / bound.")
    out.append("")
    head = ["hosts", "B (Gbit/s)", "bound (ms)"] + [label for _, label in present]
    out.append("| " + " | ".join(head) + " |")
    out.append("|---:|" + "---:|" * (len(head) - 1))
    rows_csv = []
    for r in runs:
        bound = r.bound_us(size, r.n)
        cells = [str(r.hosts), fmt(r.bps / 1e9 if r.bps else None), fmt(bound / 1e3 if bound else None)]
        for key, _ in present:
            got = r.rows[key].get(size)
            if got is None:
                state = r.status.get(key, ("not run", ""))[0]
                cells.append("—" if state == "ok" else state)
            else:
                ratio = f" ({got[0] / bound:.2f}x)" if bound else ""
                cells.append(f"{got[0] / 1e3:.1f}{ratio}")
            rows_csv.append([r.hosts, size, key, "" if got is None else f"{got[0]:.3f}",
                             "" if bound is None else f"{bound:.3f}",
                             "" if r.bps is None else f"{r.bps / 1e9:.6g}"])
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    for r in runs:
        notes = [line for line in status_lines(r) if ": ok" not in line]
        if notes:
            out.append(f"{r.hosts} hosts: " + "; ".join(n[2:] for n in notes))
    out.append("")
    with open(os.path.join(out_dir, "scaling.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["hosts", "size_bytes", "system", "time_us", "bound_time_us", "link_gbit_s"])
        w.writerows(rows_csv)
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    meta = read_kv(os.path.join(out_dir, "raw", "meta.txt"))
    collectives = meta.get("collectives", "allreduce").replace(",", ", ")
    md = [f"# bench/compare: {collectives}, ringsync beside Open MPI, Gloo and torch", ""]
    md.append(f"Date {meta.get('date', '?')}; machine: {meta.get('machine', '?')} "
              f"({meta.get('placement', 'every process on any CPU')}); "
              f"sizes {meta.get('sizes', '?')}, {meta.get('iters', '?')} timed iterations after "
              f"{meta.get('warmup', '?')} warm-up; float sum, every element checked.")
    md.append("")
    md.append("Limits (S bytes, B the measured TCP rate of a host's link, H hosts, N ranks): a flat "
              "ring over all N ranks (Open MPI, Gloo, torch) needs t >= 2(N-1)/N x S/B, so busbw "
              "<= B; ringsync reduces a host's ranks in its daemon and rings over the H hosts, so "
              "t >= 2(H-1)/H x S/B (also the least any allreduce needs when each host has one "
              "link of rate B), i.e. busbw <= B x ((N-1)/N) / ((H-1)/H).")
    if collectives != "allreduce":
        md.append("")
        md.append("The other collectives (S as nccl-tests sizes them): reduce_scatter and allgather "
                  "run one ring phase, t >= (N-1)/N x S/B flat and (H-1)/H x S/B for ringsync; "
                  "alltoall combines nothing on the way, so every system's host link carries "
                  "R(H-1)/H x S, t >= R(H-1)/H x S/B (R ranks per host).")
    md.append("")
    regimes = []
    for name in REGIMES:
        d = os.path.join(out_dir, "raw", name)
        if os.path.isdir(d):
            regimes.append(Regime(name, d, int(meta.get("hosts", "2")), int(meta.get("ranks", "2"))))
    for r in regimes:
        md += regime_markdown(r)
    if regimes:
        write_csv(os.path.join(out_dir, "compare.csv"), regimes)
        md.append(plot(out_dir, regimes) + " Data: compare.csv.")
        md.append("")
    md += scaling_section(out_dir, meta)
    text = "\n".join(md).rstrip() + "\n"
    with open(os.path.join(out_dir, "compare.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
