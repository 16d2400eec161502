// Host-side GPU runtime API for tests, fixtures and benchmarks: plain C++, no GPU headers needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

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
  std::string driver;       // "driver 13000, runtime 13000" (the runtime's version numbers)
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
// Waits for everything enqueued on s, within the launch deadline (below).
void synchronize(Stream s = nullptr);
// Throws dsv4::gpu::Error when an earlier asynchronous launch failed.
void check_last_error(const char* where);

// ---- Liveness: every wait for the device runs under a deadline ----
// A hung kernel cannot be cancelled, so a wait (synchronize, a download, a timer's stop event)
// that outlasts launch_deadline_s() calls the deadline handler, which names what hung, and then
// the process exits at once with status kDeadlineExit (no destructor runs: freeing device memory
// would wait for the hung kernel too).
inline constexpr int kDeadlineExit = 1;
// DSV4_LAUNCH_DEADLINE_S (seconds, a positive number; default 30). A malformed value throws
// std::invalid_argument naming the variable and the value.
double launch_deadline_s();
// What a handler receives: the wait that timed out ("stream synchronize", ...), the deadline, and
// the activity label set at the time.
struct DeadlineReport {
  std::string wait;
  double deadline_s = 0;
  std::string activity;
};
using DeadlineHandler = void (*)(const DeadlineReport&);
// Installs `h` (nullptr: the default, which prints the report to stderr); returns the previous
// one. The handler must not wait for the device; it may print, write files and peek_device().
DeadlineHandler set_deadline_handler(DeadlineHandler h);
// A label naming what this thread runs now (a benchmark row, a soak shape), printed in the
// report; "" clears it.
void set_activity(const std::string& label);
std::string activity();
// Copies `bytes` device bytes to host on a stream of its own through pinned memory, without
// waiting for work on other streams (a copy engine can read beside a hung kernel). False when the
// copy did not finish within timeout_s or could not start.
bool peek_device(void* host, const void* device, size_t bytes, double timeout_s = 2.0);
// Makes peek_device's stream and pinned buffer (up to 4 KiB) now, while the device answers:
// allocating them beside a hung kernel may itself wait. Idempotent.
void prepare_peek();

// Launch marks: an event recorded after each of a run of launches, so that a wait that outlasts
// the deadline can say which launch was the first to not finish.
class LaunchMarks {
 public:
  explicit LaunchMarks(size_t capacity);
  ~LaunchMarks();
  LaunchMarks(const LaunchMarks&) = delete;
  LaunchMarks& operator=(const LaunchMarks&) = delete;
  // Marks launch number `n` (counted by the caller) on s: slot n % capacity.
  void mark(uint64_t n, Stream s);
  // The first of launches [first, last] whose mark has not completed (last + 1 when all have);
  // the range must fit the capacity. Never waits.
  uint64_t first_unfinished(uint64_t first, uint64_t last) const;
  size_t capacity() const { return events_.size(); }

 private:
  std::vector<void*> events_;
};

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
