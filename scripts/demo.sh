#!/usr/bin/env bash
# Sets up and runs the main job: installs dependencies, builds the release
# configuration, encodes every sample model into build/demo-store, verifies
# the store, decodes one file back and compares its SHA-256 with the
# original, and prints the storage savings.
# Environment:
#   WCODEC_DATA  directory with *.safetensors files (default: ../shared/data
#                beside the repository)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$(pwd)

data_dir=${WCODEC_DATA:-$(dirname "$repo")/shared/data}
store=build/demo-store
decoded_dir=build/demo-decoded
tool=build/wcodec

step() { printf '\n=== %s ===\n' "$*"; }
fail() { echo "demo: FAILED: $*" >&2; exit 1; }

step "1/7 installing dependencies"
bash scripts/install-deps.sh

step "2/7 building release"
bash scripts/build.sh release
[[ -x "$tool" ]] || fail "$tool was not built"
"$tool" --version

step "3/7 encoding $data_dir into $store"
[[ -d "$data_dir" ]] || fail "data directory $data_dir does not exist (set WCODEC_DATA)"
shopt -s nullglob
originals=("$data_dir"/*.safetensors "$data_dir"/*.gguf)
[[ ${#originals[@]} -gt 0 ]] || fail "no *.safetensors or *.gguf files in $data_dir"
echo "demo: ${#originals[@]} safetensors and GGUF files"
rm -rf "$store" "$decoded_dir"
"$tool" encode "$data_dir" "$store" -j "$(nproc)" || fail "encode"

step "4/7 verifying every stored file (--full: decode and compare SHA-256)"
encoded=("$store"/*.wcodec)
[[ ${#encoded[@]} -eq ${#originals[@]} ]] ||
  fail "expected ${#originals[@]} .wcodec files in $store, found ${#encoded[@]}"
"$tool" verify --full "${encoded[@]}" || fail "verify"

step "5/7 decoding one file back and comparing"
sample=${encoded[0]}
name=$(basename "$sample" .wcodec)
original="$data_dir/$name.safetensors"
restored="$decoded_dir/$name.safetensors"
mkdir -p "$decoded_dir"
"$tool" decode "$sample" "$restored" || fail "decode $sample"
hash_original=$(sha256sum "$original" | cut -d' ' -f1)
hash_restored=$(sha256sum "$restored" | cut -d' ' -f1)
echo "original: $hash_original  $original"
echo "restored: $hash_restored  $restored"
[[ "$hash_original" == "$hash_restored" ]] || fail "SHA-256 of $restored differs from the original"
echo "demo: byte-identical"
rm -rf "$decoded_dir"

step "6/7 savings"
bytes_in=$(du -cb "${originals[@]}" | tail -n 1 | cut -f1)
bytes_out=$(du -cb "${encoded[@]}" | tail -n 1 | cut -f1)
awk -v a="$bytes_in" -v b="$bytes_out" -v n="${#originals[@]}" 'BEGIN {
  printf "%d safetensors and GGUF files: %.1f MiB -> %.1f MiB stored (%.3f of original, %.1f%% saved)\n",
         n, a / 1048576, b / 1048576, b / a, 100 * (1 - b / a)
}'
echo "demo: store is in $store"

step "7/7 mounting the store and reading a model through it"
mnt=build/demo-mnt
if [[ ! -x build/wcodecfs ]]; then
  echo "demo: build/wcodecfs was not built (FUSE off); skipping the mount step"
  exit 0
fi
if ! { [[ -c /dev/fuse ]] && [[ -r /dev/fuse && -w /dev/fuse ]]; }; then
  echo "demo: /dev/fuse is not usable here; skipping the mount step"
  exit 0
fi
mkdir -p "$mnt"
fusermount3 -u -z "$mnt" 2>/dev/null || true
build/wcodecfs "$store" "$mnt" || fail "mount of $store on $mnt"
trap 'fusermount3 -u -z "$mnt" 2>/dev/null || true' EXIT
echo "demo: $store is mounted on $mnt"
ls -l "$mnt" | head -n 15
through=$(sha256sum "$mnt/$name.safetensors" | cut -d' ' -f1)
for g in "$data_dir"/*.gguf; do
  [[ $(sha256sum < "$mnt/$(basename "$g")" | cut -d' ' -f1) == $(sha256sum < "$g" | cut -d' ' -f1) ]] ||
    fail "SHA-256 of $(basename "$g") through the mount differs from the original"
  echo "demo: $(basename "$g") (stored as $(basename "$g").wcodec) reads back identical through the mount"
done
echo "through the mount: $through  $mnt/$name.safetensors"
[[ "$through" == "$hash_original" ]] || fail "SHA-256 through the mount differs from the original"
echo "demo: sha256sum through the mount matches the original"
echo "demo: on disk $(du -sh --apparent-size "$store" | cut -f1), in the mount $(du -sh --apparent-size "$mnt" 2>/dev/null | cut -f1)"
fusermount3 -u "$mnt" && trap - EXIT
echo "demo: unmounted"
