#!/usr/bin/env bash
# What mutual TLS on the control plane (--tls-cert/--tls-key/--tls-ca) costs:
# bootstrap time (the daemons' first log line to the last "ring ... formed"
# line) over RUNS launches, and ringsync-bench allreduces of 8 B and 64 MiB,
# each without and with TLS, on 2 simulated nodes x 1 rank (ringsync launch,
# loopback). The certificates are made with openssl in a folder removed at
# the end.
#
# usage: bench/control_tls.sh [BUILD_DIR] [RUNS]   (default: build 10)
set -euo pipefail
build=${1:-build}
runs=${2:-10}
bin=$build/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

(
  cd "$work"
  openssl ecparam -name prime256v1 -genkey -noout -out ca.key
  openssl req -x509 -new -key ca.key -subj /CN=bench-ca -days 1 -out ca.pem
  printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n' >node.ext
  openssl ecparam -name prime256v1 -genkey -noout -out node.key
  chmod 600 node.key
  openssl req -new -key node.key -subj /CN=bench-node -out node.csr
  openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -extfile node.ext -out node.pem
) >"$work/openssl.log" 2>&1 || { cat "$work/openssl.log"; exit 1; }

tls=(--daemon-arg --tls-cert --daemon-arg "$work/node.pem" --daemon-arg --tls-key --daemon-arg "$work/node.key"
     --daemon-arg --tls-ca --daemon-arg "$work/ca.pem")

# Milliseconds from the earliest first log line of the daemons to the latest
# "formed:" line.
formed_ms() {
  python3 - "$@" <<'PY'
import sys, datetime
def t(line): return datetime.datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f")
starts, formed = [], []
for path in sys.argv[1:]:
    lines = [l for l in open(path) if l[:4].isdigit()]
    starts.append(t(lines[0]))
    formed += [t(l) for l in lines if "' formed:" in l]
print(round((max(formed) - min(starts)).total_seconds() * 1000))
PY
}

# The two modes alternate run by run, so that a load that comes and goes on
# the machine falls on both alike.
declare -A boot
for _ in $(seq "$runs"); do
  for mode in plain tls; do
    args=()
    [ "$mode" = tls ] && args=("${tls[@]}")
    rm -rf "$work/logs"
    "$bin/ringsync" launch --nodes 2 --slots 1 --log-dir "$work/logs" "${args[@]}" -- \
      "$bin/ringsync-bench" -b 8 -e 8 -n 1 -w 0 >/dev/null 2>&1
    boot[$mode]+="$(formed_ms "$work"/logs/node-*.log) "
  done
done
for mode in plain tls; do
  echo "$mode: bootstrap ms, sorted: $(printf '%s\n' ${boot[$mode]} | sort -n | tr '\n' ' ')"
done

# Allreduce: median and mean per call (µs) of each of 3 launches per mode and size.
for size in 8 64M; do
  iters=200
  [ "$size" = 64M ] && iters=20
  for round in 1 2 3; do
    for mode in plain tls; do
      args=()
      [ "$mode" = tls ] && args=("${tls[@]}")
      rm -f "$work/row.csv"
      "$bin/ringsync" launch --nodes 2 --slots 1 "${args[@]}" -- \
        "$bin/ringsync-bench" -b "$size" -e "$size" -n "$iters" -w 5 --csv "$work/row.csv" >/dev/null 2>&1
      tail -1 "$work/row.csv" | awk -F, -v m="$mode" -v r="$round" \
        '{printf "%s: allreduce %s B, round %s: median %s us, mean %s us, wrong %s\n", m, $2, r, $8, $7, $11}'
    done
  done
done
