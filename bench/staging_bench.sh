#!/usr/bin/env bash
# bench/staging_bench.sh — background encoding of the staging directory:
# end-to-end throughput, and what it costs a reader of another file in the
# same mount. One table, all rows from one run.
#
#   bash bench/staging_bench.sh [FILE.safetensors ...]   (default: every file of ../shared/data)
#   BUILD=/path/to/build ENCODE_THREADS=1 bash bench/staging_bench.sh
#
# A store holds isnet-medium.f16 encoded (the reader's file). The mount runs
# with a small chunk cache (64M) so the reader decodes all the time, like a
# cold model load. Rows:
#   - reader alone: sequential reads of the virtual file in a loop, MB/s;
#   - encode: the FILEs are copied into MOUNT/staging (cp), then the clock
#     runs from the end of the copy until the queue is idle and every file
#     is stored encoded: plain MB per second of wall time, with the ratio;
#   - reader during encode: the same reader loop while the encoder works.
# Encoders run at nice 19 and the idle IO class; decode threads are normal.
# Needs root or fusermount3 rights, python3.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BUILD=${BUILD:-$root/build}
WCODEC=${WCODEC:-$BUILD/wcodec}
WCODECFS=${WCODECFS:-$BUILD/wcodecfs}
ENCODE_THREADS=${ENCODE_THREADS:-1}
READER=${READER:-$root/../shared/data/isnet-medium.f16.safetensors}
if [ $# -eq 0 ]; then set -- "$root"/../shared/data/*.safetensors; fi

for b in "$WCODEC" "$WCODECFS"; do
    [ -x "$b" ] || { echo "staging_bench: $b not found (build first, or set BUILD=)" >&2; exit 1; }
done

work=$(mktemp -d /tmp/wcodecfs-staging-bench.XXXXXX)
store=$work/store
mnt=$work/mnt
mkdir -p "$store" "$mnt"
reader_pid=""
cleanup() {
    [ -n "$reader_pid" ] && kill "$reader_pid" 2>/dev/null || true
    if grep -qs " $mnt " /proc/mounts; then timeout 20 fusermount3 -u -z "$mnt" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

"$WCODEC" encode -q "$READER" "$store/reader.wcodec"
reader_size=$(stat -c %s "$READER")
"$WCODECFS" "$store" "$mnt" -o "cache_size=64M,encode_delay=0,encode_threads=$ENCODE_THREADS"

stat_json() { cat "$mnt/.wcodecfs/stats"; }
queue_idle() {
    stat_json | python3 -c 'import json,sys; s=json.load(sys.stdin)["staging"]; sys.exit(0 if s["pending"]==0 and s["encoding"]==0 else 1)'
}

# Reader loop: reads the virtual file sequentially until killed; prints
# one "bytes seconds" line per pass.
reader_loop() {
    exec python3 - "$mnt/reader.safetensors" <<'EOF'
import os, sys, time
p = sys.argv[1]
while True:
    t0 = time.monotonic(); n = 0
    with open(p, 'rb', buffering=0) as f:
        while True:
            b = f.read(1 << 20)
            if not b: break
            n += len(b)
    print(n, time.monotonic() - t0, flush=True)
    # drop this file's pages so the next pass reads through the daemon again
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
EOF
}
rate() {  # MB/s over the passes in file $1 (all but the first when possible)
    python3 - "$1" <<'EOF'
import sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
if len(rows) > 2: rows = rows[1:]
b = sum(r[0] for r in rows); t = sum(r[1] for r in rows)
print(f"{b / t / 1e6:.0f}" if t else "n/a")
EOF
}

# 1. Reader alone (~15 s).
reader_loop > "$work/alone" & reader_pid=$!
sleep 15
kill "$reader_pid"; wait "$reader_pid" 2>/dev/null || true; reader_pid=""
alone=$(rate "$work/alone")

# 2. Encode with the reader running.
total=0
for f in "$@"; do total=$((total + $(stat -c %s "$f"))); done
reader_loop > "$work/during" & reader_pid=$!
sleep 2
mkdir "$mnt/staging/bench"
t_copy0=$(date +%s.%N)
cp "$@" "$mnt/staging/bench/"
t_copy1=$(date +%s.%N)
sleep 0.5
while ! queue_idle; do sleep 0.2; done
t_done=$(date +%s.%N)
kill "$reader_pid"; wait "$reader_pid" 2>/dev/null || true; reader_pid=""
during=$(rate "$work/during")
area="$store/.wcodecfs-staging/bench"
stored=$(du -sb "$area" | cut -f1)
plain_left=$(find "$area" -name '*.safetensors' | wc -l)

# 3. Encode alone (same files again, no reader).
mkdir "$mnt/staging/bench2"
cp "$@" "$mnt/staging/bench2/"
t2_copy1=$(date +%s.%N)
sleep 0.5
while ! queue_idle; do sleep 0.2; done
t2_done=$(date +%s.%N)

python3 - "$total" "$stored" "$t_copy0" "$t_copy1" "$t_done" "$t2_copy1" "$t2_done" "$alone" "$during" "$plain_left" "$ENCODE_THREADS" <<'EOF'
import sys
total, stored = int(sys.argv[1]), int(sys.argv[2])
c0, c1, d1, c2, d2 = map(float, sys.argv[3:8])
alone, during, left, threads = sys.argv[8], sys.argv[9], sys.argv[10], sys.argv[11]
print(f"staging bench: {total/1e6:.1f} MB of safetensors, encode_threads={threads}, 2-core machine")
print()
print("| measurement | value |")
print("|---|---|")
print(f"| cp into staging | {total/1e6/(c1-c0):.0f} MB/s |")
print(f"| background encode, reader running (end of cp -> all stored encoded) | {total/1e6/(d1-c1):.1f} MB/s ({d1-c1:.1f} s) |")
print(f"| background encode, alone | {total/1e6/(d2-c2):.1f} MB/s ({d2-c2:.1f} s) |")
print(f"| stored size / written size | {stored/total:.4f} |")
print(f"| reader alone (cold decode, MB/s) | {alone} |")
print(f"| reader during encode (MB/s) | {during} |")
try:
    print(f"| reader slowdown | {100*(1-float(during)/float(alone)):.0f}% |")
except ValueError:
    pass
print(f"| files still plain after idle | {left} |")
EOF
