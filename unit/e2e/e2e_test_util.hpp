// Shared helpers of the e2e tests: temporary directories, running dsv4-eval commands in-process,
// synthetic data, reading reports.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "commands/command.hpp"
#include "dsv4/test_server/test_server.hpp"

extern "C" char** environ;

namespace dsv4::e2e_test {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("dsv4-e2e-") + (info ? info->name() : "x") + "-" +
                       std::to_string(::getpid()) + "-" + std::to_string(counter()++);
    for (char& c : name)
      if (c == '/') c = '_';
    path_ = fs::temp_directory_path() / name;
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    if (!::testing::Test::HasFailure()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string str(const std::string& leaf = "") const {
    return leaf.empty() ? path_.string() : (path_ / leaf).string();
  }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  fs::path path_;
};

// Runs `dsv4-eval <args...>` in this process and returns its exit code.
inline int run_eval(std::vector<std::string> args) {
  const eval::Command* c = eval::find_command(args.at(0));
  if (!c) {
    ADD_FAILURE() << "no dsv4-eval command '" << args[0] << "'";
    return -1;
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return c->run(int(args.size()), argv.data());
}

// Runs a command and captures what it writes to stderr.
inline int run_eval_capture(std::vector<std::string> args, std::string& err) {
  ::testing::internal::CaptureStderr();
  const int rc = run_eval(std::move(args));
  err = ::testing::internal::GetCapturedStderr();
  return rc;
}

inline std::string write_questions(const TempDir& dir, size_t n, uint64_t seed,
                                   const std::string& leaf = "questions.jsonl") {
  const std::string path = dir.str(leaf);
  test_server::write_gsm8k(path, test_server::synth_gsm8k(n, seed));
  return path;
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

inline nlohmann::json read_report(const std::string& out_dir) {
  return nlohmann::json::parse(slurp(out_dir + "/report.json"));
}

inline std::vector<nlohmann::json> read_results(const std::string& out_dir) {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(out_dir + "/results.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));  // a cut or garbled line is skipped
  }
  return out;
}

// A free TCP port on 127.0.0.1 (bound and released; fine for tests that need it in advance).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// Starts `bin args...` with stdout and stderr redirected to files; returns the pid (-1 on failure).
inline pid_t spawn_process(const std::string& bin, std::vector<std::string> args,
                           const std::string& stdout_path, const std::string& stderr_path = "") {
  args.insert(args.begin(), bin);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2,
                                   (stderr_path.empty() ? "/dev/null" : stderr_path.c_str()),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Waits until `path` holds a positive integer (a port file); -1 after `seconds`.
inline int wait_for_port_file(const std::string& path, double seconds) {
  for (int i = 0; i < int(seconds * 50); ++i) {
    std::ifstream f(path);
    int port = 0;
    if (f >> port && port > 0) return port;
    ::usleep(20000);
  }
  return -1;
}

// Runs `dsv4-eval args...` (the executable) under a hard open-file limit of `limit` (a shell's
// ulimit), returns the exit status and leaves its stderr in `err`.
inline int run_limited(int limit, const std::vector<std::string>& args, const std::string& err_path,
                       std::string& err) {
  std::string cmd = "ulimit -n " + std::to_string(limit) + " && exec '" + DSV4_EVAL_BIN + "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  const pid_t pid = spawn_process("/bin/sh", {"-c", cmd}, "/dev/null", err_path);
  int status = -1;
  if (pid > 0) ::waitpid(pid, &status, 0);
  err = slurp(err_path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Sends `sig` to `pid` once `ready()` holds (checked every 10 ms, at most `seconds`), then waits
// for the process; returns its wait status (-1 when it could not be waited for).
template <class Ready>
int signal_when(pid_t pid, Ready ready, int sig, double seconds = 15) {
  for (int i = 0; i < int(seconds * 100) && !ready(); ++i) ::usleep(10000);
  ::kill(pid, sig);
  int status = -1;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return status;
}

}  // namespace dsv4::e2e_test
