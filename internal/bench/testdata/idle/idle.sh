#!/usr/bin/env bash
# Measures what a running Pith costs from outside: CPU and resident memory
# over a window, for a given binary, with the packaged default config
# (packaging/pith.toml). Prints one line per run and the medians.
#
#   internal/bench/testdata/idle/idle.sh BINARY [CASE] [RUNS] [SECONDS]
#
# CASE "idle" (default): an empty store, nothing acquired.
# CASE "modbus": the same plus one [[modbus.client]] polling 100 holding
# registers every second from a pymodbus server whose values change twice
# a second (modbus_server.py; Debian's python3-pymodbus), so 100 values/s
# are archived.
# CPU is the run time of all the process's threads in nanoseconds
# (/proc/PID/task/*/schedstat), since utime + stime in /proc/PID/stat count
# 10 ms ticks, too coarse for 0.05% of 30 s; memory is VmRSS at the end
# (/proc/PID/status). Each run starts a fresh data directory, waits WARMUP seconds (default
# 10) and measures SECONDS (default 30).
set -euo pipefail
bin=$(realpath "$1")
case_=${2:-idle}
runs=${3:-5}
secs=${4:-30}
warmup=${WARMUP:-10}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)

cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%d", s}'; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cpus=() rsss=()
for run in $(seq "$runs"); do
  tmp=$(mktemp -d)
  conf="$tmp/pith.toml"
  cp "$root/packaging/pith.toml" "$conf"
  srv=
  if [ "$case_" = modbus ]; then
    mport=$(freeport)
    /usr/bin/python3 "$here/modbus_server.py" "$mport" &
    srv=$!
    sleep 1
    cat >>"$conf" <<CONF

[[modbus.client]]
name = "plc1"
url = "tcp://127.0.0.1:$mport"
period = "1s"
tags = [{ name = "plc1.r{i}", register = "holding:0", type = "uint16", count = 100 }]
CONF
  fi
  port=$(freeport)
  "$bin" serve --config "$conf" --data "$tmp/data" --listen "127.0.0.1:$port" >"$tmp/log" 2>&1 &
  pid=$!
  sleep "$warmup"
  t0=$(cpu_ns "$pid")
  sleep "$secs"
  t1=$(cpu_ns "$pid")
  rss=$(rss_kb "$pid")
  got=
  [ "$case_" != modbus ] || got=$(curl -s "http://127.0.0.1:$port/api/v1/data?tag=plc1.r5&from=$(( ($(date +%s) - secs) * 1000 ))&to=$(( $(date +%s) * 1000 ))&agg=count&points=1")
  kill "$pid"; wait "$pid" || true
  [ -z "$srv" ] || { kill "$srv"; wait "$srv" 2>/dev/null || true; }
  if [ "$case_" = modbus ] && ! grep -q '"points":\[\[[0-9]*,[1-9]' <<<"$got"; then
    echo "modbus case: plc1.r5 not archived: $got (log: $tmp/log)" >&2; exit 1
  fi
  rm -rf "$tmp"
  cpu=$(awk -v d=$((t1 - t0)) -v s="$secs" 'BEGIN {printf "%.3f", 100 * d / 1e9 / s}')
  mb=$(awk -v k="$rss" 'BEGIN {printf "%.1f", k / 1024}')
  echo "run $run: cpu ${cpu}% of a core, rss ${mb} MB"
  cpus+=("$cpu") rsss+=("$mb")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
echo "$case_ $(basename "$bin"): median cpu $(median "${cpus[@]}")% of a core, median rss $(median "${rsss[@]}") MB ($runs runs of ${secs} s)"
