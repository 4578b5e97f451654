// cuda/warp_group.cuh — the lane group of codec/common/lane_group.h as one CUDA
// warp: thread l of the warp is lane l and holds only its own lane's values.
// Renormalization takes each renormalizing lane's word at the stream
// position plus the number of renormalizing lanes below it (ballot and
// prefix count), which is the word the host group's lane-order loop gives
// it. Every call is made by all 32 threads of the warp (the decoders'
// control flow outside each() is uniform).
#pragma once

#include <cstdint>

#include "lane_group.h"

namespace wcodec::gpu {

template <class T>
struct WarpLane {
  T v;
  __device__ T& operator[](uint32_t) { return v; }
  __device__ const T& operator[](uint32_t) const { return v; }
};

struct WarpGroup {
  template <class T>
  using Lanes = WarpLane<T>;
  static constexpr unsigned kAll = 0xFFFFFFFFu;
  uint32_t lane;

  template <class F>
  __device__ void each(F&& f) {
    f(lane);
  }
  template <class F>
  __device__ bool any(F&& f) {
    return __any_sync(kAll, static_cast<bool>(f(lane))) != 0;
  }
  template <class F>
  __device__ uint32_t max(F&& f) {
    return __reduce_max_sync(kAll, static_cast<uint32_t>(f(lane)));
  }
  template <class F>
  __device__ void renorm(Lanes<uint32_t>& x, WordSource& ws, F&& active) {
    const bool need = active(lane) && x.v < kRansL;
    const uint32_t mask = __ballot_sync(kAll, need);
    ballot_renorm_lane(x.v, need, mask, lane, ws);
    ballot_advance(ws, mask);
  }
  template <class T>
  __device__ void butterfly_add(Lanes<T>& v, uint32_t m) {
    for (; m < kLanes; m <<= 1) v.v += __shfl_xor_sync(kAll, v.v, m);
  }
  __device__ void sync() { __syncwarp(); }
  template <class F>
  __device__ void one(F&& f) {
    if (lane == 0) f();
  }
};

}  // namespace wcodec::gpu
