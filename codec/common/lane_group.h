// codec/common/lane_group.h — the 32 lanes of a chunk as a group, so that one
// decoder body serves the CPU reference decoder and the CUDA warp kernel.
//
// A chunk's stream has 32 lanes (chunk_model.h): each lane decodes its own
// rectangle, and the lanes share one word stream, read in lane order within
// each symbol slot. The decoders in chunk_decode.h are written once, as
// templates over a lane group G:
//   G::Lanes<T>           a value per lane; v[l] is lane l's (on the device a
//                         thread holds only its own lane's and ignores l);
//   g.each(f)             runs f(l) for every lane (device: f(own lane));
//   g.any(f)              whether f(l) holds for some lane (uniform result);
//   g.max(f)              the largest f(l) (uniform);
//   g.renorm(x, ws, act)  rANS renormalization of every lane with act(l),
//                         taking words from ws in lane order;
//   g.butterfly_add(v, m) for m, 2m, ..., 16: v[l] += v[l ^ m] (all lanes at
//                         once), leaving in every lane the sum over the lanes
//                         that agree with it on the bits below m;
//   g.sync()              orders the lanes' memory writes before what follows
//                         (device: __syncwarp);
//   g.one(f)              runs f() once (device: lane 0).
// Code between two group calls may read and write only its own lane's values
// and memory the lane owns; anything another lane wrote is read after a
// sync(). HostGroup runs the lanes one after another in one thread and so is
// the reference for the warp: renorm in lane order reads exactly the words a
// warp takes with a ballot and a prefix count. The CUDA group is
// cuda/warp_group.cuh.
// Thread-safety: a group is used by one decode at a time.
#pragma once

#include <cstdint>

#include "hd.h"
#include "rans.h"

namespace wcodec {

WC_HD inline uint32_t popcount32(uint32_t v) {
#ifdef __CUDA_ARCH__
  return static_cast<uint32_t>(__popc(v));
#else
  return static_cast<uint32_t>(__builtin_popcount(v));
#endif
}

// Renormalization as a warp does it, from the ballot `mask` of the lanes
// that renormalize (bit l: lane l): lane `lane` takes the word at the stream
// position plus the number of renormalizing lanes below it; then
// ballot_advance moves the (uniform) position past all of them. Same words
// as rans_renorm called in lane order.
WC_HD inline void ballot_renorm_lane(uint32_t& x, bool need, uint32_t mask, uint32_t lane, const WordSource& ws) {
  const uint32_t idx = ws.pos + popcount32(mask & ((1u << lane) - 1u));
  if (need && idx < ws.n)
    x = (x << 16) | static_cast<uint32_t>(ws.p[2 * idx]) | (static_cast<uint32_t>(ws.p[2 * idx + 1]) << 8);
}
WC_HD inline void ballot_advance(WordSource& ws, uint32_t mask) {
  const uint32_t taken = popcount32(mask);
  ws.bad |= ws.pos + taken > ws.n;
  ws.pos += taken;
}

template <class T>
struct HostLanes {
  T v[kLanes];
  WC_HD T& operator[](uint32_t l) { return v[l]; }
  WC_HD const T& operator[](uint32_t l) const { return v[l]; }
};

struct HostGroup {
  template <class T>
  using Lanes = HostLanes<T>;

  template <class F>
  WC_HD void each(F&& f) {
    for (uint32_t l = 0; l < kLanes; ++l) f(l);
  }
  template <class F>
  WC_HD bool any(F&& f) {
    bool r = false;
    for (uint32_t l = 0; l < kLanes; ++l) r |= static_cast<bool>(f(l));
    return r;
  }
  template <class F>
  WC_HD uint32_t max(F&& f) {
    uint32_t m = 0;
    for (uint32_t l = 0; l < kLanes; ++l) {
      const uint32_t v = f(l);
      m = v > m ? v : m;
    }
    return m;
  }
  template <class F>
  WC_HD void renorm(Lanes<uint32_t>& x, WordSource& ws, F&& active) {
    for (uint32_t l = 0; l < kLanes; ++l)
      if (active(l)) rans_renorm(x[l], ws);
  }
  template <class T>
  WC_HD void butterfly_add(Lanes<T>& v, uint32_t m) {
    for (; m < kLanes; m <<= 1) {
      T t[kLanes];
      for (uint32_t l = 0; l < kLanes; ++l) t[l] = v[l] + v[l ^ m];
      for (uint32_t l = 0; l < kLanes; ++l) v[l] = t[l];
    }
  }
  WC_HD void sync() {}
  template <class F>
  WC_HD void one(F&& f) {
    f();
  }
};

}  // namespace wcodec
