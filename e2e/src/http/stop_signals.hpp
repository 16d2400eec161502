// SIGINT/SIGTERM (a CI job timeout) over a whole command run: the handler only records the
// signal; request loops and every blocking request (http_fetch) check stop_signal() and end early,
// so the command can write its reports with status ERROR and exit 3.
#pragma once

#include <string>

namespace dsv4::eval {

// Installs the handlers for its lifetime (clearing any signal recorded before); the previous
// handlers come back after.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  void (*old_int_)(int);
  void (*old_term_)(int);
};

int stop_signal();               // 0, or the first signal received since StopSignals started
int stop_signal_count();         // signals received since then (a second one: stop at once)
std::string stop_signal_name();  // "SIGINT", "SIGTERM" or ""

}  // namespace dsv4::eval
