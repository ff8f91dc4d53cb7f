#!/bin/bash
# Measures the event collector against its targets with wrk (Debian's):
# Pith serving events (fsync), and the floor server (testdata/floor) in
# the same run, alternating, ROUNDS times; prints every round and the
# medians. Run from the repository root:
#
#   internal/events/testdata/wrk/bench.sh [ROUNDS] [CONNECTIONS]
#
# Rounds: 14 events per request (~1.5 KB) on Pith; 1 event per request
# on Pith and on the floor; Pith's peak RSS (VmHWM) after both. With
# IDS=1 the 14 events of a request carry client ids (ids.lua), which the
# collector remembers for deduplication.
set -euo pipefail
rounds=${1:-5}
conns=${2:-256}
secs=${SECS:-8}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
here=internal/events/testdata
batch_script=batch.lua
if [ -n "${IDS:-}" ]; then batch_script=ids.lua; fi
go build -o "$dir/pith" ./cmd/pith
go build -o "$dir/floor" ./$here/floor
cat >"$dir/pith.toml" <<TOML
[log]
level = "warn"
[http]
listen = "127.0.0.1:18099"
[store]
dir = "$dir/data"
durability = "fsync"
[events]
enabled = true
TOML
rate() { wrk -t2 -c"$conns" -d"${secs}s" -s "$@" | awk '/Non-2xx/{print "non-2xx:", $0 > "/dev/stderr"} /Requests\/sec/{print $2}'; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
"$dir/floor" -listen 127.0.0.1:18096 -file "$dir/floor.wal" &
for r in $(seq "$rounds"); do
  rm -rf "$dir/data"
  "$dir/pith" serve --config "$dir/pith.toml" &
  pid=$!
  sleep 1.5
  batch=$(EVENTS_PER_REQUEST=14 rate $here/wrk/$batch_script http://127.0.0.1:18099)
  one=$(rate $here/wrk/one.lua http://127.0.0.1:18099)
  rss=$(awk '/VmHWM/{print $2}' /proc/$pid/status)
  kill $pid; wait $pid 2>/dev/null || true
  floor=$(rate $here/wrk/one.lua http://127.0.0.1:18096)
  echo "round $r: 14/request $batch req/s ($(awk "BEGIN{printf \"%d\", $batch*14}") events/s), 1/request $one req/s, floor $floor req/s, peak RSS $((rss/1024)) MB"
  echo "$batch $one $floor $rss" >>"$dir/rounds"
done
echo "median: 14/request $(awk '{print $1*14}' "$dir/rounds" | median) events/s," \
  "1/request $(awk '{print $2}' "$dir/rounds" | median) req/s," \
  "floor $(awk '{print $3}' "$dir/rounds" | median) req/s," \
  "peak RSS $(awk '{print int($4/1024)}' "$dir/rounds" | median) MB"
