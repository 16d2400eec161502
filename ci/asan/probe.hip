// The planted fault of the weekly GPU AddressSanitizer job (ci/asan-qualify.sh): `valid` writes
// every element of a device buffer, `invalid` one element past its end. Under a working GPU ASan
// the second must stop with a heap-buffer-overflow report on the device.
#include <hip/hip_runtime.h>

#include <cstdio>
#include <cstring>

__global__ void fill(int* out, int n, int extra) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n + extra) out[i] = i;
}

int main(int argc, char** argv) {
  if (argc != 2 || (std::strcmp(argv[1], "valid") != 0 && std::strcmp(argv[1], "invalid") != 0)) {
    std::fprintf(stderr, "usage: asan-probe valid|invalid\n");
    return 2;
  }
  const int n = 1000;
  const int extra = std::strcmp(argv[1], "invalid") == 0 ? 1 : 0;
  int* out = nullptr;
  if (hipMalloc(&out, n * sizeof(int)) != hipSuccess) {
    std::fprintf(stderr, "asan-probe: hipMalloc failed\n");
    return 3;
  }
  hipLaunchKernelGGL(fill, dim3((n + 255) / 256), dim3(256), 0, 0, out, n, extra);
  if (hipDeviceSynchronize() != hipSuccess) {
    std::fprintf(stderr, "asan-probe: the kernel failed\n");
    return 3;
  }
  (void)hipFree(out);
  std::printf("asan-probe: %s write done\n", argv[1]);
  return 0;
}
