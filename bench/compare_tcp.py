#!/usr/bin/env python3
"""Raw TCP throughput for bench/compare, where iperf3 is missing; and iperf3's JSON.

  compare_tcp.py server --bind ADDR --port P [--timeout S]
      accepts one connection, reads until the sender closes, prints the received
      rate in bits/s (first byte to last, as the receiver saw it).
  compare_tcp.py client --connect ADDR --port P [--seconds S] [--timeout S]
      sends for S seconds in 1 MiB writes over one stream, then closes.
  compare_tcp.py iperf FILE
      prints the received rate in bits/s of an `iperf3 -J` report (with
      --bidir, the slower of the two directions).

One stream, as iperf3's default: the rate a single TCP connection gets on the path,
which is what each hop of a ring uses.
"""

import argparse
import json
import socket
import sys
import time

CHUNK = 1 << 20


def server(o):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((o.bind, o.port))
        listener.listen(1)
        listener.settimeout(o.timeout)
        conn, _ = listener.accept()
    with conn:
        conn.settimeout(o.timeout)
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        received, first, last = 0, None, None
        while True:
            n = conn.recv_into(view)
            if n == 0:
                break
            last = time.perf_counter()
            if first is None:
                first = last
            received += n
    if first is None or last <= first:
        print("compare_tcp: nothing received", file=sys.stderr)
        return 1
    print(f"{received * 8 / (last - first):.0f}")
    return 0


def client(o):
    deadline = time.monotonic() + o.timeout
    while True:  # the server may not listen yet
        try:
            conn = socket.create_connection((o.connect, o.port), timeout=o.timeout)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    payload = memoryview(bytes(CHUNK))
    with conn:
        end = time.monotonic() + o.seconds
        while time.monotonic() < end:
            conn.sendall(payload)
        conn.shutdown(socket.SHUT_WR)
    return 0


def iperf(o):
    with open(o.file) as f:
        report = json.load(f)
    if "error" in report:
        print(f"compare_tcp: iperf3: {report['error']}", file=sys.stderr)
        return 1
    end = report["end"]
    rates = [end["sum_received"]["bits_per_second"]]
    if "sum_received_bidir_reverse" in end:  # --bidir: the slower direction
        rates.append(end["sum_received_bidir_reverse"]["bits_per_second"])
    print(f"{min(rates):.0f}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("server")
    s.add_argument("--bind", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--timeout", type=float, default=30)
    c = sub.add_parser("client")
    c.add_argument("--connect", required=True)
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--seconds", type=float, default=3)
    c.add_argument("--timeout", type=float, default=30)
    i = sub.add_parser("iperf")
    i.add_argument("file")
    o = p.parse_args()
    try:
        return {"server": server, "client": client, "iperf": iperf}[o.command](o)
    except (OSError, ValueError, KeyError) as e:
        print(f"compare_tcp: {o.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
