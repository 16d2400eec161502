// run-suite for kernels suites: the CTest resource spec of the node's GPUs, ctest with the suite's
// label spread over them, JUnit (shards expanded to their GoogleTest tests), and the families x
// checks table; failing tests write their case files to $DSV4_CASE_DIR (default <artifacts>/cases).
#include <filesystem>
#include <iostream>
#include <map>

#include "junit.hpp"
#include "suite_run.hpp"

namespace fs = std::filesystem;

namespace dsv4::nightly {

namespace {

class KernelsRun : public SuiteRun {
 public:
  using SuiteRun::SuiteRun;

 protected:
  int body(std::string& why) override {
    if (!env_.count("DSV4_CASE_DIR")) {
      const char* set = std::getenv("DSV4_CASE_DIR");
      env_["DSV4_CASE_DIR"] = set && *set ? set : out_ + "/cases";
    }
    // Tests run in their own build folders: a relative folder would scatter the case files there,
    // outside the uploaded artifact.
    env_["DSV4_CASE_DIR"] = fs::absolute(env_["DSV4_CASE_DIR"]).lexically_normal().string();
    fs::create_directories(env_["DSV4_CASE_DIR"]);
    manifest_["case_dir"] = env_["DSV4_CASE_DIR"];
    return kernels(why);
  }

  std::string summary_extra(int) override { return table_.empty() ? "" : "\n" + table_; }

 private:
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
    fs::remove_all(out_ + "/junit");  // the shards' GoogleTest XML, copied here after the run
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
    // Shards stand for their GoogleTest tests, each named; their XML goes with the artifact.
    const auto results = expand_shards(read_junit(junit), out_, out_);
    table_ = summary_table(suite_.name, results, ct);
    std::cout << table_ << std::flush;
    int failed = 0, passed = 0, skipped = 0;
    std::string skip_reason;
    for (const auto& r : results) {
      if (r.outcome == Outcome::kPass) ++passed;
      if (r.outcome == Outcome::kSkip && skipped++ == 0) skip_reason = r.name + ": " + r.message;
      if (r.outcome != Outcome::kFail) continue;
      ++failed;
      add_failure("test", r.name, r.message);
    }
    manifest_["tests"] = results.size();
    manifest_["tests_failed"] = failed;
    manifest_["tests_passed"] = passed;
    manifest_["tests_skipped"] = skipped;
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
    // A run in which every test skipped checked nothing (no GPU seen, a missing variable): it is
    // no pass.
    if (passed == 0)
      return why = "every one of the " + std::to_string(skipped) +
                   " tests skipped, so nothing was checked (first: " + skip_reason + ")",
             kCouldNotRun;
    // Nor is one in which a family the suite names ran nothing: its kernels were not checked.
    std::map<std::string, Counts> by_family;
    for (const auto& r : results) {
      Counts& c = by_family[family_of(r.name, ct.families)];
      if (r.outcome == Outcome::kPass) ++c.pass;
      if (r.outcome == Outcome::kSkip) ++c.skip;
    }
    std::string unchecked;
    for (const auto& f : ct.families) {
      const Counts c = by_family.count(f) ? by_family[f] : Counts{};
      if (c.pass > 0) continue;
      unchecked += (unchecked.empty() ? "" : ", ") + f +
                   (c.skip ? " (" + std::to_string(c.skip) + " skipped)" : " (no test)");
    }
    manifest_["families_unchecked"] = unchecked;
    if (!unchecked.empty())
      return why = "no test ran for the families " + unchecked + " (" + std::to_string(passed) +
                   " passed, " + std::to_string(skipped) + " skipped in all)",
             kCouldNotRun;
    why = std::to_string(results.size()) + " tests, none failed";
    return kPass;
  }

  std::string table_;
};

}  // namespace

std::unique_ptr<SuiteRun> make_kernels_run(const Registry& reg, const Suite& s,
                                           const RunOptions& o) {
  return std::make_unique<KernelsRun>(reg, s, o);
}

}  // namespace dsv4::nightly
