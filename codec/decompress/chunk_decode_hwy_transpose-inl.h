// codec/decompress/chunk_decode_hwy_transpose-inl.h — lane-major codes
// (step t, lane l at t * 32 + l) transposed, a block of 16 steps at a
// time, so that each lane's run of 16 codes lies in one 128-bit block
// (Transpose16), or, for 4-bit codes, packed two to a byte first and each
// lane's 8 bytes then in one 64-bit element (TransposePacked).
//
// A Highway "-inl" part of chunk_decode_hwy_int.cpp: no include guard;
// included once per Highway target from inside its int_hwy namespace,
// where hn, D8, V8, kN8 and kB are defined.
// Thread-safety: pure functions over their arguments.

// Steps t0..t0 + 15 of lane-major codes transposed, for the lanes of
// byte vector b: T[i] holds in its 128-bit block q the 16 steps of lane
// b * kN8 + 16q + i (byte, 16-, 32- and 64-bit interleaves inside each
// 128-bit block). lm must be readable for the 16 steps.
HWY_INLINE void Transpose16(const uint8_t* lm, uint64_t t0, size_t b, V8* T) {
  const D8 d8;
  const hn::Repartition<uint16_t, D8> d16;
  const hn::Repartition<uint32_t, D8> d32;
  const hn::Repartition<uint64_t, D8> d64;
  V8 R[16], P[16];
  for (int i = 0; i < 16; ++i) R[i] = hn::LoadU(d8, lm + (t0 + i) * 32 + b * kN8);
  // Bytes: P[2g + h] holds lanes 8h.. of steps 2g, 2g + 1.
  for (int q = 0; q < 8; ++q) {
    P[2 * q] = hn::InterleaveLower(d8, R[2 * q], R[2 * q + 1]);
    P[2 * q + 1] = hn::InterleaveUpper(d8, R[2 * q], R[2 * q + 1]);
  }
  // 16-bit: R[(gg * 2 + h) * 2 + h2] holds lanes 8h + 4h2.. of steps
  // 4gg..4gg + 3.
  for (int gg = 0; gg < 4; ++gg)
    for (int h = 0; h < 2; ++h) {
      const auto a = hn::BitCast(d16, P[(2 * gg) * 2 + h]), bb = hn::BitCast(d16, P[(2 * gg + 1) * 2 + h]);
      R[(gg * 2 + h) * 2] = hn::BitCast(d8, hn::InterleaveLower(d16, a, bb));
      R[(gg * 2 + h) * 2 + 1] = hn::BitCast(d8, hn::InterleaveUpper(d16, a, bb));
    }
  // 32-bit: P[((g3 * 2 + h) * 2 + h2) * 2 + h3] holds lanes
  // 8h + 4h2 + 2h3.. of steps 8g3..8g3 + 7.
  for (int g3 = 0; g3 < 2; ++g3)
    for (int hh = 0; hh < 4; ++hh) {
      const auto a = hn::BitCast(d32, R[(2 * g3) * 4 + hh]), bb = hn::BitCast(d32, R[(2 * g3 + 1) * 4 + hh]);
      P[(g3 * 4 + hh) * 2] = hn::BitCast(d8, hn::InterleaveLower(d32, a, bb));
      P[(g3 * 4 + hh) * 2 + 1] = hn::BitCast(d8, hn::InterleaveUpper(d32, a, bb));
    }
  // 64-bit: T[8h + 4h2 + 2h3 + h4] holds that lane's 16 steps.
  for (int hh = 0; hh < 8; ++hh) {
    const auto a = hn::BitCast(d64, P[hh]), bb = hn::BitCast(d64, P[8 + hh]);
    T[2 * hh] = hn::BitCast(d8, hn::InterleaveLower(d64, a, bb));
    T[2 * hh + 1] = hn::BitCast(d8, hn::InterleaveUpper(d64, a, bb));
  }
}

// Steps t0..t0 + 15 of lane-major 4-bit codes (one a byte) packed two
// to a byte (step t0 + 2k in the low nibble of byte k) and transposed, for
// the lanes of byte vector b: the lane b * kN8 + 16q + i has its 8 bytes in
// P[PackedVec(i)] at byte q * 16 + 8 (i & 1) (byte, 16- and 32-bit
// interleaves inside each 128-bit block). *high collects every code's
// bits (a code above 15 leaves bits 4-7 set; its lane's bytes are then
// wrong, and the caller refuses the chunk). lm must be readable for the
// 16 steps.
HWY_INLINE void TransposePacked(const uint8_t* lm, uint64_t t0, size_t b, V8* high, V8* P) {
  const D8 d8;
  const hn::Repartition<uint16_t, D8> d16;
  const hn::Repartition<uint32_t, D8> d32;
  V8 R[8], Q[8];
  for (int k = 0; k < 8; ++k) {
    const V8 lo = hn::LoadU(d8, lm + (t0 + 2 * k) * 32 + b * kN8);
    const V8 hi = hn::LoadU(d8, lm + (t0 + 2 * k + 1) * 32 + b * kN8);
    *high = hn::Or(*high, hn::Or(lo, hi));
    // (A 16-bit shift: a code of at most 15 stays in its byte.)
    R[k] = hn::Or(lo, hn::BitCast(d8, hn::ShiftLeft<4>(hn::BitCast(d16, hi))));
  }
  // Bytes: Q[2p + h1] holds lanes 8 h1.. of packed rows 2p, 2p + 1.
  for (int p = 0; p < 4; ++p) {
    Q[2 * p] = hn::InterleaveLower(d8, R[2 * p], R[2 * p + 1]);
    Q[2 * p + 1] = hn::InterleaveUpper(d8, R[2 * p], R[2 * p + 1]);
  }
  // 16-bit: R[(g * 2 + h1) * 2 + h2] holds lanes 8 h1 + 4 h2.. of packed
  // rows 4g..4g + 3.
  for (int g = 0; g < 2; ++g)
    for (int h1 = 0; h1 < 2; ++h1) {
      const auto a = hn::BitCast(d16, Q[(2 * g) * 2 + h1]), c = hn::BitCast(d16, Q[(2 * g + 1) * 2 + h1]);
      R[(g * 2 + h1) * 2] = hn::BitCast(d8, hn::InterleaveLower(d16, a, c));
      R[(g * 2 + h1) * 2 + 1] = hn::BitCast(d8, hn::InterleaveUpper(d16, a, c));
    }
  // 32-bit: P[(h1 * 2 + h2) * 2 + h3] holds lanes 8 h1 + 4 h2 + 2 h3 and
  // the next one, packed rows 0..7 each.
  for (int hh = 0; hh < 4; ++hh) {
    const auto a = hn::BitCast(d32, R[hh]), c = hn::BitCast(d32, R[4 + hh]);
    P[hh * 2] = hn::BitCast(d8, hn::InterleaveLower(d32, a, c));
    P[hh * 2 + 1] = hn::BitCast(d8, hn::InterleaveUpper(d32, a, c));
  }
}

// The vector of TransposePacked's output that holds lane 16q + i.
HWY_INLINE size_t PackedVec(uint32_t i) { return ((i >> 3) * 2 + ((i >> 2) & 1)) * 2 + ((i >> 1) & 1); }
