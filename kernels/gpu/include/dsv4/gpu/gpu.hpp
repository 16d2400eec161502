// Portability layer for kernel sources: HIP under hipcc, HIP names mapped to CUDA under nvcc,
// host-only stubs (every runtime call reports "no GPU backend") when compiled as plain C++.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "dsv4/gpu/runtime.hpp"

#if defined(__HIPCC__) || defined(__HIP__)
#define DSV4_GPU_HIP 1
// clang-format off
#include <hip/hip_runtime.h>
#include <hip/hip_cooperative_groups.h>  // after the runtime, whose names it uses
// clang-format on
#elif defined(__CUDACC__)
#define DSV4_GPU_CUDA 1
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#elif defined(DSV4_GPU_HOST_ONLY)
#define DSV4_GPU_NONE 1
#else
#error \
    "dsv4/gpu/gpu.hpp: compile kernel sources with hipcc, nvcc, or as C++ with DSV4_GPU_HOST_ONLY"
#endif

// Unrolling hint for kernel loops, `DSV4_UNROLL for (...)`: `#pragma unroll` on the GPU backends,
// nothing in the host-only build (where g++ would warn about an unknown pragma).
#if DSV4_GPU_NONE
#define DSV4_UNROLL
#else
#define DSV4_UNROLL _Pragma("unroll")
#endif

// ---------------------------------------------------------------------------------------------
// CUDA: the HIP runtime names the project uses, as type aliases and inline forwarding functions.
// ---------------------------------------------------------------------------------------------
#if DSV4_GPU_CUDA
using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
using hipGraph_t = cudaGraph_t;
using hipGraphExec_t = cudaGraphExec_t;
using hipGraphNode_t = cudaGraphNode_t;
using hipDeviceProp_t = cudaDeviceProp;
using hipMemcpyKind = cudaMemcpyKind;
using hipStreamCaptureMode = cudaStreamCaptureMode;

inline constexpr hipError_t hipSuccess = cudaSuccess;
inline constexpr hipError_t hipErrorNoDevice = cudaErrorNoDevice;
inline constexpr hipError_t hipErrorInvalidValue = cudaErrorInvalidValue;
inline constexpr hipError_t hipErrorNotReady = cudaErrorNotReady;
inline constexpr hipMemcpyKind hipMemcpyHostToDevice = cudaMemcpyHostToDevice;
inline constexpr hipMemcpyKind hipMemcpyDeviceToHost = cudaMemcpyDeviceToHost;
inline constexpr hipMemcpyKind hipMemcpyDeviceToDevice = cudaMemcpyDeviceToDevice;
inline constexpr hipMemcpyKind hipMemcpyDefault = cudaMemcpyDefault;
inline constexpr hipStreamCaptureMode hipStreamCaptureModeGlobal = cudaStreamCaptureModeGlobal;
inline constexpr hipStreamCaptureMode hipStreamCaptureModeThreadLocal =
    cudaStreamCaptureModeThreadLocal;
inline constexpr hipStreamCaptureMode hipStreamCaptureModeRelaxed = cudaStreamCaptureModeRelaxed;
inline constexpr unsigned hipStreamNonBlocking = cudaStreamNonBlocking;

inline const char* hipGetErrorString(hipError_t e) { return cudaGetErrorString(e); }
inline const char* hipGetErrorName(hipError_t e) { return cudaGetErrorName(e); }
inline hipError_t hipGetLastError() { return cudaGetLastError(); }
inline hipError_t hipPeekAtLastError() { return cudaPeekAtLastError(); }
inline hipError_t hipGetDeviceCount(int* n) { return cudaGetDeviceCount(n); }
inline hipError_t hipSetDevice(int d) { return cudaSetDevice(d); }
inline hipError_t hipGetDevice(int* d) { return cudaGetDevice(d); }
inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* p, int d) {
  return cudaGetDeviceProperties(p, d);
}
inline hipError_t hipDeviceSynchronize() { return cudaDeviceSynchronize(); }
inline hipError_t hipDriverGetVersion(int* v) { return cudaDriverGetVersion(v); }
inline hipError_t hipRuntimeGetVersion(int* v) { return cudaRuntimeGetVersion(v); }
inline hipError_t hipMemGetInfo(size_t* free_b, size_t* total_b) {
  return cudaMemGetInfo(free_b, total_b);
}
inline hipError_t hipMalloc(void** p, size_t n) { return cudaMalloc(p, n); }
template <class T>
inline hipError_t hipMalloc(T** p, size_t n) {
  return cudaMalloc(reinterpret_cast<void**>(p), n);
}
inline hipError_t hipFree(void* p) { return cudaFree(p); }
inline hipError_t hipMemcpy(void* d, const void* s, size_t n, hipMemcpyKind k) {
  return cudaMemcpy(d, s, n, k);
}
inline hipError_t hipMemcpyAsync(void* d, const void* s, size_t n, hipMemcpyKind k,
                                 hipStream_t st = nullptr) {
  return cudaMemcpyAsync(d, s, n, k, st);
}
inline hipError_t hipMemset(void* d, int v, size_t n) { return cudaMemset(d, v, n); }
inline hipError_t hipMemsetAsync(void* d, int v, size_t n, hipStream_t st = nullptr) {
  return cudaMemsetAsync(d, v, n, st);
}
inline hipError_t hipStreamCreate(hipStream_t* s) { return cudaStreamCreate(s); }
inline hipError_t hipStreamCreateWithFlags(hipStream_t* s, unsigned f) {
  return cudaStreamCreateWithFlags(s, f);
}
inline hipError_t hipStreamDestroy(hipStream_t s) { return cudaStreamDestroy(s); }
inline hipError_t hipStreamSynchronize(hipStream_t s) { return cudaStreamSynchronize(s); }
inline hipError_t hipStreamQuery(hipStream_t s) { return cudaStreamQuery(s); }
inline hipError_t hipDeviceGetStreamPriorityRange(int* lo, int* hi) {
  return cudaDeviceGetStreamPriorityRange(lo, hi);
}
inline hipError_t hipStreamCreateWithPriority(hipStream_t* s, unsigned f, int p) {
  return cudaStreamCreateWithPriority(s, f, p);
}
inline hipError_t hipEventQuery(hipEvent_t e) { return cudaEventQuery(e); }
inline hipError_t hipHostMalloc(void** p, size_t n, unsigned) { return cudaMallocHost(p, n); }
inline hipError_t hipHostFree(void* p) { return cudaFreeHost(p); }
inline constexpr unsigned hipHostMallocDefault = 0;
inline hipError_t hipStreamBeginCapture(hipStream_t s, hipStreamCaptureMode m) {
  return cudaStreamBeginCapture(s, m);
}
inline hipError_t hipStreamEndCapture(hipStream_t s, hipGraph_t* g) {
  return cudaStreamEndCapture(s, g);
}
// HIP's five-argument form; CUDA 12+ takes flags instead of an error node and log buffer.
inline hipError_t hipGraphInstantiate(hipGraphExec_t* e, hipGraph_t g, hipGraphNode_t*, char*,
                                      size_t) {
  return cudaGraphInstantiate(e, g, 0ULL);
}
inline hipError_t hipGraphLaunch(hipGraphExec_t e, hipStream_t s) { return cudaGraphLaunch(e, s); }
inline hipError_t hipGraphDestroy(hipGraph_t g) { return cudaGraphDestroy(g); }
inline hipError_t hipGraphExecDestroy(hipGraphExec_t e) { return cudaGraphExecDestroy(e); }
inline hipError_t hipEventCreate(hipEvent_t* e) { return cudaEventCreate(e); }
inline hipError_t hipEventDestroy(hipEvent_t e) { return cudaEventDestroy(e); }
inline hipError_t hipEventRecord(hipEvent_t e, hipStream_t s = nullptr) {
  return cudaEventRecord(e, s);
}
inline hipError_t hipEventSynchronize(hipEvent_t e) { return cudaEventSynchronize(e); }
inline hipError_t hipEventElapsedTime(float* ms, hipEvent_t a, hipEvent_t b) {
  return cudaEventElapsedTime(ms, a, b);
}
template <class T>
inline hipError_t hipOccupancyMaxActiveBlocksPerMultiprocessor(int* n, T kernel, int block,
                                                               size_t smem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, kernel, block, smem);
}
inline hipError_t hipLaunchCooperativeKernel(const void* f, dim3 grid, dim3 block, void** args,
                                             unsigned smem, hipStream_t s) {
  return cudaLaunchCooperativeKernel(f, grid, block, args, smem, s);
}
// Whether `device` can launch cooperative kernels (every block resident at once, or no launch).
inline hipError_t dsv4_cooperative_launch(int* yes, int device) {
  return cudaDeviceGetAttribute(yes, cudaDevAttrCooperativeLaunch, device);
}
inline hipError_t dsv4_stream_capturing(hipStream_t s, bool* yes) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing(s, &st);
  *yes = st != cudaStreamCaptureStatusNone;
  return e;
}

// HIP's cross-lane operations take no mask; the CUDA forms act on the full 32-lane warp, and
// `width` (a power of two <= 32) splits it into independent groups as HIP's does.
template <class T>
__device__ __forceinline__ T __shfl_xor(T v, int lane_mask, int width = 32) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, width);
}
template <class T>
__device__ __forceinline__ T __shfl_down(T v, unsigned delta, int width = 32) {
  return __shfl_down_sync(0xffffffffu, v, delta, width);
}
template <class T>
__device__ __forceinline__ T __shfl_up(T v, unsigned delta, int width = 32) {
  return __shfl_up_sync(0xffffffffu, v, delta, width);
}
template <class T>
__device__ __forceinline__ T __shfl(T v, int src_lane, int width = 32) {
  return __shfl_sync(0xffffffffu, v, src_lane, width);
}
#endif  // DSV4_GPU_CUDA

#if DSV4_GPU_HIP
inline hipError_t dsv4_cooperative_launch(int* yes, int device) {
  return hipDeviceGetAttribute(yes, hipDeviceAttributeCooperativeLaunch, device);
}
inline hipError_t dsv4_stream_capturing(hipStream_t s, bool* yes) {
  hipStreamCaptureStatus st = hipStreamCaptureStatusNone;
  const hipError_t e = hipStreamIsCapturing(s, &st);
  *yes = st != hipStreamCaptureStatusNone;
  return e;
}
#endif  // DSV4_GPU_HIP

// ---------------------------------------------------------------------------------------------
// Host-only: kernel sources compile as C++ (so the cpu preset type-checks them); every runtime
// call answers hipErrorNoDevice and launches throw.
// ---------------------------------------------------------------------------------------------
#if DSV4_GPU_NONE
#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline
#define __launch_bounds__(...)

enum hipError_t {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorNoDevice = 100,
  hipErrorNotReady = 600
};
inline constexpr unsigned hipHostMallocDefault = 0;
enum hipMemcpyKind {
  hipMemcpyHostToDevice = 1,
  hipMemcpyDeviceToHost = 2,
  hipMemcpyDeviceToDevice = 3,
  hipMemcpyDefault = 4
};
enum hipStreamCaptureMode {
  hipStreamCaptureModeGlobal = 0,
  hipStreamCaptureModeThreadLocal = 1,
  hipStreamCaptureModeRelaxed = 2
};
inline constexpr unsigned hipStreamNonBlocking = 1;
struct ihipStream_t;
struct ihipEvent_t;
struct ihipGraph_t;
struct ihipGraphExec_t;
struct ihipGraphNode_t;
using hipStream_t = ihipStream_t*;
using hipEvent_t = ihipEvent_t*;
using hipGraph_t = ihipGraph_t*;
using hipGraphExec_t = ihipGraphExec_t*;
using hipGraphNode_t = ihipGraphNode_t*;
struct hipDeviceProp_t {
  char name[256];
  int warpSize;
  int multiProcessorCount;
  size_t totalGlobalMem;
  int major, minor;
  char gcnArchName[256];
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
inline const dim3 threadIdx{0, 0, 0}, blockIdx{0, 0, 0}, blockDim{1, 1, 1}, gridDim{1, 1, 1};
inline constexpr int warpSize = 64;

inline const char* hipGetErrorString(hipError_t e) {
  return e == hipSuccess
             ? "no error"
             : "no GPU backend in this build (preset cpu); build the cuda or hip preset";
}
inline const char* hipGetErrorName(hipError_t e) {
  return e == hipSuccess ? "hipSuccess" : "hipErrorNoDevice";
}
inline hipError_t hipGetLastError() { return hipSuccess; }
inline hipError_t hipPeekAtLastError() { return hipSuccess; }
inline hipError_t hipGetDeviceCount(int* n) {
  *n = 0;
  return hipErrorNoDevice;
}
#define DSV4_GPU_NO_DEVICE_(name, ...) \
  inline hipError_t name(__VA_ARGS__) { return hipErrorNoDevice; }
DSV4_GPU_NO_DEVICE_(hipSetDevice, int)
DSV4_GPU_NO_DEVICE_(hipGetDevice, int*)
DSV4_GPU_NO_DEVICE_(hipGetDeviceProperties, hipDeviceProp_t*, int)
DSV4_GPU_NO_DEVICE_(hipDeviceSynchronize)
DSV4_GPU_NO_DEVICE_(hipDriverGetVersion, int*)
DSV4_GPU_NO_DEVICE_(hipRuntimeGetVersion, int*)
DSV4_GPU_NO_DEVICE_(hipMemGetInfo, size_t*, size_t*)
DSV4_GPU_NO_DEVICE_(hipMalloc, void**, size_t)
DSV4_GPU_NO_DEVICE_(hipFree, void*)
DSV4_GPU_NO_DEVICE_(hipMemcpy, void*, const void*, size_t, hipMemcpyKind)
DSV4_GPU_NO_DEVICE_(hipMemcpyAsync, void*, const void*, size_t, hipMemcpyKind, hipStream_t)
DSV4_GPU_NO_DEVICE_(hipMemset, void*, int, size_t)
DSV4_GPU_NO_DEVICE_(hipMemsetAsync, void*, int, size_t, hipStream_t)
DSV4_GPU_NO_DEVICE_(hipStreamCreate, hipStream_t*)
DSV4_GPU_NO_DEVICE_(hipStreamCreateWithFlags, hipStream_t*, unsigned)
DSV4_GPU_NO_DEVICE_(hipStreamDestroy, hipStream_t)
DSV4_GPU_NO_DEVICE_(hipStreamSynchronize, hipStream_t)
DSV4_GPU_NO_DEVICE_(hipStreamQuery, hipStream_t)
DSV4_GPU_NO_DEVICE_(hipDeviceGetStreamPriorityRange, int*, int*)
DSV4_GPU_NO_DEVICE_(hipStreamCreateWithPriority, hipStream_t*, unsigned, int)
DSV4_GPU_NO_DEVICE_(hipEventQuery, hipEvent_t)
DSV4_GPU_NO_DEVICE_(hipHostMalloc, void**, size_t, unsigned)
DSV4_GPU_NO_DEVICE_(hipHostFree, void*)
DSV4_GPU_NO_DEVICE_(hipStreamBeginCapture, hipStream_t, hipStreamCaptureMode)
DSV4_GPU_NO_DEVICE_(hipStreamEndCapture, hipStream_t, hipGraph_t*)
DSV4_GPU_NO_DEVICE_(hipGraphInstantiate, hipGraphExec_t*, hipGraph_t, hipGraphNode_t*, char*,
                    size_t)
DSV4_GPU_NO_DEVICE_(hipGraphLaunch, hipGraphExec_t, hipStream_t)
DSV4_GPU_NO_DEVICE_(hipGraphDestroy, hipGraph_t)
DSV4_GPU_NO_DEVICE_(hipGraphExecDestroy, hipGraphExec_t)
DSV4_GPU_NO_DEVICE_(hipEventCreate, hipEvent_t*)
DSV4_GPU_NO_DEVICE_(hipEventDestroy, hipEvent_t)
DSV4_GPU_NO_DEVICE_(hipEventRecord, hipEvent_t, hipStream_t)
DSV4_GPU_NO_DEVICE_(hipEventSynchronize, hipEvent_t)
DSV4_GPU_NO_DEVICE_(hipEventElapsedTime, float*, hipEvent_t, hipEvent_t)
#undef DSV4_GPU_NO_DEVICE_
template <class T>
inline hipError_t hipMalloc(T** p, size_t n) {
  return hipMalloc(reinterpret_cast<void**>(p), n);
}
template <class T>
inline hipError_t hipOccupancyMaxActiveBlocksPerMultiprocessor(int*, T, int, size_t) {
  return hipErrorNoDevice;
}
inline hipError_t dsv4_cooperative_launch(int* yes, int) {
  *yes = 0;
  return hipErrorNoDevice;
}
inline hipError_t dsv4_stream_capturing(hipStream_t, bool* yes) {
  *yes = false;
  return hipErrorNoDevice;
}

// Device built-ins, host versions: enough for kernel bodies to type-check; never executed.
inline void __syncthreads() {}
template <class T>
inline T __shfl_xor(T v, int, int = 64) {
  return v;
}
template <class T>
inline T __shfl_down(T v, unsigned, int = 64) {
  return v;
}
template <class T>
inline T __shfl_up(T v, unsigned, int = 64) {
  return v;
}
template <class T>
inline T __shfl(T v, int, int = 64) {
  return v;
}
template <class T>
inline T atomicAdd(T* p, T v) {
  T old = *p;
  *p += v;
  return old;
}
template <class T>
inline T atomicExch(T* p, T v) {
  T old = *p;
  *p = v;
  return old;
}
template <class T>
inline T atomicCAS(T* p, T expected, T v) {
  T old = *p;
  if (old == expected) *p = v;
  return old;
}
inline void __threadfence() {}
inline long long clock64() { return 0; }
template <class T>
inline T atomicMax(T* p, T v) {
  T old = *p;
  if (v > old) *p = v;
  return old;
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline int __float_as_int(float f) {
  int i;
  std::memcpy(&i, &f, 4);
  return i;
}
inline float __uint_as_float(unsigned i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned i;
  std::memcpy(&i, &f, 4);
  return i;
}
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
#endif  // DSV4_GPU_NONE

namespace dsv4::gpu {

[[noreturn]] inline void throw_error(hipError_t e, const char* expr, const char* file, int line) {
  throw Error(static_cast<int>(e), std::string(expr) + " failed at " + file + ":" +
                                       std::to_string(line) + ": " + hipGetErrorName(e) + " (" +
                                       hipGetErrorString(e) + ")");
}

// Kernel launch through one entry point, so every launch is checked and the host-only build has
// a single place that refuses to launch.
template <class... KArgs, class... Args>
inline void launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, hipStream_t stream,
                   Args&&... args) {
#if DSV4_GPU_NONE
  (void)kernel, (void)grid, (void)block, (void)smem, (void)stream, ((void)args, ...);
  throw Error(static_cast<int>(hipErrorNoDevice),
              "kernel launch: no GPU backend in this build (preset cpu)");
#else
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;  // an empty launch is no launch
  // clang-format off
  kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
  // clang-format on
  hipError_t e = hipGetLastError();
  if (e != hipSuccess) throw_error(e, "kernel launch", __FILE__, __LINE__);
#endif
}

// A cooperative launch: the runtime starts every block of `grid` at once or refuses the launch
// (an error, thrown), so the blocks may meet at grid_sync(). The grid must not exceed what the
// device holds at once (the occupancy API times the compute units). Capturable on CUDA.
template <class... KArgs, class... Args>
inline void launch_cooperative(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                               hipStream_t stream, Args&&... args) {
#if DSV4_GPU_NONE
  (void)kernel, (void)grid, (void)block, (void)smem, (void)stream, ((void)args, ...);
  throw Error(static_cast<int>(hipErrorNoDevice),
              "kernel launch: no GPU backend in this build (preset cpu)");
#else
  static_assert(sizeof...(KArgs) == sizeof...(Args), "launch_cooperative: argument count");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
  std::tuple<std::decay_t<KArgs>...> values(std::forward<Args>(args)...);
  void* ptrs[sizeof...(KArgs) > 0 ? sizeof...(KArgs) : 1] = {};
  std::apply(
      [&](auto&... v) {
        size_t i = 0;
        ((ptrs[i++] = static_cast<void*>(&v)), ...);
      },
      values);
  hipError_t e = hipLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), grid, block,
                                            ptrs, static_cast<unsigned>(smem), stream);
  if (e == hipSuccess) e = hipGetLastError();
  if (e != hipSuccess) throw_error(e, "cooperative kernel launch", __FILE__, __LINE__);
#endif
}

// A launch that may start before the previous kernel on `stream` has finished (CUDA's
// programmatic dependent launch, sm_90 and later): its blocks must call wait_prior_grid() before
// reading anything the previous kernel writes, and the previous kernel may call
// release_dependents() to let them start (else they start as it ends). The runtime starts the
// dependent grid only once every block of the previous one has released it or exited, so a
// waiting block never holds back a block it waits for. Elsewhere (HIP, older devices) a plain
// launch: wait_prior_grid() and release_dependents() do nothing. Capturable.
template <class... KArgs, class... Args>
inline void launch_dependent(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                             hipStream_t stream, Args&&... args) {
#if DSV4_GPU_CUDA
  static_assert(sizeof...(KArgs) == sizeof...(Args), "launch_dependent: argument count");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  hipError_t e =
      cudaLaunchKernelEx(&config, kernel, std::decay_t<KArgs>(std::forward<Args>(args))...);
  if (e == hipSuccess) e = hipGetLastError();
  if (e != hipSuccess) throw_error(e, "dependent kernel launch", __FILE__, __LINE__);
#else
  launch(kernel, grid, block, smem, stream, std::forward<Args>(args)...);
#endif
}

__device__ __forceinline__ void wait_prior_grid() {
#if DSV4_GPU_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void release_dependents() {
#if DSV4_GPU_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Every block of a cooperative launch waits here until all have arrived; the writes of every
// block before it are visible to every block after it (the runtime's grid barrier).
__device__ __forceinline__ void grid_sync() {
#if !DSV4_GPU_NONE
  cooperative_groups::this_grid().sync();
#endif
}

constexpr unsigned ceil_div(size_t a, size_t b) { return static_cast<unsigned>((a + b - 1) / b); }

// Stores 16 bytes (words x, y, z, w) at a 16-byte aligned p in one vector store.
__device__ __forceinline__ void store16(void* p, uint32_t x, uint32_t y, uint32_t z, uint32_t w) {
#if DSV4_GPU_NONE
  uint32_t* q = static_cast<uint32_t*>(p);
  q[0] = x, q[1] = y, q[2] = z, q[3] = w;
#else
  *static_cast<uint4*>(p) = make_uint4(x, y, z, w);
#endif
}

// Stores 16 bytes (words x, y, z, w) at a 16-byte aligned p with a streaming hint (written once,
// not read again by this kernel): st.global.cs on NVIDIA (evict-first in L1 and L2), a
// nontemporal store on AMD, a plain store in the host-only build.
__device__ __forceinline__ void store16_streaming(void* p, uint32_t x, uint32_t y, uint32_t z,
                                                  uint32_t w) {
#if DSV4_GPU_CUDA
  __stcs(static_cast<uint4*>(p), make_uint4(x, y, z, w));
#elif DSV4_GPU_HIP
  typedef uint32_t u32x4 __attribute__((ext_vector_type(4)));
  u32x4 v = {x, y, z, w};
  __builtin_nontemporal_store(v, static_cast<u32x4*>(p));
#else
  uint32_t* q = static_cast<uint32_t*>(p);
  q[0] = x, q[1] = y, q[2] = z, q[3] = w;
#endif
}

}  // namespace dsv4::gpu

// Checks a runtime call; throws dsv4::gpu::Error naming the call, the place and the message.
#define DSV4_GPU_CHECK(expr)                                              \
  do {                                                                    \
    hipError_t dsv4_gpu_err_ = (expr);                                    \
    if (dsv4_gpu_err_ != hipSuccess)                                      \
      ::dsv4::gpu::throw_error(dsv4_gpu_err_, #expr, __FILE__, __LINE__); \
  } while (0)
