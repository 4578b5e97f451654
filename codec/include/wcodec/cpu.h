// codec/include/wcodec/cpu.h — the decoder paths: which vector decoders a
// process uses (scalar reference; AVX2, AVX-512 on x86-64; NEON on
// aarch64), chosen once from the CPU and the WCODEC_CPU environment
// variable, and the CPU's model name, so that tools can print what a
// measurement ran on.
//
// WCODEC_CPU=scalar|avx2|avx512|neon|auto forces a path (case-insensitive);
// WCODEC_NO_SIMD=1 (set, non-empty, not "0") is an alias of
// WCODEC_CPU=scalar and wins over WCODEC_CPU. A forced path this CPU cannot
// run, or an unknown value, falls back to the best path the CPU runs; the
// codec never prints: cpu_path_note() says why the effective path differs
// from the requested one, for the tool to warn.
// Thread-safety: everything is computed once (function-local statics) and
// safe from any thread.
#pragma once

#include <string>

namespace wcodec {

enum class CpuPath { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kNeon = 3 };

// "scalar", "avx2", "avx512", "neon".
const char* cpu_path_name(CpuPath p);
// Parses a path name (case-insensitive; "auto" and "" are not paths).
bool parse_cpu_path(const char* s, CpuPath* out);
// Whether this build and CPU can run path p (avx2, avx512: x86-64 builds
// only; neon: aarch64 builds only).
bool cpu_path_supported(CpuPath p);
// The best path this CPU runs (avx512, avx2, neon, scalar: the first
// supported).
CpuPath cpu_path_best();

// How the environment resolves to a path; pure, for tests. cpu: the value
// of WCODEC_CPU (null: unset), no_simd: the value of WCODEC_NO_SIMD.
struct CpuPathChoice {
  CpuPath effective;
  CpuPath requested;  // = effective when nothing (valid) was requested
  bool forced;        // a valid path was requested
  std::string note;   // empty, or why effective != requested / the value was ignored
};
CpuPathChoice resolve_cpu_path(const char* cpu, const char* no_simd);

// The process's choice (from the environment, read once).
const CpuPathChoice& cpu_path_choice();
// The effective decoder path.
inline CpuPath cpu_path() { return cpu_path_choice().effective; }
inline const char* cpu_path_name() { return cpu_path_name(cpu_path()); }
// The note of cpu_path_choice() (empty when the request was honoured).
inline const std::string& cpu_path_note() { return cpu_path_choice().note; }

// How the x86 vector decoders (the avx2 path's Highway decoders, the
// avx512 path's loops) read their tables (8 or 16 lanes of 32-bit
// entries): one vpgatherdd, or a scalar load per lane. Scalar loads were
// 3-16% faster per file on an AMD EPYC (Zen 4 class); vpgatherdd up to
// 1.12x (avx2) and 1.37x (avx512) faster on an Intel Xeon (Emerald Rapids)
// with no Gather Data Sampling microcode, which slows the instruction on
// the Intel cores it affects (Skylake to Ice Lake, Tiger Lake). vpgatherdd where the CPU is Intel and
// the kernel reports it not slowed by that microcode
// (/sys/devices/system/cpu/vulnerabilities/gather_data_sampling: "Not
// affected", or "Vulnerable..." with no mitigation); scalar loads
// elsewhere, and in AddressSanitizer builds, whose checks see every scalar
// load's index but nothing inside vpgatherdd. WCODEC_GATHER=vector|scalar
// forces one (a test and measuring knob; any other value is ignored). Both
// forms give the same bytes.
enum class GatherForm { kScalarLoads = 0, kVector = 1 };
// "scalar loads", "vpgatherdd".
const char* gather_form_name(GatherForm f);
// Pure, for tests: vendor: the cpuid vendor string ("GenuineIntel", ...),
// gds: the sysfs line (null: no such file), env: WCODEC_GATHER (null:
// unset), asan: an AddressSanitizer build.
GatherForm resolve_gather_form(const char* vendor, const char* gds, const char* env, bool asan = false);
// The process's form (computed with cpu_path_choice(); meaningful on the
// avx2 path of x86-64 builds, where it is used).
GatherForm gather_form();

// The CPU's model name (/proc/cpuinfo "model name", else the cpuid brand
// string, else "unknown").
const std::string& cpu_model();

}  // namespace wcodec
