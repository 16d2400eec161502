// SIGINT/SIGTERM recorded for the run's loops to see.
#include "http/stop_signals.hpp"

#include <csignal>

namespace dsv4::eval {

namespace {
volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_count = 0;
extern "C" void on_stop_signal(int sig) {
  if (!g_signal) g_signal = sig;
  g_count = g_count + 1;
}
}  // namespace

StopSignals::StopSignals() {
  g_signal = 0;
  g_count = 0;
  old_int_ = std::signal(SIGINT, on_stop_signal);
  old_term_ = std::signal(SIGTERM, on_stop_signal);
}

StopSignals::~StopSignals() {
  g_signal = 0;
  g_count = 0;
  std::signal(SIGINT, old_int_);
  std::signal(SIGTERM, old_term_);
}

int stop_signal() { return g_signal; }
int stop_signal_count() { return g_count; }

std::string stop_signal_name() {
  switch (g_signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return g_signal ? "signal " + std::to_string(int(g_signal)) : "";
  }
}

}  // namespace dsv4::eval
