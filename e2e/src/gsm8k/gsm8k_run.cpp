// The GSM8K engine: data and prompts, the request loop, results.jsonl with resume, the reports.
#include "gsm8k/gsm8k_run.hpp"

#include <unistd.h>
#include <csignal>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>

#include "commands/command.hpp"
#include "gsm8k/gsm8k_data.hpp"
#include "gsm8k/gsm8k_metrics.hpp"
#include "gsm8k/progress.hpp"
#include "http/download.hpp"
#include "http/http_client.hpp"
#include "http/sha256.hpp"
#include "report/results_log.hpp"
#include "report/run_report.hpp"

namespace dsv4::eval {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::vector<std::string>& gsm8k_metric_names() {
  static const std::vector<std::string> names = {"accuracy",
                                                 "invalid",
                                                 "failed",
                                                 "questions",
                                                 "latency",
                                                 "output_throughput",
                                                 "latency_p50",
                                                 "latency_p90",
                                                 "latency_p99",
                                                 "latency_max",
                                                 "completion_tokens_total",
                                                 "completion_tokens_mean",
                                                 "accept_length",
                                                 "accept_length_min",
                                                 "request_accept_length_mean",
                                                 "request_accept_length_p10",
                                                 "request_accept_length_p50",
                                                 "request_accept_length_p90",
                                                 "request_accept_length_total",
                                                 "requests_sent",
                                                 "retries",
                                                 "resumed",
                                                 "client_cpu_s",
                                                 "client_cpu_ms_per_request",
                                                 "client_cpu_fraction"};
  return names;
}

bool is_gsm8k_metric(const std::string& name) {
  static const std::regex rank(R"(accept_length_rank[0-9]+)");
  for (const auto& n : gsm8k_metric_names())
    if (n == name) return true;
  return std::regex_match(name, rank);
}

namespace {

volatile std::sig_atomic_t g_signal = 0;
extern "C" void on_stop_signal(int sig) { g_signal = sig; }

// SIGINT/SIGTERM during the request loop end the run like a fatal error: in-flight requests are
// cancelled, reports are written (status ERROR), exit 3; the previous handlers come back after.
class StopSignals {
 public:
  StopSignals() {
    g_signal = 0;
    old_int_ = std::signal(SIGINT, on_stop_signal);
    old_term_ = std::signal(SIGTERM, on_stop_signal);
  }
  ~StopSignals() {
    std::signal(SIGINT, old_int_);
    std::signal(SIGTERM, old_term_);
  }

 private:
  void (*old_int_)(int);
  void (*old_term_)(int);
};

struct Prepared {
  std::vector<gsm8k::Record> records;  // the questions asked (first N of the file)
  std::vector<std::string> prompts;
  std::vector<std::string> hashes;  // sha256 of each prompt, first 16 hex digits
  std::string data_path, data_sha256;
  size_t shots = 0;
};

// Loads data and shots and builds every prompt; throws UsageError / DataError / DownloadError.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Prepared prepare(const Gsm8kConfig& c) {
  Prepared p;
  if (!c.data_path.empty()) {
    p.data_path = c.data_path;
  } else {
    p.data_path = fetch_cached(c.data_url, c.data_sha256, c.cache_dir);
  }
  const auto digest = sha256_file(p.data_path);
  if (!digest) throw gsm8k::DataError("cannot read '" + p.data_path + "'");
  p.data_sha256 = *digest;
  if (!c.data_path.empty() && !c.data_sha256.empty() && p.data_sha256 != c.data_sha256)
    throw ChecksumError("sha256 of --data '" + c.data_path + "' is " + p.data_sha256 +
                        ", expected --data-sha256 " + c.data_sha256);
  std::vector<gsm8k::Record> all = gsm8k::load_jsonl(p.data_path);
  const size_t n = c.num_questions == 0 ? all.size() : c.num_questions;
  if (n > all.size())
    throw UsageError("--num-questions " + std::to_string(n) + " exceeds the " +
                     std::to_string(all.size()) + " questions in '" + p.data_path + "'");
  std::vector<gsm8k::Record> shot_pool =
      c.shots_from.empty() ? all : gsm8k::load_jsonl(c.shots_from);
  if (c.num_shots > shot_pool.size())
    throw UsageError("--num-shots " + std::to_string(c.num_shots) + " exceeds the " +
                     std::to_string(shot_pool.size()) + " records in '" +
                     (c.shots_from.empty() ? p.data_path : c.shots_from) + "'");
  shot_pool.resize(c.num_shots);
  p.shots = c.num_shots;
  const std::string prefix = gsm8k::few_shot_prefix(shot_pool);
  all.resize(n);
  p.records = std::move(all);
  for (const auto& r : p.records) {
    p.prompts.push_back(prefix + gsm8k::format_example(r, false));
    p.hashes.push_back(sha256_hex(p.prompts.back()).substr(0, 16));
  }
  return p;
}

std::string fetch_model_name(const std::string& url) {
  HttpRequest r;
  r.method = "GET";
  r.url = url + "/v1/models";
  r.timeout_s = 30;
  r.max_attempts = 3;
  HttpResult res = http_fetch(std::move(r));
  if (!res.ok()) return "";
  json j = json::parse(res.body, nullptr, false);
  if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
      j["data"][0].contains("id") && j["data"][0]["id"].is_string())
    return j["data"][0]["id"].get<std::string>();
  return "";
}

// POST /flush_cache before the run so the server's accept counters cover exactly this run.
// Returns "" when flushed, "unreachable: ..." when the server cannot be reached, else a note.
std::string flush_cache(const Gsm8kConfig& c) {
  std::string last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    HttpRequest r;
    r.url = c.url + "/flush_cache";
    r.timeout_s = 60;
    r.max_attempts = c.retries + 1;
    r.backoff_s = c.backoff_s;
    HttpResult res = http_fetch(std::move(r));
    if (res.ok()) return "";
    if (res.error == HttpErrorKind::kConnect || res.error == HttpErrorKind::kTimeout ||
        res.error == HttpErrorKind::kTransport)
      return "unreachable: " + res.error_message;
    last = res.error_message;
    if (res.status != 400) break;  // 400: requests still running on the server; wait a little
    ::usleep(1000 * 1000);
  }
  return "flush_cache failed (" + last + "); server accept length may include earlier requests";
}

}  // namespace

int run_gsm8k(const Gsm8kConfig& c) {
  const double t_start = monotonic_seconds();
  RunReport report;
  report.suite = "gsm8k";
  report.title = "GSM8K " + std::string(to_string(c.api)) + " " + c.url;
  auto finish = [&](int code, const std::string& status, const std::string& error) {
    report.exit_code = code;
    report.status = status;
    report.error = error;
    report.duration_s = monotonic_seconds() - t_start;
    std::string werr;
    if (!write_reports(report, c.out_dir, &werr)) {
      std::fprintf(stderr, "dsv4-eval gsm8k: %s\n", werr.c_str());
      if (code == kExitPass || code == kExitGateFailed) return int(kExitCouldNotRun);
    }
    if (!error.empty()) std::fprintf(stderr, "dsv4-eval gsm8k: %s\n", error.c_str());
    std::fprintf(stderr, "dsv4-eval gsm8k: %s (exit %d); reports in %s\n", status.c_str(), code,
                 c.out_dir.c_str());
    return code;
  };

  // 1. Data and prompts (exit 2 on bad data, 3 when the download cannot be made).
  Prepared prep;
  try {
    prep = prepare(c);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "dsv4-eval gsm8k: %s\n", e.what());
    return kExitUsage;
  } catch (const gsm8k::DataError& e) {
    std::fprintf(stderr, "dsv4-eval gsm8k: bad data: %s\n", e.what());
    return kExitUsage;
  } catch (const ChecksumError& e) {
    std::fprintf(stderr, "dsv4-eval gsm8k: bad data: %s\n", e.what());
    return kExitUsage;
  } catch (const DownloadError& e) {
    report.context = {{"url", c.url}, {"data_url", c.data_url}, {"command", c.command_line}};
    return finish(kExitCouldNotRun, "ERROR", e.what());  // CI still gets an errored junit.xml
  }
  const size_t n = prep.records.size();

  // 2. Output directory, resume state.
  std::error_code ec;
  fs::create_directories(c.out_dir, ec);
  if (ec) {
    std::fprintf(stderr, "dsv4-eval gsm8k: cannot create --out '%s': %s\n", c.out_dir.c_str(),
                 ec.message().c_str());
    return kExitCouldNotRun;
  }
  const std::string results_path = (fs::path(c.out_dir) / "results.jsonl").string();
  const std::string accept_path = (fs::path(c.out_dir) / "server_accept.jsonl").string();
  std::map<size_t, json> done;  // index -> successful record
  size_t dropped_tail = 0;
  if (c.resume) {
    try {
      JsonlContents prev = read_jsonl(results_path);
      for (size_t k = 0; k < prev.records.size(); ++k) {
        const json& r = prev.records[k];
        const std::string where = results_path + ":" + std::to_string(prev.lines[k]);
        if (!r.contains("index") || !r["index"].is_number_unsigned())
          throw LogError(where + ": field 'index' missing or not a non-negative integer");
        const size_t i = r["index"].get<size_t>();
        if (i >= n)
          throw LogError(where + ": index " + std::to_string(i) + " is outside this run's " +
                         std::to_string(n) + " questions");
        if (r.value("prompt_sha256", "") != prep.hashes[i])
          throw LogError(where + ": prompt_sha256 '" + r.value("prompt_sha256", "") +
                         "' differs from this run's prompt for question " + std::to_string(i) +
                         " ('" + prep.hashes[i] +
                         "'): data, shots or prompt format changed; use a fresh --out");
        if (r.contains("error")) continue;  // failed before: asked again
        done[i] = r;
      }
      if (prev.dropped_tail) {
        dropped_tail = 1;
        truncate_file(results_path, prev.good_bytes);
      }
    } catch (const LogError& e) {
      std::fprintf(stderr, "dsv4-eval gsm8k: cannot resume: %s\n", e.what());
      return kExitUsage;
    }
  } else {
    fs::remove(accept_path, ec);
  }
  JsonlWriter log;
  if (auto e = log.open(results_path, c.resume); !e.empty()) {
    std::fprintf(stderr, "dsv4-eval gsm8k: %s\n", e.c_str());
    return kExitCouldNotRun;
  }
  const size_t resumed = done.size();

  report.context = {
      {"url", c.url},
      {"api", to_string(c.api)},
      {"data", prep.data_path},
      {"data_sha256", prep.data_sha256},
      {"questions", std::to_string(n)},
      {"shots", std::to_string(prep.shots) + (c.shots_from.empty() ? " (first lines of the data)"
                                                                   : " from " + c.shots_from)},
      {"max_new_tokens", std::to_string(c.max_new_tokens)},
      {"parallel", std::to_string(c.parallel)},
      {"stream", c.stream ? "yes" : "no"},
      {"command", c.command_line}};
  if (resumed > 0 || dropped_tail)
    report.notes.push_back("resumed: " + std::to_string(resumed) + " answers read from " +
                           results_path +
                           (dropped_tail ? " (an interrupted last line dropped)" : ""));

  // 3. The server: flush (also the reachability check), model name for OpenAI APIs.
  GenParams gp;
  gp.max_new_tokens = c.max_new_tokens;
  gp.temperature = c.temperature;
  gp.stops = c.stops;
  gp.stream = c.stream;
  gp.model = c.model;
  const bool need_requests = done.size() < n;
  bool flushed = false;
  if (need_requests && c.flush_cache) {
    const std::string note = flush_cache(c);
    if (note.rfind("unreachable: ", 0) == 0) {
      InvocationStats none;
      none.resumed = resumed;
      Gsm8kSummary s = summarize_gsm8k(prep.records, done, none, {});
      fill_gsm8k_report(report, s, {}, "");
      return finish(kExitCouldNotRun, "ERROR", "server " + c.url + " " + note);
    }
    if (!note.empty()) report.notes.push_back(note);
    flushed = note.empty();
  }
  if (need_requests && c.api != Api::kSglang && gp.model.empty()) {
    gp.model = fetch_model_name(c.url);
    if (gp.model.empty()) gp.model = "default";
  }
  if (!gp.model.empty()) report.context.push_back({"model", gp.model});

  // 4. The request loop.
  InvocationStats inv;
  inv.resumed = resumed;
  size_t failed_now = 0;
  bool aborted = false;
  std::string abort_reason;
  size_t correct_so_far = 0, answered_so_far = 0;
  for (const auto& [i, r] : done) {
    ++answered_so_far;
    if (r.value("correct", false)) ++correct_so_far;
  }
  Progress progress(n, answered_so_far, c.progress_interval_s);
  HttpClient client(HttpClientOptions{.max_in_flight = std::max(1, c.parallel)});
  const std::string url = c.url + generation_path(c.api);
  std::vector<std::unique_ptr<StreamAccumulator>> streams(n);
  std::vector<Completion> parsed(n);
  const double cpu0 = thread_cpu_seconds();
  const double wall0 = monotonic_seconds();
  for (size_t i = 0; i < n; ++i) {
    if (done.count(i)) continue;
    HttpRequest r;
    r.url = url;
    r.body = generation_body(c.api, prep.prompts[i], gp);
    r.timeout_s = c.timeout_s;
    r.max_attempts = c.retries + 1;
    r.backoff_s = c.backoff_s;
    r.sse = c.stream;
    if (c.stream) {
      streams[i] = std::make_unique<StreamAccumulator>(c.api, c.incremental_stream);
      StreamAccumulator* acc = streams[i].get();
      r.on_event = [acc](const SseEvent& ev) { return acc->feed(ev); };
      r.validate = [acc, &parsed, i](const HttpResult&) { return acc->finish(parsed[i]); };
    } else {
      r.validate = [&parsed, i, api = c.api](const HttpResult& res) {
        return parse_completion(api, res.body, parsed[i]);
      };
    }
    r.on_done = [&, i](HttpResult& res) {
      if (res.error == HttpErrorKind::kCancelled) return;
      ++inv.requests;
      inv.retries += size_t(std::max(0, res.attempts - 1));
      json rec;
      if (res.ok()) {
        rec = make_gsm8k_record(i, prep.hashes[i], prep.records[i].label, parsed[i], c.stops,
                                res.end_s - res.start_s, res.attempts);
        if (parsed[i].completion_tokens)
          inv.completion_tokens += size_t(*parsed[i].completion_tokens);
        ++answered_so_far;
        if (rec.value("correct", false)) ++correct_so_far;
        done[i] = rec;
      } else {
        rec = {{"index", i},
               {"prompt_sha256", prep.hashes[i]},
               {"label", prep.records[i].label},
               {"error", res.error_message},
               {"error_kind", to_string(res.error)},
               {"attempts", res.attempts}};
        ++failed_now;
        inv.errors[to_string(res.error)]++;
      }
      if (!log.write(rec) && !aborted) {
        aborted = true;
        abort_reason = "cannot write " + results_path;
        client.cancel_all();
      }
      if (failed_now > c.max_failed && !aborted) {
        aborted = true;
        abort_reason = std::to_string(failed_now) + " request(s) failed (allowed: --max-failed " +
                       std::to_string(c.max_failed) + "); last: " + res.error_message;
        client.cancel_all();
      }
      parsed[i] = Completion{};
      streams[i].reset();
    };
    client.submit(std::move(r));
  }
  inv.submitted = client.pending();
  {
    StopSignals signals;
    client.run(
        [&] {
          progress.update(answered_so_far, correct_so_far, monotonic_seconds() - wall0);
          if (g_signal && !aborted) {
            aborted = true;
            abort_reason = std::string("interrupted by ") +
                           (g_signal == SIGINT ? "SIGINT" : "SIGTERM") +
                           "; finished answers are in " + results_path + " (--resume continues)";
            client.cancel_all();
          }
        },
        0.1);
  }
  progress.finish(answered_so_far, correct_so_far, monotonic_seconds() - wall0);
  inv.wall_s = monotonic_seconds() - wall0;
  inv.cpu_s = thread_cpu_seconds() - cpu0;
  log.close();

  // 5. Server-side accept length (after the run, every DP rank), combined over invocations.
  std::string accept_note;
  if (inv.requests > 0 && !aborted) {
    AcceptInfo ai;
    std::string err;
    for (const char* path : {"/server_info", "/get_server_info"}) {
      HttpRequest r;
      r.method = "GET";
      r.url = c.url + path;
      r.timeout_s = 60;
      r.max_attempts = c.retries + 1;
      HttpResult res = http_fetch(std::move(r));
      if (res.ok()) {
        err = parse_server_info(res.body, ai);
        break;
      }
      err = res.error_message;
      if (res.status != 404) break;
    }
    if (!err.empty()) {
      accept_note = "server info unavailable: " + err;
    } else {
      json row = {{"completion_tokens", inv.completion_tokens},
                  {"flushed", flushed},
                  {"per_rank", json::array()}};
      for (const auto& v : ai.per_rank) row["per_rank"].push_back(v ? json(*v) : json(nullptr));
      JsonlWriter w;
      if (w.open(accept_path, true).empty()) w.write(row);
    }
  }
  std::vector<json> accept_rows;
  try {
    accept_rows = read_jsonl(accept_path).records;
  } catch (const LogError& e) {
    report.notes.push_back(std::string("ignored ") + e.what());
  }

  Gsm8kSummary s = summarize_gsm8k(prep.records, done, inv, accept_rows);
  if (!accept_note.empty())
    for (const char* k : {"accept_length", "accept_length_min"})
      if (s.missing.count(k)) s.missing[k] = accept_note;
  fill_gsm8k_report(report, s, inv, accept_note);
  if (aborted) return finish(kExitCouldNotRun, "ERROR", abort_reason);
  if (failed_now > 0)
    report.notes.push_back(std::to_string(failed_now) +
                           " request(s) failed after retries and count as wrong answers");
  Metrics m = s.metrics;
  report.gates = evaluate_gates(c.gates, m, s.missing);
  const bool pass = all_pass(report.gates);
  return finish(pass ? kExitPass : kExitGateFailed, pass ? "PASS" : "FAIL", "");
}

}  // namespace dsv4::eval
