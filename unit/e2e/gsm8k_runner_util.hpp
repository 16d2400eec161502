// Helpers of the gsm8k runner tests: a base test-server config and one in-process gsm8k run.
#pragma once

#include "e2e_test_util.hpp"
#include "gsm8k/gsm8k_data.hpp"
#include "gsm8k/progress.hpp"
#include "http/http_client.hpp"

namespace dsv4::e2e_test {

inline test_server::TestServerConfig base_config(const std::string& data, uint64_t seed) {
  test_server::TestServerConfig c;
  c.data_path = data;
  c.seed = seed;
  c.threads = 48;
  return c;
}

struct GsmRun {
  int rc = -1;
  std::string err;  // the command's stderr
  nlohmann::json report;
  std::vector<nlohmann::json> results;
};

// `dsv4-eval gsm8k` with small-run defaults (every question, 3 shots, parallel 16, quick retries).
inline GsmRun run_gsm8k(const std::string& url, const std::string& data, const std::string& out,
                        const std::vector<std::string>& extra) {
  std::vector<std::string> args = {
      "gsm8k", "--url",           url,    "--data",      data, "--out",
      out,     "--num-questions", "0",    "--num-shots", "3",  "--parallel",
      "16",    "--backoff",       "0.01", "--timeout",   "10", "--progress-interval",
      "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  GsmRun r;
  r.rc = run_eval_capture(args, r.err);
  if (fs::exists(out + "/report.json")) r.report = read_report(out);
  if (fs::exists(out + "/results.jsonl")) r.results = read_results(out);
  return r;
}

// The prompts dsv4-eval builds for `data` with k shots.
inline std::vector<std::string> build_prompts(const std::string& data, size_t k) {
  const auto recs = eval::gsm8k::load_jsonl(data);
  const std::string prefix = eval::gsm8k::few_shot_prefix(
      std::vector<eval::gsm8k::Record>(recs.begin(), recs.begin() + long(k)));
  std::vector<std::string> out;
  for (const auto& r : recs) out.push_back(prefix + eval::gsm8k::format_example(r, false));
  return out;
}

}  // namespace dsv4::e2e_test
