// run-suite: the steps every suite shares (artifact folder, suite.json with what the report's
// triage groups runs by, summary.md); the kinds are in run_e2e.cpp and run_kernels.cpp.
#include "run_suite.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "suite_run.hpp"

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

int SuiteRun::run() {
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
  auto env_or = [](const char* k) {
    const char* v = std::getenv(k);
    return std::string(v ? v : "");
  };
  // What the report groups runs by: the workflow run, its attempt, the commit and the event.
  manifest_ = {{"suite", suite_.name},
               {"kind", kind_name(suite_.kind)},
               {"description", suite_.description},
               {"runs_on", suite_.runs_on},
               {"registry", reg_.file},
               {"artifacts", out_},
               {"run_id", env_or("GITHUB_RUN_ID")},
               {"run_attempt", env_or("GITHUB_RUN_ATTEMPT")},
               {"sha", env_or("GITHUB_SHA")},
               {"event", env_or("GITHUB_EVENT_NAME")},
               {"workflow", env_or("GITHUB_WORKFLOW")},
               {"repository", env_or("GITHUB_REPOSITORY")},
               // What ran: the image (ci/gpu-container.sh start sets both) and, for e2e, the
               // SGLang commit installed into it (the workflow passes it).
               {"image", env_or("DSV4_IMAGE")},
               {"image_digest", env_or("DSV4_IMAGE_DIGEST")},
               {"started", utc_now()},
               {"steps", json::array()},
               {"failures", json::array()}};
  if (judges_sglang()) manifest_["sglang_commit"] = env_or("DSV4_SGLANG_COMMIT");
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
    code = body(why);
  } catch (const std::exception& e) {
    code = kCouldNotRun;
    why = e.what();
  }
  if (code == kCouldNotRun && manifest_["failures"].empty()) add_failure("could-not-run", "", why);
  return finish(code, why);
}

void SuiteRun::say(const std::string& msg) {
  std::cerr << "run-suite: " << msg << std::endl;
  append_text(out_ + "/run-suite.log", utc_now() + " " + msg + "\n");
}

size_t SuiteRun::step(const std::string& name, const std::vector<std::string>& argv,
                      const std::string& log) {
  manifest_["steps"].push_back({{"name", name},
                                {"command", argv},
                                {"log", fs::path(log).filename().string()},
                                {"started", utc_now()}});
  say(name + ": " + shell_words(argv));
  return manifest_["steps"].size() - 1;
}

void SuiteRun::close_step(size_t i, const std::string& result, double seconds) {
  st(i)["result"] = result;
  st(i)["seconds"] = std::round(seconds * 10) / 10;
}

void SuiteRun::add_failure(const std::string& kind, const std::string& id,
                           const std::string& detail) {
  manifest_["failures"].push_back({{"kind", kind}, {"id", id}, {"detail", detail}});
}

// Waits for `p`; returns its code, or nothing on timeout or interrupt. `watch` (may be null)
// is checked while waiting: when it returns a reason, the wait stops with that reason.
std::optional<int> SuiteRun::supervise(Process& p, double timeout_s, std::string& why,
                                       const std::function<std::string()>& watch) {
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

std::string SuiteRun::provenance() const {
  auto shown = [&](const char* key, const char* var) {
    const std::string v = manifest_.value(key, "");
    return v.empty() ? std::string("not recorded (") + var + " unset)" : "`" + v + "`";
  };
  std::string s = "Image " + shown("image", "DSV4_IMAGE") + ", digest " +
                  shown("image_digest", "DSV4_IMAGE_DIGEST");
  if (judges_sglang()) s += "; SGLang commit " + shown("sglang_commit", "DSV4_SGLANG_COMMIT");
  return s + ".";
}

int SuiteRun::finish(int code, const std::string& why) {
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
     << why << "\n\n"
     << provenance() << "\n\n| step | result | seconds | log |\n|---|---|---|---|\n";
  for (const auto& s : manifest_["steps"])
    md << "| " << s.value("name", "") << " | " << s.value("result", "") << " | "
       << s.value("seconds", 0.0) << " | " << s.value("log", "") << " |\n";
  md << summary_extra(code);
  write_text(out_ + "/summary.md", md.str());
  if (const char* gs = std::getenv("GITHUB_STEP_SUMMARY"); gs && *gs)
    append_text(gs, md.str() + "\n");
  say(suite_.name + ": exit " + std::to_string(code) + " (" + exit_meaning(code) + "): " + why);
  return code;
}

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
  auto run = s->kind == Kind::kE2e ? make_e2e_run(reg, *s, opt) : make_kernels_run(reg, *s, opt);
  return run->run();
}

}  // namespace dsv4::nightly
