#!/usr/bin/env python3
"""Tables and plot of a bench/compare run.

  compare_report.py OUT_DIR

Reads what bench/compare left under OUT_DIR/raw (meta.txt; per regime a directory
with limit.txt, status.tsv and one CSV per system in ringsync-bench's --csv format;
raw/scaling/h<H>/ the same for the scaling mode) and writes OUT_DIR/compare.md,
OUT_DIR/compare.csv, OUT_DIR/busbw.png (matplotlib, else gnuplot, else a note) and,
for --scaling, OUT_DIR/scaling.csv. Prints compare.md.

The limits (S bytes, B the measured TCP rate of one host's link in bytes/s, H hosts,
N = H x R ranks):
  flat ring, every rank a ring member (Open MPI, Gloo, torch): t >= 2(N-1)/N * S/B,
    so busbw (nccl-tests: algbw * 2(N-1)/N) <= B;
  ringsync, hierarchical (a host's ranks reduce through its daemon's shared memory,
    the ring runs over the H hosts): t >= 2(H-1)/H * S/B, so
    busbw <= B * ((N-1)/N) / ((H-1)/H).
"""

import csv
import os
import shutil
import subprocess
import sys

SYSTEMS = [("ringsync", "ringsync"), ("openmpi", "Open MPI"), ("gloo", "Gloo"),
           ("torch", "torch gloo")]
REGIMES = ["shaped", "unshaped"]


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
    """{size_bytes: (time_us, busbw_gbps, wrong, median_us)} of the allreduce rows of one
    CSV; median_us is None in a CSV without that column."""
    rows = {}
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for r in csv.DictReader(f):
            if r.get("collective") != "allreduce":
                continue
            median = r.get("median_us") or None
            rows[int(r["size_bytes"])] = (float(r["time_us"]), float(r["busbw_gbps"]),
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
        self.rows = {key: read_rows(os.path.join(directory, key + ".csv")) for key, _ in SYSTEMS}
        self.sizes = sorted({s for rows in self.rows.values() for s in rows})

    @property
    def n(self):
        return self.hosts * self.ranks

    @property
    def link_gbytes(self):  # B in GB/s, nccl-tests' unit
        return self.bps / 8e9 if self.bps else None

    def bound_us(self, size, members):
        """2(M-1)/M * S/B in microseconds, for a ring of M members across the link."""
        if not self.bps or members < 2:
            return None
        return 2 * (members - 1) / members * size / (self.bps / 8) * 1e6

    def limit_busbw(self, members):
        """The busbw (over all N ranks) of a run that takes exactly bound_us(members)."""
        if not self.bps or members < 2:
            return None
        return self.link_gbytes * ((self.n - 1) / self.n) / ((members - 1) / members)

    def bound_members(self, key):
        return self.hosts if key == "ringsync" else self.n

    def present(self):
        return [(k, label) for k, label in SYSTEMS if self.rows[k]]


def status_lines(regime):
    lines = []
    for key, label in SYSTEMS:
        state, detail = regime.status.get(key, ("not run", ""))
        if state == "ok" and not regime.rows[key]:
            state, detail = "failed", "no rows in its CSV"
        wrong = sum(int(r[2]) for r in regime.rows[key].values() if r[2].strip().isdigit())
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
    present = regime.present()
    if not present:
        out.append("No system produced rows.")
        return out
    labels = [label for _, label in present]
    out.append("busbw (GB/s; nccl-tests: algbw x 2(N-1)/N) and the limits it can reach:")
    out.append("")
    out.append("| size | " + " | ".join(labels) + " | limit flat ring (= B) | limit ringsync |")
    out.append("|---:|" + "---:|" * (len(labels) + 2))
    for s in regime.sizes:
        cells = [fmt(regime.rows[k].get(s, (None, None))[1]) for k, _ in present]
        out.append(f"| {human(s)} | " + " | ".join(cells) + f" | {fmt(regime.limit_busbw(regime.n))}"
                   f" | {fmt(regime.limit_busbw(regime.hosts))} |")
    out.append("")
    out.append("time per allreduce (us) next to its bound (flat ring: 2(N-1)/N x S/B; ringsync: "
               "2(H-1)/H x S/B):")
    out.append("")
    head = ["size"]
    for key, label in present:
        head.append(label)
        if key == "ringsync":
            head.append("bound 2(H-1)/H")
    head.append("bound 2(N-1)/N")
    out.append("| " + " | ".join(head) + " |")
    out.append("|---:|" + "---:|" * (len(head) - 1))
    for s in regime.sizes:
        cells = [human(s)]
        for key, _ in present:
            cells.append(fmt(regime.rows[key].get(s, (None,))[0], 4))
            if key == "ringsync":
                cells.append(fmt(regime.bound_us(s, regime.hosts), 4))
        cells.append(fmt(regime.bound_us(s, regime.n), 4))
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out.append("median time per allreduce (us; each rank's median iteration, the slowest rank's):")
    out.append("")
    out.append("| size | " + " | ".join(labels) + " |")
    out.append("|---:|" + "---:|" * len(labels))
    for s in regime.sizes:
        cells = [fmt(regime.rows[k].get(s, (None,) * 4)[3], 4) for k, _ in present]
        out.append(f"| {human(s)} | " + " | ".join(cells) + " |")
    out.append("")
    return out


def write_csv(path, regimes):
    head = ["regime", "hosts", "ranks_per_host", "size_bytes"]
    head += [f"{k}_busbw_gbps" for k, _ in SYSTEMS]
    head += ["limit_flat_ring_busbw_gbps", "limit_ringsync_busbw_gbps", "link_gbit_s"]
    head += [f"{k}_time_us" for k, _ in SYSTEMS]
    head += ["bound_flat_ring_time_us", "bound_ringsync_time_us"]
    head += [f"{k}_median_us" for k, _ in SYSTEMS]

    def cell(v):
        return "" if v is None else f"{v:.6g}"

    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(head)
        for r in regimes:
            for s in r.sizes:
                row = [r.name, r.hosts, r.ranks, s]
                row += [cell(r.rows[k].get(s, (None, None))[1]) for k, _ in SYSTEMS]
                row += [cell(r.limit_busbw(r.n)), cell(r.limit_busbw(r.hosts)),
                        cell(r.bps / 1e9 if r.bps else None)]
                row += [cell(r.rows[k].get(s, (None,))[0]) for k, _ in SYSTEMS]
                row += [cell(r.bound_us(s, r.n)), cell(r.bound_us(s, r.hosts))]
                row += [cell(r.rows[k].get(s, (None,) * 4)[3]) for k, _ in SYSTEMS]
                w.writerow(row)


def plot_matplotlib(path, regimes):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(regimes), figsize=(6.5 * len(regimes), 4.8), squeeze=False)
    for ax, r in zip(axes[0], regimes):
        for key, label in r.present():
            sizes = sorted(r.rows[key])
            ax.plot(sizes, [r.rows[key][s][1] for s in sizes], marker="o", label=label)
        if r.bps:
            ax.axhline(r.limit_busbw(r.n), linestyle="--", color="black",
                       label=f"limit flat ring (B = {r.bps / 1e9:.2f} Gbit/s)")
            ax.axhline(r.limit_busbw(r.hosts), linestyle=":", color="gray",
                       label="limit ringsync, 2(H-1)/H")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(f"allreduce, {r.name}: {r.hosts} hosts x {r.ranks} ranks")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_gnuplot(path, regimes, workdir):
    commands = ["set terminal png size %d,480" % (640 * len(regimes)), f"set output '{path}'",
                f"set multiplot layout 1,{len(regimes)}", "set logscale xy 2", "set key left top",
                "set xlabel 'size (bytes)'", "set ylabel 'busbw (GB/s)'", "set grid"]
    for r in regimes:
        plots = []
        for key, label in r.present():
            data = os.path.join(workdir, f"plot-{r.name}-{key}.dat")
            with open(data, "w") as f:
                for s in sorted(r.rows[key]):
                    f.write(f"{s} {r.rows[key][s][1]}\n")
            plots.append(f"'{data}' using 1:2 with linespoints title '{label}'")
        if r.bps:
            plots.append(f"{r.limit_busbw(r.n)} with lines dashtype 2 lc 'black' "
                         "title 'limit flat ring (B)'")
            plots.append(f"{r.limit_busbw(r.hosts)} with lines dashtype 3 lc 'gray' "
                         "title 'limit ringsync'")
        commands.append(f"set title 'allreduce, {r.name}'")
        commands.append("plot " + ", ".join(plots))
    commands.append("unset multiplot")
    script = os.path.join(workdir, "busbw.gp")
    with open(script, "w") as f:
        f.write("\n".join(commands) + "\n")
    subprocess.run(["gnuplot", script], check=True, timeout=60)


def plot(out_dir, regimes):
    """A note on where the plot is, or why there is none."""
    regimes = [r for r in regimes if r.present()]
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
    md = ["# bench/compare: allreduce, ringsync beside Open MPI, Gloo and torch", ""]
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
