// The steps every suite run shares (artifact folder, suite.json, summary.md, child supervision);
// E2eRun and KernelsRun add what their kind runs.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "process.hpp"
#include "registry.hpp"
#include "run_suite.hpp"

namespace dsv4::nightly {

double now_s();
std::string utc_now();
std::string shell_words(const std::vector<std::string>& argv);

class SuiteRun {
 public:
  SuiteRun(const Registry& reg, const Suite& suite, const RunOptions& opt)
      : reg_(reg), suite_(suite), opt_(opt) {}
  virtual ~SuiteRun() = default;
  int run();

 protected:
  // The kind's own work; returns an exit code and sets `why`. `failures` lists what failed (each
  // {"kind": "test"|"gate"|"could-not-run", "id", "detail"}) for the report's triage.
  virtual int body(std::string& why) = 0;
  // Extra Markdown for the summary (a table), after the steps.
  virtual std::string summary_extra(int code) { return ""; }

  void say(const std::string& msg);
  size_t step(const std::string& name, const std::vector<std::string>& argv,
              const std::string& log);
  void close_step(size_t i, const std::string& result, double seconds);
  nlohmann::json& st(size_t i) { return manifest_["steps"][i]; }
  void add_failure(const std::string& kind, const std::string& id, const std::string& detail);
  // Waits for `p`; returns its code, or nothing on timeout or interrupt (reason in `why`).
  // `watch` (may be empty) is polled while waiting: a reason it returns stops the wait.
  std::optional<int> supervise(Process& p, double timeout_s, std::string& why,
                               const std::function<std::string()>& watch = {});

  const Registry& reg_;
  const Suite& suite_;
  const RunOptions& opt_;
  std::string out_;
  std::filesystem::path source_;
  nlohmann::json manifest_;
  std::map<std::string, std::string> env_;

 private:
  int finish(int code, const std::string& why);
  // The image, its digest and (e2e, a kernels suite with ctest.sglang_source) the SGLang commit,
  // for the summary.
  std::string provenance() const;
  bool judges_sglang() const { return suite_.kind == Kind::kE2e || suite_.ctest.sglang_source; }
  double started_ = 0;
};

std::unique_ptr<SuiteRun> make_e2e_run(const Registry& reg, const Suite& s, const RunOptions& o);
std::unique_ptr<SuiteRun> make_kernels_run(const Registry& reg, const Suite& s,
                                           const RunOptions& o);

}  // namespace dsv4::nightly
