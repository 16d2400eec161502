// Child process handling for run-suite (POSIX): spawn into a new process group, log, wait, stop.
#include "process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace dsv4::nightly {

namespace {

volatile sig_atomic_t g_stop = 0;

void on_stop_signal(int) { g_stop = 1; }

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

bool stop_requested() { return g_stop != 0; }

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

std::string find_program(const std::string& name, const std::string& path) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) dir = ".";
    const std::string cand = dir + "/" + name;
    struct stat st {};
    if (::stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(cand.c_str(), X_OK) == 0)
      return cand;
    start = end + 1;
  }
  return "";
}

Process Process::start(const Spawn& spec) {
  if (spec.argv.empty()) throw std::runtime_error("cannot start a process: empty command");
  // The environment: ours, then the overrides.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  for (const auto& [k, v] : spec.env) env[k] = v;
  const std::string program = find_program(spec.argv[0], env.count("PATH") ? env["PATH"] : "");
  if (program.empty())
    throw std::runtime_error("cannot start '" + spec.argv[0] + "': not found or not executable" +
                             (spec.argv[0].find('/') == std::string::npos
                                  ? " on PATH=" + (env.count("PATH") ? env["PATH"] : "")
                                  : std::string()));
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  Process p;
  p.log_fd_ = ::open(spec.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (p.log_fd_ < 0)
    throw std::runtime_error("cannot open log '" + spec.log + "': " + std::strerror(errno));
  int out_pipe[2] = {-1, -1};
  if (spec.echo && ::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));

  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaction(sig, &sa, nullptr);
    const int out = spec.echo ? out_pipe[1] : p.log_fd_;
    ::dup2(out, 1);
    ::dup2(out, 2);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) {
      const int err = errno;
      write_all(exec_pipe[1], reinterpret_cast<const char*>(&err), sizeof err);
      ::_exit(127);
    }
    ::execve(program.c_str(), argv.data(), envp.data());
    const int err = errno;
    write_all(exec_pipe[1], reinterpret_cast<const char*>(&err), sizeof err);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so a stop right after start finds the group
  p.pid_ = pid;
  ::close(exec_pipe[1]);
  if (spec.echo) {
    ::close(out_pipe[1]);
    p.out_fd_ = out_pipe[0];
  }
  int err = 0;
  ssize_t n;
  do n = ::read(exec_pipe[0], &err, sizeof err);
  while (n < 0 && errno == EINTR);
  ::close(exec_pipe[0]);
  if (n > 0) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    p.pid_ = -1;
    throw std::runtime_error("cannot start '" + program + "': " + std::strerror(err));
  }
  return p;
}

Process::Process(Process&& o) noexcept
    : pid_(o.pid_),
      out_fd_(o.out_fd_),
      log_fd_(o.log_fd_),
      done_(o.done_),
      signaled_(o.signaled_),
      code_(o.code_) {
  o.pid_ = -1;
  o.out_fd_ = -1;
  o.log_fd_ = -1;
}

Process::~Process() {
  if (pid_ > 0) stop(2.0);
  if (out_fd_ >= 0) ::close(out_fd_);
  if (log_fd_ >= 0) ::close(log_fd_);
}

void Process::finish(int status) {
  done_ = true;
  if (WIFEXITED(status)) {
    code_ = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    signaled_ = true;
    code_ = 128 + WTERMSIG(status);
  }
}

bool Process::running() {
  if (pid_ <= 0 || done_) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) finish(status);
  return !done_;
}

std::string Process::describe_exit() const {
  if (!done_) return "still running";
  if (signaled_) return "ended by signal " + std::to_string(code_ - 128);
  return "exit code " + std::to_string(code_);
}

void Process::pump(int timeout_ms) {
  if (out_fd_ < 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    return;
  }
  struct pollfd pfd {
    out_fd_, POLLIN, 0
  };
  if (::poll(&pfd, 1, timeout_ms) <= 0) return;
  char buf[8192];
  const ssize_t n = ::read(out_fd_, buf, sizeof buf);
  if (n > 0) {
    write_all(log_fd_, buf, static_cast<size_t>(n));
    write_all(1, buf, static_cast<size_t>(n));
  } else if (n == 0) {
    ::close(out_fd_);  // every writer has gone
    out_fd_ = -1;
  }
}

std::optional<int> Process::wait(double seconds, const std::function<bool()>& abort) {
  const double deadline = now_s() + seconds;
  for (;;) {
    if (!running()) {
      for (int i = 0; i < 50 && out_fd_ >= 0; ++i) pump(0);  // what is left in the pipe
      return code_;
    }
    if (now_s() >= deadline) return std::nullopt;
    if (abort && abort()) return std::nullopt;
    pump(100);
  }
}

bool Process::stop(double grace_s) {
  if (pid_ <= 0) return true;
  ::kill(-pid_, SIGTERM);
  ::kill(pid_, SIGTERM);  // in case the child left the group
  const double deadline = now_s() + grace_s;
  bool clean = false;
  for (;;) {
    running();
    if (done_ && ::kill(-pid_, 0) != 0) {
      clean = true;
      break;
    }
    if (now_s() >= deadline) break;
    pump(50);
  }
  if (!clean) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    if (!done_) {
      int status = 0;
      if (::waitpid(pid_, &status, 0) == pid_) finish(status);
    }
    // Members of the group other than the leader are reaped by init; wait until they are gone.
    for (int i = 0; i < 100 && ::kill(-pid_, 0) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int i = 0; i < 100 && out_fd_ >= 0; ++i) pump(10);
  if (out_fd_ >= 0) {
    ::close(out_fd_);  // a process outside the group still holds the pipe
    out_fd_ = -1;
  }
  pid_ = -1;
  return clean;
}

}  // namespace dsv4::nightly
