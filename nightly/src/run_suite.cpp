// run-suite: e2e suites (server from the registry, wait-ready, gated runner, server always stopped)
// and kernels suites (resource spec, ctest with the suite's label, JUnit, families x checks table).
#include "run_suite.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "junit.hpp"
#include "process.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace dsv4::nightly {

const char* exit_meaning(int code) {
  switch (code) {
    case kPass:
      return "pass";
    case kGateFailed:
      return "gate failed";
    case kUsage:
      return "bad usage or config";
    default:
      return "could not run";
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write '" + path + "'");
}

void append_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << text;
}

std::vector<std::string> tail_lines(const std::string& path, size_t n) {
  std::vector<std::string> lines;
  std::istringstream in(read_text(path));
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > n) lines.erase(lines.begin());
  }
  return lines;
}

namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string shell_words(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    if (a.find_first_of(" \t'\"$<>|&;*?()") == std::string::npos && !a.empty()) {
      s += a;
    } else {
      s += '\'';
      for (char c : a) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
      s += '\'';
    }
  }
  return s;
}

// A free TCP port on 127.0.0.1 (the kernel picks it); 0 on failure.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

class SuiteRun {
 public:
  SuiteRun(const Registry& reg, const Suite& suite, const RunOptions& opt)
      : reg_(reg), suite_(suite), opt_(opt) {}

  int run() {
    out_ = fs::absolute(opt_.out.empty() ? reg_.nightly.artifact_dir + "/" + suite_.name : opt_.out)
               .lexically_normal()
               .string();
    std::error_code ec;
    fs::create_directories(out_, ec);
    if (ec) {
      std::cerr << "run-suite: cannot create the artifact folder '" << out_ << "': " << ec.message()
                << "\n";
      return kCouldNotRun;
    }
    source_ = fs::absolute(opt_.source_dir.empty() ? "." : opt_.source_dir).lexically_normal();
    started_ = now_s();
    manifest_ = {{"suite", suite_.name},
                 {"kind", kind_name(suite_.kind)},
                 {"description", suite_.description},
                 {"runs_on", suite_.runs_on},
                 {"registry", reg_.file},
                 {"artifacts", out_},
                 {"started", utc_now()},
                 {"steps", json::array()}};
    env_ = suite_.env;
    std::string path;
    if (!opt_.build_dir.empty()) {
      const fs::path b = fs::absolute(opt_.build_dir);
      for (const char* sub : {"e2e", "fixtures/server", "nightly"})
        path += (b / sub).lexically_normal().string() + ":";
    }
    const char* sys_path = std::getenv("PATH");
    env_["PATH"] = path + (sys_path ? sys_path : "/usr/bin:/bin");
    say("suite " + suite_.name + " (" + kind_name(suite_.kind) + "), artifacts in " + out_);
    int code;
    std::string why;
    try {
      code = suite_.kind == Kind::kE2e ? e2e(why) : kernels(why);
    } catch (const std::exception& e) {
      code = kCouldNotRun;
      why = e.what();
    }
    return finish(code, why);
  }

 private:
  void say(const std::string& msg) {
    std::cerr << "run-suite: " << msg << std::endl;
    append_text(out_ + "/run-suite.log", utc_now() + " " + msg + "\n");
  }

  json& st(size_t i) { return manifest_["steps"][i]; }

  size_t step(const std::string& name, const std::vector<std::string>& argv,
              const std::string& log) {
    manifest_["steps"].push_back({{"name", name},
                                  {"command", argv},
                                  {"log", fs::path(log).filename().string()},
                                  {"started", utc_now()}});
    say(name + ": " + shell_words(argv));
    return manifest_["steps"].size() - 1;
  }

  void close_step(size_t i, const std::string& result, double seconds) {
    st(i)["result"] = result;
    st(i)["seconds"] = std::round(seconds * 10) / 10;
  }

  // Waits for `p`; returns its code, or nothing on timeout or interrupt. `watch` (may be null)
  // is checked while waiting: when it returns a reason, the wait stops with that reason.
  std::optional<int> supervise(Process& p, double timeout_s, std::string& why,
                               const std::function<std::string()>& watch = {}) {
    const double deadline = now_s() + timeout_s;
    for (;;) {
      if (auto code = p.wait(0.2)) return code;
      if (stop_requested()) {
        why = "interrupted by a signal";
        return std::nullopt;
      }
      if (now_s() >= deadline) {
        why = "did not finish within " + std::to_string(static_cast<long>(timeout_s)) + " s";
        return std::nullopt;
      }
      if (watch) {
        why = watch();
        if (!why.empty()) return std::nullopt;
      }
    }
  }

  int e2e(std::string& why) {
    const Server& sv = suite_.server;
    const std::string port_file = out_ + "/server.port";
    fs::remove(port_file);
    bool uses_port_file = false;
    for (const auto& a : sv.command) uses_port_file |= a.find("{port_file}") != std::string::npos;
    int port = sv.port;
    if (port == 0 && !uses_port_file) port = free_port();
    std::map<std::string, std::string> vars = {{"host", "127.0.0.1"},
                                               {"port", std::to_string(port)},
                                               {"port_file", port_file},
                                               {"out", out_}};
    std::vector<std::string> server_argv;
    for (const auto& a : sv.command) server_argv.push_back(substitute(a, vars));
    auto server_env = env_;
    for (const auto& [k, v] : sv.env) server_env[k] = v;

    const size_t s_step = step("server", server_argv, out_ + "/server.log");
    const double server_started = now_s();
    std::optional<Process> server;
    try {
      server.emplace(Process::start({server_argv, server_env, out_ + "/server.log", false, ""}));
    } catch (const std::exception& e) {
      close_step(s_step, "could not start", 0);
      why = std::string("the server could not start: ") + e.what();
      return kCouldNotRun;
    }
    manifest_["server_pid"] = server->pid();
    int code = serve(*server, port, uses_port_file, port_file, why);

    say("stopping the server (SIGTERM to its process group, " + std::to_string(sv.stop_grace_s) +
        " s grace, then SIGKILL)");
    const bool was_running = server->running();
    const bool clean = server->stop(sv.stop_grace_s);
    const std::string how = was_running ? (clean ? "stopped" : "killed after the grace period")
                                        : "had exited by itself (" + server->describe_exit() + ")";
    close_step(s_step, how, now_s() - server_started);
    st(s_step)["exit"] = server->describe_exit();
    say("server " + how);
    if (code == kCouldNotRun || code == kUsage) {
      say("last lines of server.log:");
      for (const auto& l : tail_lines(out_ + "/server.log", 20)) std::cerr << "  | " << l << "\n";
    }
    return code;
  }

  int serve(Process& server, int port, bool uses_port_file, const std::string& port_file,
            std::string& why) {
    const Server& sv = suite_.server;
    const double ready_deadline = now_s() + sv.ready_timeout_s;
    auto server_gone = [&]() -> std::string {
      if (server.running()) return "";
      return "the server exited (" + server.describe_exit() + ") before it was ready";
    };
    if (uses_port_file) {  // the server writes the port it bound
      for (;;) {
        const std::string text = read_text(port_file);
        if (!text.empty() && text.find_first_not_of("0123456789\n ") == std::string::npos) {
          port = std::atoi(text.c_str());
          if (port > 0) break;
        }
        why = server_gone();
        if (!why.empty()) return kCouldNotRun;
        if (stop_requested()) return why = "interrupted by a signal", kCouldNotRun;
        if (now_s() >= ready_deadline)
          return why = "the server wrote no port to " + port_file + " within " +
                       std::to_string(sv.ready_timeout_s) + " s",
                 kCouldNotRun;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    if (port <= 0) return why = "no free port on 127.0.0.1 for the server", kCouldNotRun;
    const std::string url = "http://127.0.0.1:" + std::to_string(port);
    manifest_["url"] = url;

    // wait-ready, while watching the server
    const double left = std::max(1.0, ready_deadline - now_s());
    // The runner's own dsv4-eval when the runner is one, else the one on PATH.
    const std::string& runner0 = suite_.run.command.front();
    const std::string eval =
        fs::path(runner0).filename() == "dsv4-eval" ? runner0 : std::string("dsv4-eval");
    std::vector<std::string> wr_argv = {
        eval, "wait-ready", "--url",
        url,  "--timeout",  std::to_string(static_cast<long>(std::ceil(left)))};
    const size_t w_step = step("wait-ready", wr_argv, out_ + "/wait-ready.log");
    double t0 = now_s();
    {
      Process wr = Process::start({wr_argv, env_, out_ + "/wait-ready.log", true, ""});
      auto rc = supervise(wr, left + 30, why, server_gone);
      if (!rc) {
        wr.stop(5);
        close_step(w_step, "stopped: " + why, now_s() - t0);
        why = "the server did not become ready: " + why;
        return kCouldNotRun;
      }
      st(w_step)["exit"] = *rc;
      close_step(w_step, *rc == 0 ? "ready" : "not ready", now_s() - t0);
      if (*rc != 0) {
        why = "dsv4-eval wait-ready exited with " + std::to_string(*rc) + " (" +
              exit_meaning(*rc == kUsage ? kUsage : kCouldNotRun) + ")";
        return *rc == kUsage ? kUsage : kCouldNotRun;
      }
    }

    // the runner and its gates
    const std::string eval_out = out_ + "/eval";
    fs::create_directories(eval_out);
    std::vector<std::string> run_argv;
    for (const auto& a : suite_.run.command)
      run_argv.push_back(substitute(a, {{"url", url}, {"out", eval_out}}));
    for (const auto& g : suite_.run.gates) {
      run_argv.push_back("--gate");
      run_argv.push_back(g);
    }
    const size_t r_step = step("run", run_argv, out_ + "/runner.log");
    t0 = now_s();
    Process runner = Process::start({run_argv, env_, out_ + "/runner.log", true, ""});
    double server_died_at = 0;
    auto watch = [&]() -> std::string {
      if (server_died_at == 0 && !server.running()) {
        server_died_at = now_s();
        say("the server exited (" + server.describe_exit() + ") while the runner was running");
      }
      if (server_died_at > 0 && now_s() - server_died_at > 30)
        return "the server exited (" + server.describe_exit() + ") during the run";
      return "";
    };
    auto rc = supervise(runner, suite_.run.timeout_s, why, watch);
    if (!rc) {
      runner.stop(10);
      close_step(r_step, "stopped: " + why, now_s() - t0);
      why = "the runner " + why;
      return kCouldNotRun;
    }
    st(r_step)["exit"] = *rc;
    close_step(r_step, exit_meaning(*rc), now_s() - t0);
    if (*rc >= kPass && *rc <= kCouldNotRun) {
      why = std::string("the runner exited with ") + std::to_string(*rc) + " (" +
            exit_meaning(*rc) + ")";
      return *rc;
    }
    why = "the runner ended with " + runner.describe_exit();
    return kCouldNotRun;
  }

  int kernels(std::string& why) {
    const Ctest& ct = suite_.ctest;
    const std::string spec = out_ + "/resource-spec.json";
    std::vector<std::string> spec_argv = {
        "bash",     (source_ / "nightly/gpu-resource-spec.sh").string(),
        "--slots",  std::to_string(ct.slots_per_gpu),
        "--output", spec};
    const size_t g_step = step("resource-spec", spec_argv, out_ + "/resource-spec.log");
    double t0 = now_s();
    {
      Process p = Process::start({spec_argv, env_, out_ + "/resource-spec.log", true, ""});
      auto rc = supervise(p, 120, why);
      if (!rc || *rc != 0) {
        if (!rc) p.stop(5);
        close_step(g_step, "failed", now_s() - t0);
        why = "no CTest resource spec: nightly/gpu-resource-spec.sh " +
              (rc ? "exited with " + std::to_string(*rc) : why) + " (see resource-spec.log)";
        return kCouldNotRun;
      }
      close_step(g_step, "written", now_s() - t0);
    }

    const std::string junit = out_ + "/junit.xml";
    fs::remove(junit);
    std::vector<std::string> argv = {"ctest"};
    if (!ct.test_preset.empty()) {
      argv.insert(argv.end(), {"--preset", ct.test_preset});
    } else {
      argv.insert(argv.end(), {"--test-dir", (source_ / ct.test_dir).lexically_normal().string()});
    }
    argv.insert(argv.end(),
                {"-L", ct.label, "--resource-spec-file", spec, "-j", std::to_string(ct.parallel),
                 "--output-junit", junit, "--output-on-failure", "--no-tests=error"});
    const size_t c_step = step("ctest", argv, out_ + "/ctest.log");
    t0 = now_s();
    Process p = Process::start({argv, env_, out_ + "/ctest.log", true, source_.string()});
    auto rc = supervise(p, ct.timeout_s, why);
    if (!rc) {
      p.stop(30);
      close_step(c_step, "stopped: " + why, now_s() - t0);
      why = "ctest " + why;
    } else {
      st(c_step)["exit"] = *rc;
      close_step(c_step, *rc == 0 ? "passed" : "exit " + std::to_string(*rc), now_s() - t0);
    }
    if (!fs::exists(junit)) {
      if (rc) why = "ctest exited with " + std::to_string(*rc) + " and wrote no JUnit file";
      return kCouldNotRun;
    }
    const auto results = read_junit(junit);
    table_ = summary_table(suite_.name, results, ct);
    std::cout << table_ << std::flush;
    int failed = 0;
    for (const auto& r : results) failed += r.outcome == Outcome::kFail;
    manifest_["tests"] = results.size();
    manifest_["tests_failed"] = failed;
    if (failed > 0) {
      why = std::to_string(failed) + " of " + std::to_string(results.size()) + " tests failed";
      return kGateFailed;
    }
    if (!rc) return kCouldNotRun;
    if (*rc != 0) {
      why = "ctest exited with " + std::to_string(*rc) +
            " though no test failed (tests not run: see ctest.log)";
      return kCouldNotRun;
    }
    if (results.empty()) return why = "no test ran", kCouldNotRun;
    why = std::to_string(results.size()) + " tests, none failed";
    return kPass;
  }

  int finish(int code, const std::string& why) {
    manifest_["finished"] = utc_now();
    manifest_["seconds"] = std::round((now_s() - started_) * 10) / 10;
    manifest_["exit_code"] = code;
    manifest_["result"] = exit_meaning(code);
    manifest_["reason"] = why;
    std::vector<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(out_))
      if (e.is_regular_file()) files.push_back(fs::relative(e.path(), out_).string());
    std::sort(files.begin(), files.end());
    files.push_back("suite.json");
    files.push_back("summary.md");
    manifest_["files"] = files;
    write_text(out_ + "/suite.json", manifest_.dump(2) + "\n");

    std::ostringstream md;
    md << "## " << suite_.name << ": " << (code == kPass ? "✅ " : "❌ ") << exit_meaning(code)
       << " (exit " << code << ")\n\n"
       << why << "\n\n| step | result | seconds | log |\n|---|---|---|---|\n";
    for (const auto& s : manifest_["steps"])
      md << "| " << s.value("name", "") << " | " << s.value("result", "") << " | "
         << s.value("seconds", 0.0) << " | " << s.value("log", "") << " |\n";
    if (!table_.empty()) md << "\n" << table_;
    if (suite_.kind == Kind::kE2e && code >= kUsage) {
      md << "\n<details><summary>last lines of server.log</summary>\n\n```\n";
      for (const auto& l : tail_lines(out_ + "/server.log", 30)) md << l << "\n";
      md << "```\n</details>\n";
    }
    write_text(out_ + "/summary.md", md.str());
    if (const char* gs = std::getenv("GITHUB_STEP_SUMMARY"); gs && *gs)
      append_text(gs, md.str() + "\n");
    say(suite_.name + ": exit " + std::to_string(code) + " (" + exit_meaning(code) + "): " + why);
    return code;
  }

  const Registry& reg_;
  const Suite& suite_;
  const RunOptions& opt_;
  std::string out_;
  fs::path source_;
  double started_ = 0;
  json manifest_;
  std::map<std::string, std::string> env_;
  std::string table_;
};

}  // namespace

int run_suite(const Registry& reg, const RunOptions& opt) {
  const Suite* s = reg.find(opt.suite);
  if (s == nullptr) {
    std::cerr << "run-suite: suite '" << opt.suite << "' is not registered in " << reg.file
              << "; registered:";
    for (const auto& x : reg.suites) std::cerr << " " << x.name;
    std::cerr << "\n";
    return kUsage;
  }
  install_stop_handlers();
  return SuiteRun(reg, *s, opt).run();
}

}  // namespace dsv4::nightly
