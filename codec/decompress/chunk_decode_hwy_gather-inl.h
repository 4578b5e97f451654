// codec/decompress/chunk_decode_hwy_gather-inl.h — the table gathers of the
// Highway decoders (chunk_decode_hwy_int.cpp, _float.cpp, _tern.cpp,
// _krow.cpp): 32-bit elements at base[idx] (GatherI32) or at base + byte
// offset (GatherOff32), one per lane.
//
// On the AVX2 instance these are, by the template argument VG, vpgatherdd
// or eight scalar loads (their indexes taken from the vector in four 64-bit
// moves, the results inserted lane by lane); the decoders' entry points
// run the loop compiled for the process's form (vector_gathers(),
// simd_env.h). Scalar loads ran 1.03-1.11x faster per file on an AMD EPYC
// (Zen 4 class), vpgatherdd up to 1.12x on an Intel Xeon (Emerald Rapids)
// (docs/decoder-paths.md, "Scalar loads for the table gathers" and "Two
// gather forms, chosen per CPU"). A store of the indexes to memory followed
// by scalar reads (a store-forwarding stall) was no faster than
// vpgatherdd, and the int loop's 12-bit slot tables (int8 codes: 16 KiB a
// context, mostly in L2) keep vpgatherdd, which was 1-3% faster there.
// Other targets use Highway's GatherIndex / GatherOffset (NEON has no
// gather instruction: Highway loads lane by lane too).
//
// A Highway "-inl" part: no include guard; included once per Highway target
// from inside those files' HWY_NAMESPACE, where hn is defined.
// Thread-safety: pure functions over their arguments.

#if HWY_TARGET == HWY_AVX2
// The 32-bit elements at base + SCALE * o[i] (o non-negative; an unaligned
// load per lane).
template <size_t SCALE, class D>
HWY_INLINE hn::Vec<D> GatherLanes32(D /*d*/, const uint8_t* base, __m256i o) {
  const __m128i lo = _mm256_castsi256_si128(o), hi = _mm256_extracti128_si256(o, 1);
  const uint64_t a = static_cast<uint64_t>(_mm_cvtsi128_si64(lo)), b = static_cast<uint64_t>(_mm_extract_epi64(lo, 1));
  const uint64_t c = static_cast<uint64_t>(_mm_cvtsi128_si64(hi)), e = static_cast<uint64_t>(_mm_extract_epi64(hi, 1));
  const auto ld = [base](uint64_t off) {
    int32_t v;
    std::memcpy(&v, base + SCALE * static_cast<uint32_t>(off), 4);
    return v;
  };
  __m128i L = _mm_cvtsi32_si128(ld(a));
  L = _mm_insert_epi32(L, ld(a >> 32), 1);
  L = _mm_insert_epi32(L, ld(b), 2);
  L = _mm_insert_epi32(L, ld(b >> 32), 3);
  __m128i H = _mm_cvtsi32_si128(ld(c));
  H = _mm_insert_epi32(H, ld(c >> 32), 1);
  H = _mm_insert_epi32(H, ld(e), 2);
  H = _mm_insert_epi32(H, ld(e >> 32), 3);
  return hn::Vec<D>{_mm256_inserti128_si256(_mm256_castsi128_si256(L), H, 1)};
}
#endif

// base[idx[i]] for each lane i (idx non-negative). VG: vpgatherdd on the
// AVX2 instance (otherwise scalar loads); other targets ignore it.
template <bool VG, class D>
HWY_INLINE hn::Vec<D> GatherI32(D d, const int32_t* base, hn::Vec<D> idx) {
#if HWY_TARGET == HWY_AVX2
  if constexpr (!VG) return GatherLanes32<4>(d, reinterpret_cast<const uint8_t*>(base), idx.raw);
#endif
  return hn::GatherIndex(d, base, idx);
}

// The 32-bit element at byte offset off[i] of base, for each lane i (VG as
// above).
template <bool VG, class D>
HWY_INLINE hn::Vec<D> GatherOff32(D d, const int32_t* base, hn::Vec<D> off) {
#if HWY_TARGET == HWY_AVX2
  if constexpr (!VG) return GatherLanes32<1>(d, reinterpret_cast<const uint8_t*>(base), off.raw);
#endif
  return hn::GatherOffset(d, base, off);
}
