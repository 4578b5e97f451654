#!/usr/bin/env bash
# Runs every test: installs dependencies, builds the release and the
# ASan/UBSan configurations, runs CTest in both, cross-builds the codec and
# its suites for aarch64 and runs them under qemu-user
# (scripts/test_aarch64.sh: a subset, see there), and prints one summary line
#   N passed, N failed
# Exits non-zero if a build failed, any test failed, or no test ran.
# Before the builds it builds llama.cpp's CPU tools once per machine, outside
# the clone (scripts/llama_cpp.sh: ~/.cache/wcodecfs/llama.cpp-<version>),
# and exports WCODEC_LLAMA_CPP for the tests that run llama.cpp on the mount;
# likewise SmolLM2 (scripts/smollm2.sh, WCODEC_SMOLLM2_HF).
# Environment:
#   WCODEC_TEST_CONFIGS  configurations to run, space or comma separated
#                        (default "release asan aarch64")
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

configs=${WCODEC_TEST_CONFIGS:-release asan aarch64}
configs=${configs//,/ }

# Free disk space, printed before and after each stage: a build that runs
# out of it fails in ways that name neither the disk nor the stage.
disk_report() {
  local dirs=() d
  for d in build build-asan build-aarch64; do [[ -d $d ]] && dirs+=("$d"); done
  echo "test: disk ($1): $(df -Ph . | awk 'NR == 2 { print $4 " free of " $2 }') here," \
       "$(df -Ph "${TMPDIR:-/tmp}" | awk 'NR == 2 { print $4 }') free in ${TMPDIR:-/tmp}" \
       "${dirs[*]:+; builds: $(du -sh "${dirs[@]}" 2>/dev/null | awk '{ printf "%s %s  ", $2, $1 }')}"
}

t_start=$SECONDS
disk_report start
bash scripts/install-deps.sh
echo "test: dependencies ready ($((SECONDS - t_start)) s)"

total_passed=0
total_failed=0
problems=()

# llama.cpp, the GGUF client of tests/test_mount_llama_cpp.cpp (release and
# ASan runs); the aarch64 run has no mount tests.
if [[ " $configs " == *" release "* || " $configs " == *" asan "* ]]; then
  echo "=== test: llama.cpp (scripts/llama_cpp.sh) ==="
  t0=$SECONDS
  if llama_dir=$(bash scripts/llama_cpp.sh); then
    export WCODEC_LLAMA_CPP=$llama_dir
    echo "test: llama.cpp tools in $WCODEC_LLAMA_CPP ($((SECONDS - t0)) s)"
  else
    problems+=("llama.cpp: scripts/llama_cpp.sh failed")
  fi
  # SmolLM2-135M-Instruct as a Hugging Face directory (a BPE tokenizer), for
  # the GGUF view's tests (tests/test_fs_hf_gguf_bpe.cpp); once per machine.
  echo "=== test: SmolLM2 (scripts/smollm2.sh) ==="
  t0=$SECONDS
  if smol_dir=$(bash scripts/smollm2.sh); then
    export WCODEC_SMOLLM2_HF=$smol_dir
    echo "test: SmolLM2 in $WCODEC_SMOLLM2_HF ($((SECONDS - t0)) s)"
  else
    problems+=("SmolLM2: scripts/smollm2.sh failed")
  fi
fi
# The names of a configuration's failed tests go into the closing lines
# too: CI keeps only the tail of this output.
# With each name, the last lines of that test's output (from the build
# directory's Testing/Temporary/LastTest.log), printed after every stage so
# that they are in the tail CI keeps.
failure_tails=()
note_failed_tests() {
  local config=$1 log=$2 build_dir=$3 name test tail_text
  local last="$build_dir/Testing/Temporary/LastTest.log"
  while IFS= read -r name; do
    problems+=("$config: FAILED $name")
    # "730 - python.Module (Failed)" -> python.Module
    test=$(sed -E 's/^[0-9]+ - //; s/ \([^)]*\)$//' <<<"$name")
    [[ -f "$last" ]] || continue
    tail_text=$(awk -v t="$test" '
        $0 ~ /^[0-9]+\/[0-9]+ Test: / { sub(/^[0-9]+\/[0-9]+ Test: /, ""); on = ($0 == t); next }
        on && /^<end of output>/ { on = 0 }
        on { print }' "$last" | tail -n 80)
    failure_tails+=("=== test: $config: the last lines of $test's output ===
$tail_text")
  done < <(sed -n '/The following tests FAILED:/,$p' "$log" |
           grep -E '^[[:space:]]+[0-9]+ - ' | sed -E 's/^[[:space:]]+//' || true)
}

log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT

for config in $configs; do
  case "$config" in
    release) build_dir=build ;;
    asan)    build_dir=build-asan ;;
    aarch64) build_dir=build-aarch64 ;;
    *) echo "test: unknown configuration '$config' (expected release, asan or aarch64)" >&2; exit 2 ;;
  esac

  if [[ "$config" == aarch64 ]]; then
    # Its own script: packages, cross build, ctest under qemu; it ends with
    # the same "N passed, N failed" line.
    echo "=== test: aarch64 (scripts/test_aarch64.sh) ==="
    t0=$SECONDS
    log="$log_dir/aarch64.log"
    rc=0
    bash scripts/test_aarch64.sh 2>&1 | tee "$log" || rc=$?
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1 || true)
    if [[ -z "$line" ]]; then
      problems+=("aarch64: build failed or no tests ran (exit $rc)")
      continue
    fi
    passed=${line%% passed*}
    failed=$(sed -E 's/.* ([0-9]+) failed$/\1/' <<<"$line")
    echo "test: aarch64: $passed passed, $failed failed (exit $rc, $((SECONDS - t0)) s)"
    total_passed=$((total_passed + passed))
    total_failed=$((total_failed + failed))
    note_failed_tests aarch64 "$log" build-aarch64
    if [[ "$passed" -eq 0 ]]; then
      problems+=("aarch64: no tests ran")
    elif [[ "$failed" -eq 0 && "$rc" -ne 0 ]]; then
      problems+=("aarch64: exited $rc")
    fi
    continue
  fi

  echo "=== test: building $config ==="
  blog="$log_dir/build-$config.log"
  if ! bash scripts/build.sh "$config" 2>&1 | tee "$blog"; then
    echo "test: build of $config FAILED" >&2
    if grep -q 'No space left on device' "$blog"; then
      disk_report "$config build failed"
      problems+=("$config: build failed: no space left on device ($(df -Ph . | awk 'NR == 2 { print $4 }') free now)")
    else
      problems+=("$config: build failed")
    fi
    continue
  fi
  disk_report "$config built"

  echo "=== test: running ctest in $build_dir/ ==="
  # With -j2 ctest starts the tests it knows to be long first (its cost
  # data); a new build directory gets the durations of a recent CI run
  # (tests/ctest-costs-*.txt), so that the python and real-file suites do not
  # start last and run alone.
  costs="$build_dir/Testing/Temporary/CTestCostData.txt"
  if [[ ! -f "$costs" && -f "tests/ctest-costs-$config.txt" ]]; then
    mkdir -p "$(dirname "$costs")"
    cp "tests/ctest-costs-$config.txt" "$costs"
  fi
  t0=$SECONDS
  log="$log_dir/ctest-$config.log"
  rc=0
  if [[ "$config" == asan ]]; then
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir "$build_dir" --output-on-failure -j2 2>&1 | tee "$log" || rc=$?
  else
    ctest --test-dir "$build_dir" --output-on-failure -j2 2>&1 | tee "$log" || rc=$?
  fi

  # ctest ends with "100% tests passed, 0 tests failed out of Y" or
  # "NN% tests passed, X tests failed out of Y".
  summary=$(grep -E '[0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
  if [[ -z "$summary" ]]; then
    echo "test: $config: no ctest summary line (no tests ran?)" >&2
    problems+=("$config: no tests ran")
    continue
  fi
  failed=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$summary")
  total=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$summary")
  passed=$((total - failed))
  echo "test: $config: $passed passed, $failed failed (ctest exit $rc, $((SECONDS - t0)) s)"
  # Skipped tests say why (GPU tests without a device); show it here.
  if [[ -x "$build_dir/tests/test_gpu_decoder" ]]; then
    why=$("$build_dir/tests/test_gpu_decoder" 2>&1 | grep -m1 -o 'GPU tests did not run: .*' || true)
    [[ -n "$why" ]] && echo "test: $config: SKIPPED: $why"
  fi
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  note_failed_tests "$config" "$log" "$build_dir"
  if [[ "$total" -eq 0 ]]; then
    problems+=("$config: no tests ran")
  elif [[ "$failed" -eq 0 && "$rc" -ne 0 ]]; then
    problems+=("$config: ctest exited $rc")
  fi
done

disk_report end
for t in "${failure_tails[@]+"${failure_tails[@]}"}"; do
  echo "$t"
done
for p in "${problems[@]+"${problems[@]}"}"; do
  echo "test: problem: $p" >&2
done
echo "test: all stages took $((SECONDS - t_start)) s"
echo "$total_passed passed, $total_failed failed"

if [[ $total_failed -ne 0 || $total_passed -eq 0 || ${#problems[@]} -ne 0 ]]; then
  exit 1
fi
