#!/usr/bin/env bash
# bench/trellis_bench.sh — reading a Trellis store's v3 view through the
# mount against reading its v2 files (docs/trellis.md §7).
#
#   bash bench/trellis_bench.sh [FILE.safetensors] [BITS]   (default: isnet-medium.f16, 4)
#   BUILD=/path/to/build REPEAT=9 bash bench/trellis_bench.sh
#
# Quantizes FILE into a v2 store (wcodec trellis quantize) and migrates a
# copy to v3, then reads every file with cat: the v2 files on the host
# filesystem; the v2 files passed through the mount (a copy of the store
# the trellis kind does not recognize: layer directories renamed); the v3
# view of the v2 store through the mount; the migrated v3 files through
# the mount. Each read is done cold (the kernel's page cache dropped
# first; needs root, else every read is warm and the script says so) and
# then warm (the same files again at once). The rows alternate, REPEAT
# rounds (default 9), so that a change of the host's load touches every
# row alike; the table gives the medians, each row's ratio to the v2 files
# read through the mount, and the daemon's CPU time per cold read (mean).
# The dense view (computed on first read) is read apart: a fresh mount
# each round, cold (computed) then warm (from the chunk cache).
# TMPDIR chooses where the store and the mount point are made.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BUILD=${BUILD:-$root/build}
WCODEC=${WCODEC:-$BUILD/wcodec}
WCODECFS=${WCODECFS:-$BUILD/wcodecfs}
FILE=${1:-$root/../shared/data/isnet-medium.f16.safetensors}
BITS=${2:-4}
REPEAT=${REPEAT:-9}

work=$(mktemp -d "${TMPDIR:-/tmp}/trellis-bench.XXXXXX")
store=$work/store
mnt=$work/mnt
mkdir -p "$store" "$mnt"
cleanup() {
    if grep -qs " $mnt " /proc/mounts; then timeout 20 fusermount3 -u -z "$mnt" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

"$WCODEC" trellis quantize "$FILE" "$store/v2" --bits "$BITS" --layout v2 >/dev/null
"$WCODEC" trellis migrate "$store/v2" "$store/v3" >/dev/null
# The same v2 files, not recognized as a store (passed through as they are).
cp -r "$store/v2" "$store/plain"
for d in "$store/plain"/layer_*; do mv "$d" "$store/plain/x${d##*/}"; done

cold=yes
if ! { sync && echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null; then
    cold=no
    echo "note: cannot drop the kernel's page cache (not root): the cold rows are warm reads" >&2
fi
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
# CPU time (ms, user + system, all threads) the mount's daemon has used.
daemon_ms() {
    local pid
    pid=$(pgrep -f "^$WCODECFS $store $mnt" | head -1)
    [ -n "$pid" ] || { echo 0; return; }
    awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) * 1000 / hz}' "/proc/$pid/stat"
}
# Appends to $work/<row>-cold and <row>-warm the MB/s of a cold and then a
# warm cat of every file below $2 (but the dense view), and to
# $work/<row>-cpu the daemon's CPU ms of the cold read.
once() {
    local row=$1 dir=$2 t0 t1 bytes c0
    bytes=$(find "$dir" -type f ! -name 'model.dense.*' -print0 | du -cb --apparent-size --files0-from=- | tail -1 | cut -f1)
    drop
    c0=$(daemon_ms)
    t0=$(date +%s.%N)
    find "$dir" -type f ! -name 'model.dense.*' -print0 | xargs -0 cat > /dev/null
    t1=$(date +%s.%N)
    python3 -c "print($(daemon_ms) - $c0)" >> "$work/$row-cpu"
    python3 -c "print($bytes / 1e6 / ($t1 - $t0))" >> "$work/$row-cold"
    t0=$(date +%s.%N)
    find "$dir" -type f ! -name 'model.dense.*' -print0 | xargs -0 cat > /dev/null
    t1=$(date +%s.%N)
    python3 -c "print($bytes / 1e6 / ($t1 - $t0))" >> "$work/$row-warm"
}
median() { sort -g | awk '{a[NR]=$1} END {printf "%.0f", a[int((NR+1)/2)]}'; }

"$WCODECFS" "$store" "$mnt"
for _ in $(seq "$REPEAT"); do
    once host "$store/v2"
    once plain "$mnt/plain"
    once view "$mnt/v2"
    once v3 "$mnt/v3"
    # The dense view: a fresh mount each time, so its chunks are computed.
    fusermount3 -u "$mnt"; "$WCODECFS" "$store" "$mnt"
    b=$(stat -c %s "$mnt/v2/model.dense.safetensors"); drop
    t0=$(date +%s.%N); cat "$mnt/v2/model.dense.safetensors" > /dev/null; t1=$(date +%s.%N)
    python3 -c "print($b / 1e6 / ($t1 - $t0))" >> "$work/dense-cold"
    t0=$(date +%s.%N); cat "$mnt/v2/model.dense.safetensors" > /dev/null; t1=$(date +%s.%N)
    python3 -c "print($b / 1e6 / ($t1 - $t0))" >> "$work/dense-warm"
done

for r in host plain view v3 dense; do
    for m in cold warm; do eval "${r}_$m=\$(median < \"\$work/\$r-\$m\")"; done
done
# CPU time: the mean over the rounds (the clock ticks in 10 ms steps).
mean() { awk '{s += $1} END {printf "%.0f", s / NR}'; }
for r in plain view v3; do eval "${r}_cpu=\$(mean < \"\$work/\$r-cpu\")"; done
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
size=$(find "$store/v2" -type f -print0 | du -cb --apparent-size --files0-from=- | tail -1 | cut -f1)
echo "Trellis store of $(basename "$FILE") at $BITS bits ($((size / 1000000)) MB); cat of every file; median of $REPEAT alternated rounds; cold = kernel page cache dropped first ($cold), warm = read again at once"
echo
echo "| read | cold MB/s | cold ratio | warm MB/s | warm ratio | daemon CPU ms per cold read (mean) |"
echo "|---|---|---|---|---|---|"
echo "| v2 files on the host filesystem | $host_cold | $(ratio "$host_cold" "$plain_cold") | $host_warm | $(ratio "$host_warm" "$plain_warm") | |"
echo "| v2 files through the mount (passthrough) | $plain_cold | 1.00 | $plain_warm | 1.00 | $plain_cpu |"
echo "| v3 view of the v2 store through the mount | $view_cold | $(ratio "$view_cold" "$plain_cold") | $view_warm | $(ratio "$view_warm" "$plain_warm") | $view_cpu |"
echo "| migrated v3 files through the mount (passthrough) | $v3_cold | $(ratio "$v3_cold" "$plain_cold") | $v3_warm | $(ratio "$v3_warm" "$plain_warm") | $v3_cpu |"
echo "| dense view (F16; cold: computed, warm: chunk cache) | $dense_cold | | $dense_warm | | |"
echo
echo "(ratio: MB/s against the v2 files through the mount, same column)"
