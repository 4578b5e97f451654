// codec/decompress/chunk_decode_hwy_lanes-inl.h — what the Highway int
// decoders (chunk_decode_hwy_tern.cpp, chunk_decode_hwy_krow.cpp) share
// per target: the 32 lane states of a stream as vectors, and the
// renormalization of one vector of lanes in lane order.
//
// A Highway "-inl" part: no include guard; included once per Highway
// target from inside those files' HWY_NAMESPACE, where hn is defined.
// Thread-safety: pure functions over their arguments.

// The 32 lane states (the stream's first 32 little-endian words of 4
// bytes) as kLanes / N vectors.
template <class DU>
HWY_INLINE void LoadLaneStates(DU du, const uint8_t* rans, hn::Vec<DU>* X) {
  constexpr size_t N = hn::MaxLanes(du);
  for (size_t v = 0; v < kLanes / N; ++v) {
    HWY_ALIGN uint32_t x0[N];
    for (size_t i = 0; i < N; ++i) x0[i] = load_elem(rans + 4 * (v * N + i), 4);
    X[v] = hn::Load(du, x0);
  }
}

// The states nx after one symbol of each lane, renormalized where `need`:
// the lanes in need take the next words at *wp in lane order (a
// prefix-count table indexes a lane permutation of the next N words), and
// *wp moves past them.
template <class DU, class M>
HWY_INLINE hn::Vec<DU> RenormLanes(DU du, M need, hn::Vec<DU> nx, const uint8_t** wp) {
  const hn::Rebind<uint16_t, DU> d16;
  const hn::RebindToSigned<DU> d;
  uint8_t mb[8] = {};
  hn::StoreMaskBits(du, need, mb);
  const auto words = hn::PromoteTo(du, hn::LoadU(d16, reinterpret_cast<const uint16_t*>(*wp)));
  const auto wv = hn::TableLookupLanes(words, hn::IndicesFromVec(du, hn::Load(d, hwy_words::kPrefix.v[mb[0]])));
  *wp += 2 * __builtin_popcount(mb[0]);
  return hn::IfThenElse(need, hn::Or(hn::ShiftLeft<16>(nx), wv), nx);
}
