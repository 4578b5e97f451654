#!/usr/bin/env bash
# bench/encode_instructions.sh — instructions per encode pass of each file,
# counted by valgrind (callgrind): deterministic where a shared VM's
# wall-clock and CPU-time figures move by half between minutes, so two
# builds' encoders compare to a fraction of a percent. A pass is
# encode_safetensors of the whole file in process (build/bench/encode_loop,
# one thread, default profile): the count of 3 passes less that of 1,
# halved, so process start, file reads and first-pass table setup drop out.
# valgrind's CPU has no AVX-512: the encoder's avx2 path runs.
#
#   bash bench/encode_instructions.sh [FILE.safetensors...]   (default: ../shared/data)
#   BUILD=/other/build bash bench/encode_instructions.sh FILE  (another build's encode_loop)
#
# Instructions are not time: memory stalls and table clearing (rep stos
# counts as one) do not show. Confirm a change with encode_loop runs of the
# two builds alternated in the same minutes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${BUILD:-build}
loop=$BUILD/bench/encode_loop
[[ -x $loop ]] || { echo "encode_instructions: no $loop (bash scripts/build.sh release)" >&2; exit 1; }
command -v valgrind > /dev/null || { echo "encode_instructions: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
if [[ $# -eq 0 ]]; then
  set -- "${WCODEC_DATA:-../shared/data}"/*.safetensors
fi
count() {  # passes file -> instructions
  WCODEC_CPU=avx2 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$loop" --passes "$1" --rounds 1 "$2" 2>&1 |
    sed -n 's/.*Collected : //p'
}
echo "encode instructions per pass ($loop, callgrind, avx2 path)"
echo "| file | instructions / pass | per input byte |"
echo "|---|---:|---:|"
for f in "$@"; do
  a=$(count 1 "$f")
  b=$(count 3 "$f")
  n=$(( (b - a) / 2 ))
  size=$(stat -c %s "$f")
  awk -v f="$(basename "$f" .safetensors)" -v n="$n" -v s="$size" 'BEGIN { printf "| %s | %d | %.0f |\n", f, n, n / s }'
done
