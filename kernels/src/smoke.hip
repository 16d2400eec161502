// smoke kernels: out = in * scale + bias, with planted faults for the fixtures' own tests.
#include "dsv4/gpu/gpu.hpp"
#include "dsv4/kernels/smoke.hpp"

namespace dsv4::kernels::smoke {
namespace {

__global__ void affine_kernel(const float* in, float* out, size_t n, float scale, float bias,
                              int fault, size_t at) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const Fault f = static_cast<Fault>(fault);
  if (f == Fault::kSpin && i == 0) {
    // Bounded, so a process that dies without its context being torn down frees the device.
    const long long t0 = clock64();
    while (clock64() - t0 < (1ll << 38)) {
    }
  }
  if (i >= n) return;
  if (f == Fault::kSkip && i == at) return;
  size_t src = i;
  if (f == Fault::kSwap && i == at && at + 1 < n) src = at + 1;
  if (f == Fault::kSwap && i == at + 1 && at + 1 < n) src = at;
  float v = in[src] * scale + bias;
  if (i == at && f == Fault::kNaN) v = __int_as_float(0x7fc00000);
  if (i == at && f == Fault::kOneUlp) v = __int_as_float(__float_as_int(v) + 1);
  out[i] = v;
  if (i == n - 1 && f == Fault::kPastEnd) out[n] = v;
  if (i == 0 && f == Fault::kBeforeBegin) out[-1] = v;
}

}  // namespace

void affine(const float* in, float* out, size_t n, float scale, float bias, Fault fault, size_t at,
            gpu::Stream s) {
  constexpr unsigned kBlock = 256;
  gpu::launch(affine_kernel, dim3(gpu::ceil_div(n, kBlock)), dim3(kBlock), 0,
              static_cast<hipStream_t>(s), in, out, n, scale, bias, static_cast<int>(fault), at);
}

}  // namespace dsv4::kernels::smoke
