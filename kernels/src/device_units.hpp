// Per-device facts the launchers ask for at every launch, read from the runtime once per device:
// per_device(cache, f), and the current device's compute units.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "dsv4/gpu/gpu.hpp"

namespace dsv4::kernels {

// f(device) for the current device, asked once per device (at least 1; `cache` holds 64 devices).
template <class F>
inline int64_t per_device(std::atomic<int>* cache, F f) {
  int dev = 0;
  if (hipGetDevice(&dev) != hipSuccess || dev < 0) dev = 0;
  if (dev < 64)
    if (const int n = cache[dev].load(std::memory_order_relaxed); n > 0) return n;
  const int n = std::max(f(dev), 1);
  if (dev < 64) cache[dev].store(n, std::memory_order_relaxed);
  return n;
}

// The current device's compute units.
inline int64_t compute_units() {
  static std::atomic<int> cache[64] = {};
  return per_device(cache, [](int dev) {
    hipDeviceProp_t prop{};
    return hipGetDeviceProperties(&prop, dev) == hipSuccess ? prop.multiProcessorCount : 1;
  });
}

}  // namespace dsv4::kernels
