// codec/common/cpu.cpp — the decoder paths (include/wcodec/cpu.h): CPU
// feature checks (x86-64: AVX2 and AVX-512 VBMI2; aarch64: NEON), the WCODEC_CPU / WCODEC_NO_SIMD environment variables, the
// CPU model name.
// Thread-safety: the process's answers are function-local statics, computed
// once; resolve_cpu_path is pure.
#include "wcodec/cpu.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "sanitizer.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace wcodec {

namespace {

#if defined(__x86_64__)
// The CPU features Highway's AVX2 target needs (Highway 1.0: its SSE4
// group, SSSE3, SSE4.1, SSE4.2, PCLMUL and AES, plus AVX, AVX2, FMA, F16C,
// BMI, BMI2, LZCNT and MOVBE), and the OS saving the YMM registers. The
// check is the codec's own rather than hwy::SupportedTargets(): that call
// needs libhwy.so, whose static initializer times the clock (a few
// milliseconds) at every start of every process that loads it.
bool x86_avx2_target() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const unsigned need1 = 1u << 0 | 1u << 1 | 1u << 9 | 1u << 12 | 1u << 19 | 1u << 20 | 1u << 22 | 1u << 25 |
                         1u << 27 | 1u << 28 | 1u << 29;  // SSE3 PCLMUL SSSE3 FMA SSE4.1 SSE4.2 MOVBE AES OSXSAVE AVX F16C
  if ((c & need1) != need1) return false;
  unsigned xlo, xhi;
  __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  if ((xlo & 6u) != 6u) return false;  // XMM and YMM state
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, a, b, c, d);
  const unsigned need7 = 1u << 3 | 1u << 5 | 1u << 8;  // BMI AVX2 BMI2
  if ((b & need7) != need7) return false;
  if (__get_cpuid_max(0x80000000u, nullptr) < 0x80000001u) return false;
  __get_cpuid(0x80000001u, &a, &b, &c, &d);
  return (c & (1u << 5)) != 0;  // LZCNT
}
#endif

}  // namespace

const char* cpu_path_name(CpuPath p) {
  switch (p) {
    case CpuPath::kScalar: return "scalar";
    case CpuPath::kAvx2: return "avx2";
    case CpuPath::kAvx512: return "avx512";
    case CpuPath::kNeon: return "neon";
  }
  return "scalar";
}

bool parse_cpu_path(const char* s, CpuPath* out) {
  if (!s) return false;
  std::string v;
  for (const char* c = s; *c; ++c) v += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
  static const struct {
    const char* name;
    CpuPath p;
  } kNames[] = {{"scalar", CpuPath::kScalar}, {"avx2", CpuPath::kAvx2}, {"avx512", CpuPath::kAvx512},
                {"neon", CpuPath::kNeon}};
  for (const auto& n : kNames)
    if (v == n.name) {
      *out = n.p;
      return true;
    }
  return false;
}

bool cpu_path_supported(CpuPath p) {
  switch (p) {
    case CpuPath::kScalar: return true;
    case CpuPath::kAvx2: {
#if defined(__x86_64__)
      // The Highway AVX2 target (AVX2, BMI2, FMA, F16C, ...).
      static const bool ok = x86_avx2_target();
      return ok;
#else
      return false;
#endif
    }
    case CpuPath::kAvx512: {
#if defined(__x86_64__)
      static const bool ok = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vbmi2");
      }();
      return ok;
#else
      return false;
#endif
    }
    case CpuPath::kNeon: {
#if defined(__aarch64__)
      // The Highway NEON target: on A64 Highway requires AES too (the
      // codec's check, for the reason given at x86_avx2_target).
      static const bool ok = (getauxval(AT_HWCAP) & HWCAP_AES) != 0;
      return ok;
#else
      return false;
#endif
    }
  }
  return false;
}

CpuPath cpu_path_best() {
  if (cpu_path_supported(CpuPath::kAvx512)) return CpuPath::kAvx512;
  if (cpu_path_supported(CpuPath::kAvx2)) return CpuPath::kAvx2;
  if (cpu_path_supported(CpuPath::kNeon)) return CpuPath::kNeon;
  return CpuPath::kScalar;
}

CpuPathChoice resolve_cpu_path(const char* cpu, const char* no_simd) {
  CpuPathChoice c{cpu_path_best(), cpu_path_best(), false, {}};
  if (no_simd && *no_simd && std::strcmp(no_simd, "0") != 0) {
    c.effective = c.requested = CpuPath::kScalar;
    c.forced = true;
    return c;
  }
  if (!cpu || !*cpu) return c;
  std::string v;
  for (const char* s = cpu; *s; ++s) v += static_cast<char>(std::tolower(static_cast<unsigned char>(*s)));
  if (v == "auto") return c;
  CpuPath p;
  if (!parse_cpu_path(cpu, &p)) {
    c.note = std::string("WCODEC_CPU=") + cpu + " is not a decoder path (scalar, avx2, avx512, neon, auto); using " +
             cpu_path_name(c.effective);
    return c;
  }
  c.requested = p;
  c.forced = true;
  if (cpu_path_supported(p)) {
    c.effective = p;
  } else {
    // The best path this CPU runs: avx512 -> avx2 on AVX2-only CPUs, the
    // x86 paths -> neon on Arm, neon -> the best x86 path on x86-64.
    c.effective = cpu_path_best();
    c.note = std::string("WCODEC_CPU=") + cpu + ": this CPU or build cannot run the " + cpu_path_name(p) +
             " decoders; using " + cpu_path_name(c.effective);
  }
  return c;
}

const char* gather_form_name(GatherForm f) { return f == GatherForm::kVector ? "vpgatherdd" : "scalar loads"; }

GatherForm resolve_gather_form(const char* vendor, const char* gds, const char* env, bool asan) {
  if (env && !std::strcmp(env, "vector")) return GatherForm::kVector;
  if (env && !std::strcmp(env, "scalar")) return GatherForm::kScalarLoads;
  if (asan || !vendor || std::strcmp(vendor, "GenuineIntel") != 0 || !gds) return GatherForm::kScalarLoads;
  return !std::strncmp(gds, "Not affected", 12) || !std::strncmp(gds, "Vulnerable", 10) ? GatherForm::kVector
                                                                                          : GatherForm::kScalarLoads;
}

namespace {
GatherForm process_gather_form() {
  std::string vendor;
#if defined(__x86_64__)
  unsigned a, r[3];
  if (__get_cpuid(0, &a, &r[0], &r[2], &r[1])) vendor.assign(reinterpret_cast<const char*>(r), 12);
#endif
  std::string gds;
  std::ifstream f("/sys/devices/system/cpu/vulnerabilities/gather_data_sampling");
  const bool have = static_cast<bool>(std::getline(f, gds));
  return resolve_gather_form(vendor.c_str(), have ? gds.c_str() : nullptr, std::getenv("WCODEC_GATHER"),
                             kAddressSanitizer);
}
}  // namespace

const CpuPathChoice& cpu_path_choice() {
  static const CpuPathChoice c = resolve_cpu_path(std::getenv("WCODEC_CPU"), std::getenv("WCODEC_NO_SIMD"));
  return c;
}

GatherForm gather_form() {
  static const GatherForm f = process_gather_form();
  return f;
}

const std::string& cpu_model() {
  static const std::string m = [] {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line)) {
      if (line.compare(0, 10, "model name") != 0) continue;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      size_t b = colon + 1;
      while (b < line.size() && line[b] == ' ') ++b;
      if (b < line.size()) return line.substr(b);
    }
#if defined(__x86_64__) || defined(__i386__)
    unsigned r[12] = {};
    if (__get_cpuid_max(0x80000000u, nullptr) >= 0x80000004u) {
      for (unsigned i = 0; i < 3; ++i) __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
      std::string s(reinterpret_cast<const char*>(r), 48);
      s = s.c_str();
      const size_t b = s.find_first_not_of(' ');
      if (b != std::string::npos) return s.substr(b);
    }
#endif
    return std::string("unknown");
  }();
  return m;
}

}  // namespace wcodec
