// Clocks of the e2e tools: monotonic seconds, the calling thread's CPU time, UTC timestamps.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <ctime>
#include <string>

namespace dsv4::eval {

// Seconds on the steady clock (one origin per process; only differences mean anything).
inline double monotonic_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// User + system CPU seconds of the calling thread.
inline double thread_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

// The current time as ISO 8601 UTC ("2026-01-31T23:59:59Z").
inline std::string utc_timestamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace dsv4::eval
