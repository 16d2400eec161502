// Child processes for run-suite: own process group, output to a log (optionally echoed), bounded
// waits, and a stop that always ends the whole group (SIGTERM, grace period, SIGKILL).
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dsv4::nightly {

struct Spawn {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // set on top of this process's environment
  std::string log;                         // stdout and stderr go here (appended)
  bool echo = false;                       // also copy the output to this process's stdout
  std::string cwd;                         // empty: this process's working directory
};

// Set by the SIGINT/SIGTERM/SIGHUP handlers that install_stop_handlers() installs.
bool stop_requested();
void install_stop_handlers();

// argv[0] searched on `path` (a PATH value) unless it contains '/'; empty when not found.
std::string find_program(const std::string& name, const std::string& path);

class Process {
 public:
  // Throws std::runtime_error naming the program when it cannot be started.
  static Process start(const Spawn& spec);

  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) = delete;
  Process(const Process&) = delete;
  ~Process();  // stops the group if still running

  pid_t pid() const { return pid_; }
  bool running();                          // reaps the leader when it has exited
  int exit_code() const { return code_; }  // 128+N when ended by signal N
  std::string describe_exit() const;

  // Waits up to `seconds` for the leader to exit, forwarding echoed output; returns the exit code,
  // or nothing on timeout or when `abort` returns true.
  std::optional<int> wait(double seconds, const std::function<bool()>& abort = {});

  // SIGTERM to the group, up to `grace_s` for it to end, then SIGKILL; reaps the leader.
  // Returns true when the group ended within the grace period.
  bool stop(double grace_s);

 private:
  Process() = default;
  void pump(int timeout_ms);
  void finish(int status);

  pid_t pid_ = -1;
  int out_fd_ = -1;  // read end of the echo pipe
  int log_fd_ = -1;
  bool done_ = false;
  bool signaled_ = false;
  int code_ = -1;
};

}  // namespace dsv4::nightly
