// codec/common/raw_vector.h — vectors whose resize leaves new elements
// default-initialised (uninitialised for arithmetic types), for buffers the
// code writes in full right after sizing them: zero-filling a tensor-sized
// buffer first costs a pass over memory the fill replaces anyway.
#pragma once

#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace wcodec {

template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};

template <typename T>
using RawVector = std::vector<T, DefaultInitAllocator<T>>;

// A thread's scratch bytes, reused call after call. Growing keeps nothing
// (no copy, no zero fill: every user writes what it reads) and takes at
// least half again the old size, so a decoder whose chunks grow a little at
// a time maps new memory a few times only. A std::vector grown by resize()
// zero-fills the new part and copies the old: on a fresh mount's first read
// of isnet-medium.f16 the lane-major buffers grew 27 times, and those page
// faults (zero fill and copy into never-touched pages) were over half of the
// daemon's faults (perf record -e page-faults).
class ScratchBytes {
 public:
  // At least n bytes, contents undefined.
  uint8_t* get(size_t n) {
    if (n > cap_) {
      const size_t c = n > cap_ + cap_ / 2 ? n : cap_ + cap_ / 2;
      p_.reset();  // before allocating: the old block may be reused
      p_.reset(new uint8_t[c]);  // default-initialised: not written
      cap_ = c;
    }
    return p_.get();
  }

 private:
  std::unique_ptr<uint8_t[]> p_;
  size_t cap_ = 0;
};

}  // namespace wcodec
