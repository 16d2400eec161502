// run-suite for e2e suites: the server from the registry (offline when the HF cache holds the
// model), dsv4-eval wait-ready while the server is watched, the gated runner, the server always
// stopped; one retry with HF_HUB_OFFLINE=1 after an attempt that could not run.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include "report/gates.hpp"
#include "suite_run.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace dsv4::nightly {

namespace {

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

// The cache folder of `model` under <HF_HOME>/hub: models--<org>--<name>.
std::string snapshot_dir(const std::string& model) {
  std::string dir = "models--";
  for (char c : model) dir += c == '/' ? std::string("--") : std::string(1, c);
  return dir;
}

// The snapshot folder of `model` in the Hugging Face cache under `hf_home`, when one holds a
// config.json; empty otherwise.
std::string cached_snapshot(const std::string& hf_home, const std::string& model) {
  if (hf_home.empty()) return "";
  const fs::path snaps = fs::path(hf_home) / "hub" / snapshot_dir(model) / "snapshots";
  std::error_code ec;
  if (!fs::is_directory(snaps, ec)) return "";
  for (const auto& e : fs::directory_iterator(snaps, ec))
    if (fs::exists(e.path() / "config.json", ec)) return e.path().string();
  return "";
}

class E2eRun : public SuiteRun {
 public:
  using SuiteRun::SuiteRun;

 protected:
  int body(std::string& why) override {
    std::map<std::string, std::string> extra;
    const char* home = std::getenv("HF_HOME");
    const std::string hf_home = env_.count("HF_HOME") ? env_.at("HF_HOME") : (home ? home : "");
    const std::string snap = cached_snapshot(hf_home, suite_.server.model);
    manifest_["hf_home"] = hf_home;
    manifest_["model_cached"] = snap;
    manifest_["labels"] = labels();
    if (snap.empty() && !suite_.server.allow_download) {
      // Downloading DeepSeek-V4-Pro takes hours and 1.6 TB: a runner without the model is a
      // runner that cannot run this suite.
      why = hf_home.empty()
                ? "HF_HOME is not set, so the model cache holding " + suite_.server.model +
                      " cannot be found (the workflow mounts it: --hf-cache)"
                : "the model cache has no snapshot of " + suite_.server.model + ": looked for " +
                      (fs::path(hf_home) / "hub" / snapshot_dir(suite_.server.model) /
                       "snapshots/*/config.json")
                          .string() +
                      " (server.allow_download is false: no download of the model is started)";
      return kCouldNotRun;
    }
    if (!snap.empty()) {
      extra["HF_HUB_OFFLINE"] = "1";
      say("the HF cache holds " + suite_.server.model + " (" + snap + "): the server runs offline");
    } else {
      say("the HF cache (" + (hf_home.empty() ? std::string("HF_HOME unset") : hf_home) +
          ") has no snapshot of " + suite_.server.model + ": the server may download it");
    }
    manifest_["attempts"] = json::array();
    int code = kCouldNotRun;
    for (int n = 1; n <= 1 + suite_.retries; ++n) {
      if (n > 1) {
        keep_attempt(n - 1);
        extra["HF_HUB_OFFLINE"] = "1";  // as SGLang's AMD exec script retries
        say("attempt " + std::to_string(n) + " of " + std::to_string(1 + suite_.retries) +
            " (HF_HUB_OFFLINE=1) after: " + why);
      }
      why.clear();
      manifest_["failures"] = json::array();
      const size_t first_step = manifest_["steps"].size();
      code = attempt(why, extra);
      manifest_["attempts"].push_back({{"attempt", n},
                                       {"exit_code", code},
                                       {"reason", why},
                                       {"first_step", first_step},
                                       {"offline", extra.count("HF_HUB_OFFLINE") > 0}});
      // Only a run that could not run is retried: a gate result is a result.
      if (code != kCouldNotRun || stop_requested()) break;
    }
    record_gates();
    return code;
  }

  std::string summary_extra(int code) override {
    std::string md;
    const json& attempts = manifest_["attempts"];
    if (attempts.size() > 1) {
      md += "\nRetried: ";
      for (const auto& a : attempts)
        md += "attempt " + std::to_string(a.value("attempt", 0)) + " exit " +
              std::to_string(a.value("exit_code", 0)) + " (" + a.value("reason", "") + "); ";
      md += "attempt 1's logs are in attempt-1/.\n";
    }
    if (!gates_md_.empty()) md += "\n" + gates_md_;
    if (code >= kUsage) {
      md += "\n<details><summary>last lines of server.log</summary>\n\n```\n";
      for (const auto& l : tail_lines(out_ + "/server.log", 30)) md += l + "\n";
      md += "```\n</details>\n";
    }
    return md;
  }

 private:
  // Moves one attempt's logs and reports to attempt-N/ so the next attempt starts clean.
  void keep_attempt(int n) {
    const fs::path dir = fs::path(out_) / ("attempt-" + std::to_string(n));
    fs::create_directories(dir);
    for (const char* f : {"server.log", "server.port", "wait-ready.log", "runner.log", "eval"}) {
      std::error_code ec;
      if (fs::exists(fs::path(out_) / f, ec)) fs::rename(fs::path(out_) / f, dir / f, ec);
    }
  }

  // The gates dsv4-eval wrote to eval/report.json: each failed one is a failure for the triage.
  void record_gates() {
    const std::string path = out_ + "/eval/report.json";
    if (!fs::exists(path)) return;
    json rep;
    try {
      rep = json::parse(read_text(path));
    } catch (const std::exception&) {
      return;
    }
    if (!rep.contains("gates") || !rep["gates"].is_array()) return;
    gates_md_ = "| gate | value | verdict |\n|---|---|---|\n";
    for (const auto& g : rep["gates"]) {
      const std::string text = g.value("gate", "");
      const std::string verdict = g.value("verdict", "");
      const std::string value = g.contains("value") && g["value"].is_number()
                                    ? eval::format_number(g["value"].get<double>())
                                    : std::string("—");
      gates_md_ += "| `" + text + "` | " + value + " | " + verdict + " |\n";
      if (!g.value("pass", false)) add_failure("gate", text, g.value("detail", verdict));
    }
  }

  // One attempt: server, wait-ready, runner with its gates; the server is always stopped.
  int attempt(std::string& why, const std::map<std::string, std::string>& extra_env) {
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
                                               {"out", out_},
                                               {"model", sv.model}};
    std::vector<std::string> server_argv;
    for (const auto& a : sv.command) server_argv.push_back(substitute(a, vars));
    auto server_env = env_;
    for (const auto& [k, v] : sv.env) server_env[k] = v;
    for (const auto& [k, v] : extra_env) server_env[k] = v;

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
    // Beside report.json, so `dsv4-eval report DIR... --group-by backend,spec` groups the runs.
    write_text(eval_out + "/labels.json", manifest_["labels"].dump(2) + "\n");
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

  // The value after `flag` in the server's command line, or `def`.
  std::string flag_value(const std::string& flag, const std::string& def) const {
    const auto& c = suite_.server.command;
    for (size_t i = 0; i + 1 < c.size(); ++i)
      if (c[i] == flag) return c[i + 1];
    return def;
  }

  // The configuration `dsv4-eval report` groups runs by: suite, model, FlashMLA backend,
  // speculation, attention backend, TP and DP.
  json labels() const {
    std::string backend = "default";
    for (const auto* env : {&suite_.env, &suite_.server.env})
      if (auto it = env->find("SGLANG_HACK_FLASHMLA_BACKEND"); it != env->end())
        backend = it->second;
    std::string spec = flag_value("--speculative-algorithm", "off");
    for (auto& ch : spec) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return {{"suite", suite_.name},
            {"model", suite_.server.model},
            {"backend", backend},
            {"spec", spec},
            {"attention", flag_value("--attention-backend", "default")},
            {"tp", flag_value("--tp", "1")},
            {"dp", flag_value("--dp", "1")}};
  }

  std::string gates_md_;
};

}  // namespace

std::unique_ptr<SuiteRun> make_e2e_run(const Registry& reg, const Suite& s, const RunOptions& o) {
  return std::make_unique<E2eRun>(reg, s, o);
}

}  // namespace dsv4::nightly
