// Host-side GPU runtime API for tests, fixtures and benchmarks: plain C++, no GPU headers needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace dsv4::gpu {

// A failed runtime call or launch: names the call, the file and line, and the runtime's message.
struct Error : std::runtime_error {
  int code;
  Error(int c, const std::string& what) : std::runtime_error(what), code(c) {}
};

// Opaque stream handle (hipStream_t / cudaStream_t); nullptr is the default stream.
using Stream = void*;

struct DeviceInfo {
  int index = -1;           // runtime device index in use
  std::string name;         // e.g. "NVIDIA H200", "AMD Instinct MI300X"
  std::string arch;         // "sm_90", "gfx942", ...
  int wave_width = 0;       // 32 on NVIDIA and RDNA, 64 on CDNA
  int compute_units = 0;    // SMs / CUs
  size_t total_memory = 0;  // bytes
};

// Which backend this build was made for: "cuda", "hip" or "none".
const char* backend();

// True when a device can run this build's kernels. Otherwise false, with the reason in *reason
// ("no GPU backend in this build (preset cpu)", "no device visible: ...").
bool available(std::string* reason = nullptr);

// The device index the tests use: CTest's CTEST_RESOURCE_GROUP_0_GPUS id when set, else 0 (the
// runtime itself honours HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES). Selected on first use.
int selected_device();
// The device index in CTest's resource value "id:<n>,slots:<m>" (CTEST_RESOURCE_GROUP_0_GPUS);
// -1 when the value has no well-formed id.
int ctest_gpu_id(const std::string& resource_value);
DeviceInfo device_info();

void* malloc_bytes(size_t bytes);
void free_bytes(void* p) noexcept;
void copy_to_device(void* dst, const void* src, size_t bytes, Stream s = nullptr);
void copy_to_host(void* dst, const void* src, size_t bytes, Stream s = nullptr);
void copy_on_device(void* dst, const void* src, size_t bytes, Stream s = nullptr);
void fill_bytes(void* dst, int value, size_t bytes, Stream s = nullptr);
void synchronize(Stream s = nullptr);
// Throws dsv4::gpu::Error when an earlier asynchronous launch failed.
void check_last_error(const char* where);

// An owned non-blocking stream.
class StreamHandle {
 public:
  StreamHandle();
  ~StreamHandle();
  StreamHandle(const StreamHandle&) = delete;
  StreamHandle& operator=(const StreamHandle&) = delete;
  Stream get() const { return s_; }
  operator Stream() const { return s_; }

 private:
  Stream s_ = nullptr;
};

// A captured graph: capture(stream, work) records what `work` enqueues on `stream`; replay()
// launches the recorded work again (on the same device buffers).
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void capture(Stream s, const std::function<void(Stream)>& work);
  void replay(Stream s);
  bool captured() const { return exec_ != nullptr; }

 private:
  void* graph_ = nullptr;
  void* exec_ = nullptr;
};

// Device-event timer for benchmarks: milliseconds between start() and stop() on a stream.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start(Stream s = nullptr);
  float stop(Stream s = nullptr);  // synchronises on the stop event

 private:
  void* a_ = nullptr;
  void* b_ = nullptr;
};

}  // namespace dsv4::gpu
