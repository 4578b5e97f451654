#!/usr/bin/env bash
# bench/mount_bench.sh — read throughput through a wcodecfs mount, next to
# the plain file, in one table.
#
#   bash bench/mount_bench.sh [FILE.safetensors]     (default: isnet-medium.f16)
#   BUILD=/path/to/build bash bench/mount_bench.sh
#
# Builds a store in a temporary directory: FILE encoded as X.wcodec (served
# as X.safetensors) and a plain copy (passed through). Measures:
#   - sequential read (dd bs=1M) of the plain file on the host filesystem, of
#     the plain copy through the mount (passthrough: its share of the plain
#     file's read is the mount's own cost), and of the virtual file with the chunk
#     cache cold (fresh mount) and warm (chunk cache full, kernel page cache
#     dropped), plus a page-cache hit; and, as the bound for decoded reads,
#     a file of random bytes whose chunks are stored undecoded (cold);
#   - random 1 MiB reads (pread at random offsets, same seed everywhere);
#   - bytes decoded per byte read when a reader loads one tensor (the
#     largest and a small one) from the virtual file, from the mount's
#     /.wcodecfs/stats counters.
#   - the same cold sequential read through squashfuse_ll over a squashfs
#     image of FILE (zstd level 19, 1 MiB blocks; Debian squashfuse,
#     squashfs-tools), the nearest existing way to serve a compressed model
#     file read-only, and the cold wcodec read once per decoder path named in
#     CPU_PATHS (default "auto"; e.g. CPU_PATHS="avx512 avx2 scalar": the
#     daemon runs with WCODEC_CPU set, and the row names the path its stats
#     report), each as a multiple of squashfuse_ll's figure.
# Cold rows drop the kernel page cache (echo 3 > /proc/sys/vm/drop_caches)
# when permitted (root); otherwise they say "page cache not dropped".
# Needs root or fusermount3 rights, python3.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BUILD=${BUILD:-$root/build}
WCODEC=${WCODEC:-$BUILD/wcodec}
WCODECFS=${WCODECFS:-$BUILD/wcodecfs}
FILE=${1:-$root/../shared/data/isnet-medium.f16.safetensors}
RANDOM_READS=${RANDOM_READS:-64}
MOUNT_OPTS=${MOUNT_OPTS:-}   # extra -o options for wcodecfs, e.g. kernel_readahead=4M
CPU_PATHS=${CPU_PATHS:-auto} # decoder paths for the cold rows (WCODEC_CPU values)

for b in "$WCODEC" "$WCODECFS"; do
    [ -x "$b" ] || { echo "mount_bench: $b not found (build first, or set BUILD=)" >&2; exit 1; }
done
[ -f "$FILE" ] || { echo "mount_bench: $FILE not found" >&2; exit 1; }

work=$(mktemp -d /tmp/wcodecfs-bench.XXXXXX)
store=$work/store
mnt=$work/mnt
mkdir -p "$store" "$mnt"
cleanup() {
    if grep -qs " $mnt " /proc/mounts; then timeout 20 fusermount3 -u -z "$mnt" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

name=$(basename "$FILE" .safetensors)
"$WCODEC" encode -q "$FILE" "$store/$name.wcodec"
cp "$FILE" "$store/plain-copy.bin"
# As many random bytes as FILE, one U8 tensor: the encoder stores its chunks
# as they are, so reading it through the mount costs everything a decoded
# read does (store reads, checksums, cache memory, replies) but decoding.
python3 - "$work/incompressible.safetensors" "$(stat -c %s "$FILE")" <<'EOF'
import json, os, struct, sys
path, size = sys.argv[1], int(sys.argv[2])
n = size - 88
header = json.dumps({"r": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}}).encode()
header += b" " * (80 - len(header))
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header)
    while n:
        k = min(n, 1 << 24)
        f.write(os.urandom(k))
        n -= k
EOF
"$WCODEC" encode -q "$work/incompressible.safetensors" "$store/incompressible.wcodec"
rm -f "$work/incompressible.safetensors"
size=$(stat -c %s "$FILE")
stored=$(stat -c %s "$store/$name.wcodec")

can_drop=1
drop_caches() {
    sync
    if [ "$can_drop" = 1 ] && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then return 0; fi
    can_drop=0
    return 1
}
drop_caches || true
note=""
[ "$can_drop" = 1 ] || note=" (page cache not dropped)"

cpu_path=auto   # WCODEC_CPU of the daemon mount_store starts
mount_store() { WCODEC_CPU=$cpu_path "$WCODECFS" "$store" "$mnt" ${MOUNT_OPTS:+-o "$MOUNT_OPTS"}; }
# The warm rows keep every decoded chunk (by default the daemon drops a
# chunk once the kernel has read all of it, and a read after the page cache
# was dropped decodes again).
mount_store_keep() { WCODEC_CPU=$cpu_path "$WCODECFS" "$store" "$mnt" -o "keep_read_chunks${MOUNT_OPTS:+,$MOUNT_OPTS}"; }
unmount_store() {
    timeout 20 fusermount3 -u "$mnt"
    for _ in $(seq 100); do pgrep -f -x "$WCODECFS $store $mnt" >/dev/null || return 0; sleep 0.05; done
}
stat_field() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval("j"+sys.argv[2]))' "$mnt/.wcodecfs/stats" "$1"; }

# Sequential read: MB/s (1 MB = 10^6 bytes).
seq_read() {
    local t0 t1
    stat "$1" > /dev/null  # lookup (opens the container) is not read time
    t0=$(date +%s.%N)
    dd if="$1" of=/dev/null bs=1M status=none
    t1=$(date +%s.%N)
    python3 -c "print(f'{$size / ($t1 - $t0) / 1e6:.0f}')"
}

# Random 1 MiB preads at RANDOM_READS offsets (fixed seed): MB/s.
rand_read() {
    stat "$1" > /dev/null
    python3 - "$1" "$RANDOM_READS" <<'EOF'
import os, random, sys, time
path, n = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDONLY)
size = os.fstat(fd).st_size
rng = random.Random(42)
offs = [rng.randrange(0, size - (1 << 20)) for _ in range(n)]
t0 = time.perf_counter()
got = sum(len(os.pread(fd, 1 << 20, o)) for o in offs)
dt = time.perf_counter() - t0
os.close(fd)
print(f"{got / dt / 1e6:.0f}")
EOF
}

declare -a rows
row() { rows+=("$(printf '| %-64s | %9s | %-30s |' "$1" "$2" "$3")"); }

REPEAT=${REPEAT:-3}
# median of REPEAT runs of "$2 $3" (a reader and its file), each after
# running the preparation command $1 (drop caches, remount, ...).
median_of() {
    local prep=$1; shift
    local v=()
    for _ in $(seq "$REPEAT"); do
        $prep
        v+=("$("$@")")
    done
    printf '%s\n' "${v[@]}" | sort -n | sed -n "$(( (REPEAT + 1) / 2 ))p"
}
cold() { drop_caches || true; }
remount_cold() { unmount_store; mount_store; stat "$mnt/$name.safetensors" > /dev/null; drop_caches || true; }
remount_cold_raw() { unmount_store; mount_store; stat "$mnt/incompressible.safetensors" > /dev/null; drop_caches || true; }
nothing() { :; }
decoded_bytes() { stat_field '["decode"]["bytes"]'; }

# --- sequential ------------------------------------------------------------
host=$(median_of cold seq_read "$FILE")
row "sequential, plain file on the host filesystem, cold$note" "$host" ""

mount_store
passthrough=$(median_of cold seq_read "$mnt/plain-copy.bin")
row "sequential, plain file through the mount, cold" "$passthrough" \
    "$(python3 -c "print(f'{100 * $passthrough / $host:.0f}% of the plain file')"); passthrough: the reference below"
of_passthrough() { python3 -c "print(f'{100 * $1 / $passthrough:.0f}% of passthrough')"; }
unmount_store

# squashfuse_ll over a zstd-19, 1 MiB-block squashfs image of the same file.
squash=""
if command -v mksquashfs >/dev/null && command -v squashfuse_ll >/dev/null; then
    mkdir -p "$work/sqsrc" "$work/sqmnt"
    ln "$FILE" "$work/sqsrc/$name.safetensors" 2>/dev/null || cp "$FILE" "$work/sqsrc/$name.safetensors"
    mksquashfs "$work/sqsrc" "$work/image.sqfs" -comp zstd -Xcompression-level 19 -b 1M -noappend -quiet >/dev/null
    rm -rf "$work/sqsrc"
    squashfuse_ll "$work/image.sqfs" "$work/sqmnt"
    squash=$(median_of cold seq_read "$work/sqmnt/$name.safetensors")
    timeout 20 fusermount3 -u "$work/sqmnt" || true
    row "sequential, squashfuse_ll (zstd -19, 1 MiB blocks), cold" "$squash" \
        "image $(python3 -c "print(f'{100 * $(stat -c %s "$work/image.sqfs") / $size:.1f}% of the file')"); $(of_passthrough "$squash")"
else
    row "sequential, squashfuse_ll: not installed (apt-get install squashfuse squashfs-tools)" "" ""
fi
of_squash() { [ -n "$squash" ] && python3 -c "print(f'{$1 / $squash:.2f}x squashfuse_ll')" || echo "-"; }

for cpu_path in $CPU_PATHS; do
    mount_store
    mbps=$(median_of remount_cold seq_read "$mnt/$name.safetensors")
    ran=$(stat_field '["decode"]["cpu_path"]')
    row "sequential, wcodec through the mount, chunk cache cold, $ran path" "$mbps" \
        "$(of_squash "$mbps"); $(of_passthrough "$mbps"); $(python3 -c "print(f'decoded {$(decoded_bytes)/$size:.2f} B/B, {$(stat_field '["decode"]["seconds"]'):.2f} s in decode')")"
    unmount_store
done
cpu_path=auto
mount_store_keep
mbps=$(median_of cold seq_read "$mnt/$name.safetensors")
row "sequential, wcodec through the mount, chunk cache warm (keep_read_chunks)" "$mbps" \
    "$(of_passthrough "$mbps"); $( [ "$can_drop" = 1 ] && echo "kernel page cache dropped" || echo "page cache not dropped")"
row "sequential, wcodec through the mount, page cache hit" "$(median_of nothing seq_read "$mnt/$name.safetensors")" ""
mbps=$(median_of remount_cold_raw seq_read "$mnt/incompressible.safetensors")
row "sequential, random bytes stored undecoded, chunk cache cold" "$mbps" \
    "$(of_passthrough "$mbps"); all a cold read costs but decoding"
unmount_store

# --- random 1 MiB --------------------------------------------------------------
row "random 1 MiB x $RANDOM_READS, plain file (host filesystem), cold$note" "$(median_of cold rand_read "$FILE")" ""
mount_store
row "random 1 MiB x $RANDOM_READS, plain copy through the mount, cold" "$(median_of cold rand_read "$mnt/plain-copy.bin")" ""
mbps=$(median_of remount_cold rand_read "$mnt/$name.safetensors")
row "random 1 MiB x $RANDOM_READS, wcodec, chunk cache cold" "$mbps" \
    "$(python3 -c "print(f'decoded {$(decoded_bytes)/($RANDOM_READS<<20):.2f} B/B')")"
unmount_store
mount_store_keep
cat "$mnt/$name.safetensors" > /dev/null
row "random 1 MiB x $RANDOM_READS, wcodec, chunk cache warm (keep_read_chunks)" "$(median_of cold rand_read "$mnt/$name.safetensors")" ""
unmount_store

# --- one tensor ----------------------------------------------------------------
# Which tensors: the largest and the one nearest 1 MiB (from the header).
read -r big small < <(python3 - "$FILE" <<'EOF'
import json, struct, sys
with open(sys.argv[1], 'rb') as f:
    n = struct.unpack('<Q', f.read(8))[0]
    h = json.loads(f.read(n))
h.pop('__metadata__', None)
sizes = {k: v['data_offsets'][1] - v['data_offsets'][0] for k, v in h.items()}
big = max(sizes, key=sizes.get)
small = min(sizes, key=lambda k: abs(sizes[k] - (1 << 20)))
print(big, small)
EOF
)
one_tensor() {  # $1 tensor, $2 mode (safetensors|pread)
    unmount_store 2>/dev/null || true
    mount_store
    drop_caches || true
    python3 - "$mnt/$name.safetensors" "$1" "$2" "$mnt/.wcodecfs/stats" "$FILE" <<'EOF'
import json, os, struct, sys, time
path, tensor, mode, stats, original = sys.argv[1:6]
def decoded():
    s = json.load(open(stats))
    return s['decode']['bytes']
# The tensor's place, from the original (reading the mounted header here
# would count this script's own reads); everything the loader reads through
# the mount, header included, counts.
with open(original, 'rb') as f:
    n = struct.unpack('<Q', f.read(8))[0]
    h = json.loads(f.read(n))
a, b = h[tensor]['data_offsets']
nbytes = b - a
d0 = decoded()
if mode == 'safetensors':
    try:
        from safetensors import safe_open
        with safe_open(path, framework='numpy') as st:
            st.get_tensor(tensor)
    except ImportError:
        mode = 'pread'
if mode == 'pread':
    import os
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    hn = struct.unpack('<Q', os.pread(fd, 8, 0))[0]
    json.loads(os.pread(fd, hn, 8))
    os.pread(fd, nbytes, 8 + hn + a)
    os.close(fd)
time.sleep(0.5)  # decodes still in flight (readahead) count too
d1 = decoded()
print(f"{nbytes} {d1 - d0} {mode}")
EOF
}
for t in "$big" "$small"; do
    for mode in safetensors pread; do
        read -r nbytes dec used < <(one_tensor "$t" "$mode")
        row "one tensor via $used: $t ($(python3 -c "print(f'{$nbytes/1e6:.2f}')") MB)" "" \
            "decoded $(python3 -c "print(f'{$dec/$nbytes:.2f}')") B/B ($(python3 -c "print(f'{$dec/1e6:.1f}')") MB)"
    done
done
unmount_store

# --- memory --------------------------------------------------------------------
# The daemon's peak resident memory after reading the whole file (and 8
# random readers at once) with a cache budget of a third of the file.
budget=$(( size / 3 / 1048576 ))M
saved_opts=$MOUNT_OPTS
MOUNT_OPTS="${saved_opts:+$saved_opts,}cache_size=$budget"
mount_store
stat "$mnt/$name.safetensors" > /dev/null
dpid=$(pgrep -f -x "$WCODECFS $store $mnt -o $MOUNT_OPTS" | head -1)
rss0=$(awk '/VmRSS/ {print $2}' "/proc/$dpid/status")
dd if="$mnt/$name.safetensors" of=/dev/null bs=1M status=none
python3 - "$mnt/$name.safetensors" "$size" <<'EOF'
import os, random, sys, threading
path, size = sys.argv[1], int(sys.argv[2])
def worker(seed):
    r = random.Random(seed)
    fd = os.open(path, os.O_RDONLY)
    for _ in range(32):
        os.pread(fd, 1 << 20, r.randrange(0, size - (1 << 20)))
    os.close(fd)
ts = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
for t in ts: t.start()
for t in ts: t.join()
EOF
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$dpid/status")
unmount_store
MOUNT_OPTS=$saved_opts
row "daemon peak RSS, cache_size=$budget, whole file + 8 random readers" "" \
    "$(python3 -c "print(f'{$hwm/1024:.0f} MiB peak, {$rss0/1024:.0f} MiB at mount')")"

# --- table ---------------------------------------------------------------------
echo
echo "wcodecfs mount benchmark: $(basename "$FILE") ($(python3 -c "print(f'{$size/1e6:.1f}')") MB; stored $(python3 -c "print(f'{$stored/1e6:.1f} MB = {100*$stored/$size:.1f}%')"))"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $(nproc) CPUs, default decoder threads (CPUs + 1) and cache${MOUNT_OPTS:+, -o $MOUNT_OPTS}; median of $REPEAT runs; MB = 10^6 bytes; B/B = bytes decoded per byte read"
printf '| %-64s | %9s | %-30s |\n' "read" "MB/s" "notes"
printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..66})" "$(printf -- '-%.0s' {1..11})" "$(printf -- '-%.0s' {1..32})"
for r in "${rows[@]}"; do echo "$r"; done
