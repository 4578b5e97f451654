// codec/src/raw_vector.h — vectors whose resize leaves new elements
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

}  // namespace wcodec
