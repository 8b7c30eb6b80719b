#!/usr/bin/env python3
"""torch.distributed's Gloo backend, measured as ringsync-bench measures ringsync.

One process per rank, started by bench/peers/gloo-launch.sh (or anything that sets
RANK, WORLD_SIZE, LOCAL_WORLD_SIZE and GLOO_BENCH_STORE: an empty directory every
rank sees, for the file:// rendezvous). Float sum allreduce only, the sizes of
ringsync-bench's -b -e -f; prints ringsync-bench's table and writes its CSV, so
bench/compare reads all systems with one parser.

torch's all_reduce works in place: the timed iterations run on their own results
(all zeros, so the values neither grow nor turn denormal), then the check runs once
more from fresh inputs, as nccl-tests checks its in-place rows.

Exit status: 0 right, 1 some element wrong, 2 bad arguments, 3 no torch or the
rendezvous failed, 4 a collective failed, 5 --csv could not be written.
"""

import argparse
import datetime
import os
import statistics
import sys
import time


def parse_size(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B") or "0"
    suffix = text[-1] if text[-1] in "KMG" else ""
    number = text[: -1] if suffix else text
    if not number.isdigit() or int(number) == 0:
        raise argparse.ArgumentTypeError(f"'{text}': want a size like 8, 64K, 16M")
    return int(number) * units[suffix]


def sizes_of(lo, hi, factor):
    sizes, b = [], lo
    while b <= hi:
        sizes.append(b)
        b *= factor
    return sizes


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-b", "--minbytes", type=parse_size, default=8)
    p.add_argument("-e", "--maxbytes", type=parse_size, default=256 << 20)
    p.add_argument("-f", "--stepfactor", type=int, default=2)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup_iters", type=int, default=5)
    # ringsync-bench's other flags, for one command line across harnesses: only what
    # this harness measures is accepted.
    p.add_argument("-t", "--collective", choices=["allreduce"], default="allreduce")
    p.add_argument("-d", "--datatype", choices=["float"], default="float")
    p.add_argument("-o", "--op", choices=["sum"], default="sum")
    p.add_argument("-c", "--check", type=int, choices=[1], default=1,
                   help="always 1: every result is checked")
    p.add_argument("--csv", help="also write the rows as CSV (rank 0 writes it)")
    p.add_argument("--iface", help="the interface Gloo binds (sets GLOO_SOCKET_IFNAME)")
    p.add_argument("--timeout", type=float, default=300, help="rendezvous/collective timeout, s")
    o = p.parse_args()
    if o.stepfactor < 2 or o.iters < 1 or o.warmup_iters < 0 or o.minbytes > o.maxbytes:
        print("torch-gloo-bench: want -f >= 2, -n >= 1, -w >= 0, -b <= -e", file=sys.stderr)
        return 2
    try:
        rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        store = os.environ["GLOO_BENCH_STORE"]
    except (KeyError, ValueError):
        print("torch-gloo-bench: RANK, WORLD_SIZE and GLOO_BENCH_STORE must be set", file=sys.stderr)
        return 2
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if o.iface:
        os.environ["GLOO_SOCKET_IFNAME"] = o.iface
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"torch-gloo-bench: no torch: {e}", file=sys.stderr)
        return 3
    try:
        dist.init_process_group("gloo", init_method=f"file://{store}/torch-rendezvous",
                                rank=rank, world_size=size,
                                timeout=datetime.timedelta(seconds=o.timeout))
    except Exception as e:  # torch raises RuntimeError and others
        print(f"torch-gloo-bench: rank {rank}: rendezvous failed: {e}", file=sys.stderr)
        return 3
    torch.set_num_threads(1)  # one rank per core, as the other harnesses

    # Rank 0 opens --csv before measuring; every rank learns whether it could.
    csv, setup = None, 0
    if rank == 0 and o.csv:
        try:
            csv = open(o.csv, "w")
        except OSError as e:
            print(f"torch-gloo-bench: --csv {o.csv}: {e}", file=sys.stderr)
            setup = 5
    code = torch.tensor([setup], dtype=torch.int32)
    dist.all_reduce(code, op=dist.ReduceOp.MAX)
    if code.item():
        return int(code.item())

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    nodes = size // local if local and size % local == 0 else 1
    if rank == 0:
        print(f"# torch-gloo-bench: allreduce, {size} ranks ({nodes} node(s) x {local} local), "
              f"torch {torch.__version__} gloo backend, in place")
        print(f"# minBytes {o.minbytes} maxBytes {o.maxbytes} step: {o.stepfactor}(factor) "
              f"warmup iters: {o.warmup_iters} iters: {o.iters} validation: 1")
        print(f"#\n# allreduce, {size} ranks")
        print("#%12s %13s %9s %6s %6s %10s %8s %8s %7s" %
              ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"))
        print("#%12s %13s %9s %6s %6s %10s %8s %8s %7s" %
              ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", ""))
        if csv:
            csv.write("collective,size_bytes,count,type,redop,root,time_us,median_us,algbw_gbps,"
                      "busbw_gbps,wrong,ranks,nodes,date\n")
        sys.stdout.flush()

    total_wrong, busbws = 0, []
    for requested in sizes_of(o.minbytes, o.maxbytes, o.stepfactor):
        count = max(1, requested // 4)
        nbytes = count * 4
        try:
            t = torch.zeros(count, dtype=torch.float32)
            for _ in range(o.warmup_iters):
                dist.all_reduce(t)
            dist.barrier()
            start = time.perf_counter()
            last, times = start, []
            for _ in range(o.iters):
                dist.all_reduce(t)
                now = time.perf_counter()
                times.append(now - last)
                last = now
            seconds = torch.tensor([(last - start) / o.iters], dtype=torch.float64)
            dist.all_reduce(seconds, op=dist.ReduceOp.MAX)  # the slowest rank's time
            median = torch.tensor([statistics.median(times)], dtype=torch.float64)
            dist.all_reduce(median, op=dist.ReduceOp.MAX)
            # The check: small integers, so any order of the sum gives the same bits.
            idx = torch.arange(count, dtype=torch.int64)
            t = ((idx + rank) % 16).to(torch.float32)
            dist.all_reduce(t)
            expected = torch.zeros(count, dtype=torch.float32)
            for r in range(size):
                expected += ((idx + r) % 16).to(torch.float32)
            wrong = torch.tensor([int((t != expected).sum().item())], dtype=torch.int64)
            dist.all_reduce(wrong)
        except Exception as e:
            print(f"torch-gloo-bench: rank {rank}: allreduce of {nbytes} B failed: {e}",
                  file=sys.stderr)
            return 4
        s = seconds.item()
        algbw = nbytes / s / 1e9 if s > 0 else 0.0
        busbw = algbw * 2 * (size - 1) / size
        total_wrong += int(wrong.item())
        busbws.append(busbw)
        if rank == 0:
            print(" %12d %13d %9s %6s %6d %10.1f %8.2f %8.2f %7d" %
                  (nbytes, count, "float", "sum", -1, s * 1e6, algbw, busbw, wrong.item()))
            sys.stdout.flush()
            if csv:
                csv.write(f"allreduce,{nbytes},{count},float,sum,-1,{s * 1e6:.3f},"
                          f"{median.item() * 1e6:.3f},{algbw:.6g},"
                          f"{busbw:.6g},{wrong.item()},{size},{nodes},{date}\n")
    code = 1 if total_wrong else 0
    if rank == 0:
        print(f"# Out of bounds values : {total_wrong} {'FAILED' if total_wrong else 'OK'}")
        print(f"# Avg bus bandwidth    : {sum(busbws) / max(1, len(busbws)):g}")
        if csv:
            try:
                csv.close()
            except OSError as e:
                print(f"torch-gloo-bench: --csv {o.csv}: {e}", file=sys.stderr)
                code = 5
    dist.barrier()  # rank 0's file is written before any rank exits
    dist.destroy_process_group()
    return code


if __name__ == "__main__":
    sys.exit(main())
