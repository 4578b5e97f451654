#!/usr/bin/env bash
# bench/trellis_bench.sh — reading a Trellis store's v3 view through the
# mount against reading its v2 files (docs/trellis.md §7).
#
#   bash bench/trellis_bench.sh [FILE.safetensors] [BITS]   (default: isnet-medium.f16, 4)
#   BUILD=/path/to/build REPEAT=5 bash bench/trellis_bench.sh
#
# Quantizes FILE into a v2 store (wcodec trellis quantize) and migrates a
# copy to v3, then reads, cold (kernel page cache dropped before each run
# when permitted), every file with cat: the v2 files on the host
# filesystem; the v2 files passed through the mount (a copy of the store
# the trellis kind does not recognize: layer directories renamed); the v3
# view of the v2 store through the mount; the migrated v3 files through
# the mount. The four alternate, REPEAT rounds. Prints MB/s (medians) and
# the view's share of the v2 files through the mount.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BUILD=${BUILD:-$root/build}
WCODEC=${WCODEC:-$BUILD/wcodec}
WCODECFS=${WCODECFS:-$BUILD/wcodecfs}
FILE=${1:-$root/../shared/data/isnet-medium.f16.safetensors}
BITS=${2:-4}
REPEAT=${REPEAT:-3}

work=$(mktemp -d /tmp/trellis-bench.XXXXXX)
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

drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
# CPU time (ms, user + system, all threads) the mount's daemon has used.
daemon_ms() {
    local pid
    pid=$(pgrep -f "^$WCODECFS $store $mnt" | head -1)
    [ -n "$pid" ] || { echo 0; return; }
    awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) * 1000 / hz}' "/proc/$pid/stat"
}
# MB/s of one cold cat of every file below $1 (but the dense view); the
# daemon's CPU ms for it go to the file $work/cpu-$(basename $1).
once() {
    local dir=$1 t0 t1 bytes c0
    bytes=$(find "$dir" "${@:2}" -type f ! -name model.dense.safetensors -print0 | du -cb --apparent-size --files0-from=- | tail -1 | cut -f1)
    drop
    c0=$(daemon_ms)
    t0=$(date +%s.%N)
    find "$dir" "${@:2}" -type f ! -name model.dense.safetensors -print0 | xargs -0 cat > /dev/null
    t1=$(date +%s.%N)
    python3 -c "print($(daemon_ms) - $c0)" >> "$work/cpu-$(basename "$dir")"
    python3 -c "print($bytes / 1e6 / ($t1 - $t0))"
}
median() { sort -g | awk '{a[NR]=$1} END {printf "%.0f", a[int((NR+1)/2)]}'; }

"$WCODECFS" "$store" "$mnt"
# The four reads alternate, REPEAT rounds, so that a change of the host's
# load touches every row alike.
: > "$work/host"; : > "$work/plain"; : > "$work/view"; : > "$work/v3"; : > "$work/dense"
for _ in $(seq "$REPEAT"); do
    once "$store/v2" >> "$work/host"
    once "$mnt/plain" >> "$work/plain"
    once "$mnt/v2" >> "$work/view"
    once "$mnt/v3" >> "$work/v3"
    # The dense view: a fresh mount each time, so its chunks are computed.
    fusermount3 -u "$mnt"; "$WCODECFS" "$store" "$mnt"
    b=$(stat -c %s "$mnt/v2/model.dense.safetensors"); drop
    t0=$(date +%s.%N); cat "$mnt/v2/model.dense.safetensors" > /dev/null; t1=$(date +%s.%N)
    python3 -c "print($b / 1e6 / ($t1 - $t0))" >> "$work/dense"
done
host=$(median < "$work/host")
plain=$(median < "$work/plain")
view=$(median < "$work/view")
v3=$(median < "$work/v3")
dense=$(median < "$work/dense")
share=$(python3 -c "print(f'{100 * $view / $plain:.0f}%')")
cpu_plain=$(median < "$work/cpu-plain"); cpu_view=$(median < "$work/cpu-v2"); cpu_v3=$(median < "$work/cpu-v3")
echo "Trellis store of $(basename "$FILE") at $BITS bits; cold sequential reads (cat of every file), median of $REPEAT alternated rounds"
echo
echo "| read | MB/s | daemon CPU ms |"
echo "|---|---|---|"
echo "| v2 files on the host filesystem | $host | |"
echo "| v2 files through the mount (passthrough) | $plain | $cpu_plain |"
echo "| v3 view of the v2 store through the mount | $view ($share of the v2 files through the mount) | $cpu_view |"
echo "| migrated v3 files through the mount (passthrough) | $v3 | $cpu_v3 |"
echo "| dense view (F16, dequantized on first read), cold | $dense | |"
