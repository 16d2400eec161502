// SplitMix64 (Steele, Lea, Flood 2014): the seeded stream behind jitter, fault picks and data.
#pragma once

#include <cstdint>

namespace dsv4::eval {

// The finaliser applied to state + golden gamma: a stateless 64-bit hash of `z`.
inline uint64_t splitmix64_mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    const uint64_t out = splitmix64_mix(state);
    state += 0x9e3779b97f4a7c15ull;
    return out;
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

}  // namespace dsv4::eval
