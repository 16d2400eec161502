// Implementation of dsv4/gpu/runtime.hpp over the portability layer (HIP, CUDA or host-only).
#include "dsv4/gpu/runtime.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "dsv4/gpu/gpu.hpp"

namespace dsv4::gpu {
namespace {

hipStream_t as_stream(Stream s) { return static_cast<hipStream_t>(s); }

// The first GPU of CTest's resource group 0, when ctest allocated one; else device 0.
[[maybe_unused]] int device_from_ctest() {
  const char* groups = std::getenv("CTEST_RESOURCE_GROUP_COUNT");
  const char* spec = std::getenv("CTEST_RESOURCE_GROUP_0_GPUS");
  if (!groups || !spec) return 0;
  const int id = ctest_gpu_id(spec);
  return id < 0 ? 0 : id;
}

struct Selection {
  bool ok = false;
  int index = 0;
  std::string reason;
};

const Selection& select_once() {
  static Selection sel;
  static std::once_flag once;
  std::call_once(once, [] {
#if DSV4_GPU_NONE
    sel.reason = "no GPU backend in this build (preset cpu); build the cuda or hip preset";
#else
    int n = 0;
    hipError_t e = hipGetDeviceCount(&n);
    if (e != hipSuccess || n == 0) {
      sel.reason = std::string("no device visible: ") +
                   (e != hipSuccess ? hipGetErrorString(e) : "device count is 0");
      (void)hipGetLastError();
      return;
    }
    sel.index = device_from_ctest();
    if (sel.index >= n) {
      sel.reason = "CTEST_RESOURCE_GROUP_0_GPUS names device " + std::to_string(sel.index) +
                   " but only " + std::to_string(n) + " are visible";
      return;
    }
    e = hipSetDevice(sel.index);
    if (e != hipSuccess) {
      sel.reason = std::string("hipSetDevice failed: ") + hipGetErrorString(e);
      return;
    }
    sel.ok = true;
#endif
  });
  return sel;
}

void require_device() {
  const Selection& s = select_once();
  if (!s.ok) throw Error(static_cast<int>(hipErrorNoDevice), s.reason);
}

void default_deadline_handler(const DeadlineReport& r) {
  std::fprintf(stderr,
               "[dsv4] LAUNCH DEADLINE: %s did not finish within %g s "
               "(DSV4_LAUNCH_DEADLINE_S)%s%s; the process exits\n",
               r.wait.c_str(), r.deadline_s,
               r.activity.empty() ? "" : "; running: ", r.activity.c_str());
}

std::atomic<DeadlineHandler> g_deadline_handler{nullptr};
thread_local std::string t_activity;

[[noreturn]] void deadline_passed(const char* wait, double limit) {
  const DeadlineReport r{wait, limit, t_activity};
  DeadlineHandler h = g_deadline_handler.load();
  try {
    if (h) h(r);
    default_deadline_handler(r);
  } catch (...) {
    std::fprintf(stderr, "[dsv4] the deadline handler threw\n");
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(kDeadlineExit);
}

// Polls `query` (hipStreamQuery / hipEventQuery) until it answers hipSuccess; an error throws;
// past the deadline the handler runs and the process exits.
template <class Query>
void wait_within_deadline(Query query, const char* wait) {
  const double limit = launch_deadline_s();
  const auto t0 = std::chrono::steady_clock::now();
  for (int polls = 0;; ++polls) {
    const hipError_t e = query();
    if (e == hipSuccess) return;
    if (e != hipErrorNotReady) throw_error(e, wait, __FILE__, __LINE__);
    if (hipPeekAtLastError() == hipErrorNotReady) (void)hipGetLastError();  // not an error
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (waited > limit) deadline_passed(wait, limit);
    // Busy for the first polls (short kernels), then at most 100 us late.
    if (polls > 2000)
      std::this_thread::sleep_for(std::chrono::microseconds(polls > 20000 ? 100 : 10));
  }
}

void wait_stream(hipStream_t s, const char* wait) {
  wait_within_deadline([s] { return hipStreamQuery(s); }, wait);
}

}  // namespace

int ctest_gpu_id(const std::string& value) {
  // Several allocations are separated by ';'; the first one is used.
  const std::string first = value.substr(0, value.find(';'));
  const size_t at = first.find("id:");
  if (at == std::string::npos) return -1;
  size_t i = at + 3;
  if (i >= first.size() || first[i] < '0' || first[i] > '9') return -1;
  long id = 0;
  for (; i < first.size() && first[i] >= '0' && first[i] <= '9'; ++i) {
    id = id * 10 + (first[i] - '0');
    if (id > 1 << 20) return -1;
  }
  if (i < first.size() && first[i] != ',') return -1;
  return int(id);
}

const char* backend() {
#if DSV4_GPU_CUDA
  return "cuda";
#elif DSV4_GPU_HIP
  return "hip";
#else
  return "none";
#endif
}

bool available(std::string* reason) {
  const Selection& s = select_once();
  if (!s.ok && reason) *reason = s.reason;
  return s.ok;
}

int selected_device() {
  require_device();
  return select_once().index;
}

DeviceInfo device_info() {
  require_device();
  DeviceInfo info;
  info.index = select_once().index;
  hipDeviceProp_t p{};
  DSV4_GPU_CHECK(hipGetDeviceProperties(&p, info.index));
  info.name = p.name;
#if DSV4_GPU_HIP
  info.arch = p.gcnArchName;
#else
  info.arch = "sm_" + std::to_string(p.major) + std::to_string(p.minor);
#endif
  info.wave_width = p.warpSize;
  info.compute_units = p.multiProcessorCount;
  info.total_memory = p.totalGlobalMem;
  int driver = 0, runtime = 0;
  DSV4_GPU_CHECK(hipDriverGetVersion(&driver));
  DSV4_GPU_CHECK(hipRuntimeGetVersion(&runtime));
  info.driver = "driver " + std::to_string(driver) + ", runtime " + std::to_string(runtime);
  return info;
}

void* malloc_bytes(size_t bytes) {
  require_device();
  void* p = nullptr;
  DSV4_GPU_CHECK(hipMalloc(&p, bytes == 0 ? 1 : bytes));
  return p;
}

void free_bytes(void* p) noexcept {
  if (p) (void)hipFree(p);
}

// A copy from pageable host memory may wait inside the runtime for the stream's earlier work, so
// the stream is drained under the deadline first.
void copy_to_device(void* dst, const void* src, size_t bytes, Stream s) {
  if (bytes == 0) return;
  wait_stream(as_stream(s), "stream synchronize before an upload");
  DSV4_GPU_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyHostToDevice, as_stream(s)));
  wait_stream(as_stream(s), "upload");
}

void copy_to_host(void* dst, const void* src, size_t bytes, Stream s) {
  if (bytes == 0) return;
  wait_stream(as_stream(s), "stream synchronize before a download");
  DSV4_GPU_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, as_stream(s)));
  wait_stream(as_stream(s), "download");
}

void copy_on_device(void* dst, const void* src, size_t bytes, Stream s) {
  if (bytes == 0) return;
  DSV4_GPU_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, as_stream(s)));
}

void fill_bytes(void* dst, int value, size_t bytes, Stream s) {
  if (bytes == 0) return;
  DSV4_GPU_CHECK(hipMemsetAsync(dst, value, bytes, as_stream(s)));
}

void synchronize(Stream s) {
  require_device();
  wait_stream(as_stream(s), "stream synchronize");
  DSV4_GPU_CHECK(hipGetLastError());
}

double launch_deadline_s() {
  const char* v = std::getenv("DSV4_LAUNCH_DEADLINE_S");
  if (!v || !*v) return 30.0;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(d > 0) || d > 1e6)
    throw std::invalid_argument(std::string("DSV4_LAUNCH_DEADLINE_S='") + v +
                                "' is not a number of seconds in (0, 1e6]");
  return d;
}

DeadlineHandler set_deadline_handler(DeadlineHandler h) { return g_deadline_handler.exchange(h); }

void set_activity(const std::string& label) { t_activity = label; }
std::string activity() { return t_activity; }

namespace {
struct PeekKit {
  hipStream_t stream = nullptr;
  void* pinned = nullptr;
  static constexpr size_t kBytes = 4096;
};
PeekKit g_peek;
std::once_flag g_peek_once;
}  // namespace

void prepare_peek() {
#if !DSV4_GPU_NONE
  if (!available()) return;
  std::call_once(g_peek_once, [] {
    hipStream_t s = nullptr;
    void* p = nullptr;
    // The highest stream priority, so the copy is not queued behind the stream being waited for.
    int lo = 0, hi = 0;
    if (hipDeviceGetStreamPriorityRange(&lo, &hi) != hipSuccess) hi = 0;
    if (hipStreamCreateWithPriority(&s, hipStreamNonBlocking, hi) == hipSuccess &&
        hipHostMalloc(&p, PeekKit::kBytes, hipHostMallocDefault) == hipSuccess) {
      g_peek.stream = s;
      g_peek.pinned = p;
    }
    (void)hipGetLastError();
  });
#endif
}

bool peek_device(void* host, const void* device, size_t bytes, double timeout_s) {
#if DSV4_GPU_NONE
  (void)host, (void)device, (void)bytes, (void)timeout_s;
  return false;
#else
  if (bytes == 0) return true;
  if (!g_peek.stream || bytes > PeekKit::kBytes) return false;  // prepare_peek() was not called
  bool ok = hipMemcpyAsync(g_peek.pinned, device, bytes, hipMemcpyDeviceToHost, g_peek.stream) ==
            hipSuccess;
  if (ok) {
    const auto t0 = std::chrono::steady_clock::now();
    hipError_t e;
    while ((e = hipStreamQuery(g_peek.stream)) == hipErrorNotReady &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < timeout_s)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    ok = e == hipSuccess;
    if (ok) std::memcpy(host, g_peek.pinned, bytes);
  }
  (void)hipGetLastError();
  return ok;
#endif
}

LaunchMarks::LaunchMarks(size_t capacity) {
  require_device();
  if (capacity == 0) throw std::invalid_argument("LaunchMarks: capacity must be positive");
  for (size_t i = 0; i < capacity; ++i) {
    hipEvent_t e = nullptr;
    DSV4_GPU_CHECK(hipEventCreate(&e));
    events_.push_back(e);
  }
}

LaunchMarks::~LaunchMarks() {
  for (void* e : events_) (void)hipEventDestroy(static_cast<hipEvent_t>(e));
}

void LaunchMarks::mark(uint64_t n, Stream s) {
  DSV4_GPU_CHECK(
      hipEventRecord(static_cast<hipEvent_t>(events_[n % events_.size()]), as_stream(s)));
}

uint64_t LaunchMarks::first_unfinished(uint64_t first, uint64_t last) const {
  for (uint64_t n = first; n <= last && n - first < events_.size(); ++n) {
    const hipError_t e = hipEventQuery(static_cast<hipEvent_t>(events_[n % events_.size()]));
    if (hipPeekAtLastError() == hipErrorNotReady) (void)hipGetLastError();
    if (e != hipSuccess) return n;
  }
  return last + 1;
}

void check_last_error(const char* where) {
  hipError_t e = hipGetLastError();
  if (e != hipSuccess) throw_error(e, where, __FILE__, __LINE__);
}

StreamHandle::StreamHandle() {
  require_device();
  hipStream_t s = nullptr;
  DSV4_GPU_CHECK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  s_ = s;
}

StreamHandle::~StreamHandle() {
  if (s_) (void)hipStreamDestroy(as_stream(s_));
}

Graph::~Graph() {
  if (exec_) (void)hipGraphExecDestroy(static_cast<hipGraphExec_t>(exec_));
  if (graph_) (void)hipGraphDestroy(static_cast<hipGraph_t>(graph_));
}

void Graph::capture(Stream s, const std::function<void(Stream)>& work) {
  require_device();
  if (s == nullptr)
    throw Error(static_cast<int>(hipErrorInvalidValue),
                "Graph::capture needs a non-default stream (use StreamHandle)");
  DSV4_GPU_CHECK(hipStreamBeginCapture(as_stream(s), hipStreamCaptureModeThreadLocal));
  try {
    work(s);
  } catch (...) {
    hipGraph_t g = nullptr;
    (void)hipStreamEndCapture(as_stream(s), &g);
    if (g) (void)hipGraphDestroy(g);
    throw;
  }
  hipGraph_t g = nullptr;
  DSV4_GPU_CHECK(hipStreamEndCapture(as_stream(s), &g));
  graph_ = g;
  hipGraphExec_t e = nullptr;
  DSV4_GPU_CHECK(hipGraphInstantiate(&e, g, nullptr, nullptr, 0));
  exec_ = e;
}

void Graph::replay(Stream s) {
  if (!exec_) throw Error(static_cast<int>(hipErrorInvalidValue), "Graph::replay before capture");
  DSV4_GPU_CHECK(hipGraphLaunch(static_cast<hipGraphExec_t>(exec_), as_stream(s)));
}

EventTimer::EventTimer() {
  require_device();
  hipEvent_t a = nullptr, b = nullptr;
  DSV4_GPU_CHECK(hipEventCreate(&a));
  DSV4_GPU_CHECK(hipEventCreate(&b));
  a_ = a;
  b_ = b;
}

EventTimer::~EventTimer() {
  if (a_) (void)hipEventDestroy(static_cast<hipEvent_t>(a_));
  if (b_) (void)hipEventDestroy(static_cast<hipEvent_t>(b_));
}

void EventTimer::start(Stream s) {
  DSV4_GPU_CHECK(hipEventRecord(static_cast<hipEvent_t>(a_), as_stream(s)));
}

float EventTimer::stop(Stream s) {
  DSV4_GPU_CHECK(hipEventRecord(static_cast<hipEvent_t>(b_), as_stream(s)));
  hipEvent_t b = static_cast<hipEvent_t>(b_);
  wait_within_deadline([b] { return hipEventQuery(b); }, "timer stop event");
  float ms = 0;
  DSV4_GPU_CHECK(
      hipEventElapsedTime(&ms, static_cast<hipEvent_t>(a_), static_cast<hipEvent_t>(b_)));
  return ms;
}

}  // namespace dsv4::gpu
