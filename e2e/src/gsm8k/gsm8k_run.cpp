// The GSM8K engine, one function per step of a run: 1 data and prompts, 2 results.jsonl and
// resume, 3 the server (flush, model name, streaming mode), 4 the request loop, 5 the server's
// accept length, 6 metrics, gates and reports.
#include "gsm8k/gsm8k_run.hpp"

#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include "commands/command.hpp"
#include "gsm8k/gsm8k_data.hpp"
#include "gsm8k/gsm8k_metrics.hpp"
#include "gsm8k/progress.hpp"
#include "http/download.hpp"
#include "http/http_client.hpp"
#include "http/process_setup.hpp"
#include "http/sha256.hpp"
#include "report/accept_length.hpp"
#include "report/results_log.hpp"
#include "report/run_report.hpp"

namespace dsv4::eval {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::vector<std::string>& gsm8k_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v = {"accuracy",
                                  "invalid",
                                  "failed",
                                  "truncated",
                                  "questions",
                                  "latency",
                                  "output_throughput",
                                  "latency_p50",
                                  "latency_p90",
                                  "latency_p99",
                                  "latency_max",
                                  "completion_tokens_total",
                                  "completion_tokens_mean",
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
    for (const auto& [name, what] : accept_metric_definitions()) v.push_back(name);
    return v;
  }();
  return names;
}

bool is_gsm8k_metric(const std::string& name) {
  for (const auto& n : gsm8k_metric_names())
    if (n == name) return true;
  return is_accept_rank_metric(name);
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

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

HttpResult get_json(const std::string& url, int attempts, double backoff_s) {
  HttpRequest r;
  r.method = "GET";
  r.url = url;
  r.timeout_s = 60;
  r.max_attempts = attempts;
  r.backoff_s = backoff_s;
  return http_fetch(std::move(r));
}

bool unreachable(const HttpResult& r) {
  return r.error == HttpErrorKind::kConnect || r.error == HttpErrorKind::kTimeout ||
         r.error == HttpErrorKind::kTransport;
}

class Gsm8kRun {
 public:
  explicit Gsm8kRun(const Gsm8kConfig& c) : c_(c), t_start_(monotonic_seconds()) {
    report_.suite = "gsm8k";
    report_.title = "GSM8K " + std::string(to_string(c.api)) + " " + c.url;
  }

  int run() {
    if (auto code = load_data()) return *code;     // 1
    if (auto code = open_results()) return *code;  // 2
    if (auto code = connect()) return *code;       // 3
    ask();                                         // 4
    read_server_accept();                          // 5
    return report_and_gate();                      // 6
  }

 private:
  const Gsm8kConfig& c_;
  const double t_start_;
  RunReport report_;
  // 1
  std::vector<gsm8k::Record> records_;
  std::vector<std::string> prompts_, hashes_;  // hashes: sha256 of each prompt, 16 hex digits
  std::vector<std::optional<double>> labels_;  // simple-eval: each answer's value
  std::string data_path_, data_sha256_;
  // 2
  std::string results_path_, accept_path_;
  std::map<size_t, json> done_;  // index -> successful record
  size_t resumed_ = 0;
  JsonlWriter log_;
  // 3
  GenParams gp_;
  bool flushed_ = false, incremental_ = false;
  // 4
  InvocationStats inv_;
  size_t failed_now_ = 0;
  bool aborted_ = false;
  std::string abort_reason_, accept_note_;

  int finish(int code, const std::string& status, const std::string& error) {
    report_.exit_code = code;
    report_.status = status;
    report_.error = error;
    report_.duration_s = monotonic_seconds() - t_start_;
    std::string werr;
    if (!write_reports(report_, c_.out_dir, &werr)) {
      std::fprintf(stderr, "dsv4-eval gsm8k: %s\n", werr.c_str());
      if (code == kExitPass || code == kExitGateFailed) code = kExitCouldNotRun;
    }
    if (!error.empty()) std::fprintf(stderr, "dsv4-eval gsm8k: %s\n", redact(error).c_str());
    std::fprintf(stderr, "dsv4-eval gsm8k: %s (exit %d); reports in %s\n", status.c_str(), code,
                 c_.out_dir.c_str());
    return code;
  }

  // A report with what is known so far, for runs that stop before asking anything.
  int stop_early(const std::string& error) {
    InvocationStats none;
    none.resumed = resumed_;
    Gsm8kSummary s = summarize_gsm8k(records_, done_, none, {});
    fill_gsm8k_report(report_, s, {}, "");
    return finish(kExitCouldNotRun, "ERROR", error);
  }

  // 1. Data and prompts (exit 2 on bad data, 3 when the download cannot be made).
  std::optional<int> load_data() {
    try {
      data_path_ = c_.data_path.empty() ? fetch_cached(c_.data_url, c_.data_sha256, c_.cache_dir)
                                        : c_.data_path;
      const auto digest = sha256_file(data_path_);
      if (!digest) throw gsm8k::DataError("cannot read '" + data_path_ + "'");
      data_sha256_ = *digest;
      if (!c_.data_path.empty() && !c_.data_sha256.empty() && data_sha256_ != c_.data_sha256)
        throw ChecksumError("sha256 of --data-path '" + c_.data_path + "' is " + data_sha256_ +
                            ", expected --data-sha256 " + c_.data_sha256);
      std::vector<gsm8k::Record> all = gsm8k::load_jsonl(data_path_);
      std::vector<gsm8k::Record> shots =
          c_.shots_from.empty() ? all : gsm8k::load_jsonl(c_.shots_from);
      if (c_.simple_eval)  // simple_eval_gsm8k leaves the shot lines out of the questions
        all.erase(all.begin(), all.begin() + long(std::min(c_.num_shots, all.size())));
      const size_t n = c_.num_questions == 0 ? all.size() : c_.num_questions;
      if (n > all.size())
        throw UsageError("--num-questions " + std::to_string(n) + " exceeds the " +
                         std::to_string(all.size()) + " questions in '" + data_path_ + "'");
      if (c_.num_shots > shots.size())
        throw UsageError("--num-shots " + std::to_string(c_.num_shots) + " exceeds the " +
                         std::to_string(shots.size()) + " records in '" +
                         (c_.shots_from.empty() ? data_path_ : c_.shots_from) + "'");
      shots.resize(c_.num_shots);
      const std::string prefix = gsm8k::few_shot_prefix(shots);
      all.resize(n);
      records_ = std::move(all);
      for (const auto& r : records_) {
        labels_.push_back(c_.simple_eval ? gsm8k::simple_eval_answer(r.answer) : std::nullopt);
        prompts_.push_back(prefix + gsm8k::format_example(r, false));
        hashes_.push_back(sha256_hex(prompts_.back()).substr(0, 16));
      }
    } catch (const UsageError& e) {
      std::fprintf(stderr, "dsv4-eval gsm8k: %s\n", redact(e.what()).c_str());
      return kExitUsage;
    } catch (const gsm8k::DataError& e) {
      std::fprintf(stderr, "dsv4-eval gsm8k: bad data: %s\n", e.what());
      return kExitUsage;
    } catch (const ChecksumError& e) {
      std::fprintf(stderr, "dsv4-eval gsm8k: bad data: %s\n", e.what());
      return kExitUsage;
    } catch (const DownloadError& e) {
      report_.context = {{"url", c_.url}, {"data_url", c_.data_url}, {"command", c_.command_line}};
      return finish(kExitCouldNotRun, "ERROR", e.what());  // CI still gets an errored junit.xml
    }
    return std::nullopt;
  }

  // 2. Output directory, resume state.
  std::optional<int> open_results() {
    std::error_code ec;
    fs::create_directories(c_.out_dir, ec);
    if (ec) {
      std::fprintf(stderr, "dsv4-eval gsm8k: cannot create --out '%s': %s\n", c_.out_dir.c_str(),
                   ec.message().c_str());
      return kExitCouldNotRun;
    }
    results_path_ = (fs::path(c_.out_dir) / "results.jsonl").string();
    accept_path_ = (fs::path(c_.out_dir) / "server_accept.jsonl").string();
    bool dropped_tail = false;
    if (c_.resume) {
      try {
        dropped_tail = read_previous();
      } catch (const LogError& e) {
        std::fprintf(stderr, "dsv4-eval gsm8k: cannot resume: %s\n", e.what());
        return kExitUsage;
      }
    } else {
      fs::remove(accept_path_, ec);
    }
    if (auto e = log_.open(results_path_, c_.resume); !e.empty()) {
      std::fprintf(stderr, "dsv4-eval gsm8k: %s\n", e.c_str());
      return kExitCouldNotRun;
    }
    resumed_ = done_.size();
    report_.context = {{"url", c_.url},
                       {"api", to_string(c_.api)},
                       {"data", data_path_},
                       {"data_sha256", data_sha256_},
                       {"questions", std::to_string(records_.size())},
                       {"shots", std::to_string(c_.num_shots) + (c_.shots_from.empty()
                                                                     ? " (first lines of the data)"
                                                                     : " from " + c_.shots_from)},
                       {"max_new_tokens", std::to_string(c_.max_new_tokens)},
                       {"parallel", std::to_string(c_.parallel)},
                       {"stream", c_.stream ? "yes" : "no"},
                       {"command", c_.command_line}};
    if (resumed_ > 0 || dropped_tail)
      report_.notes.push_back("resumed: " + std::to_string(resumed_) + " answers read from " +
                              results_path_ +
                              (dropped_tail ? " (an interrupted last line dropped)" : ""));
    return std::nullopt;
  }

  // Reads results.jsonl of the interrupted run into done_; returns whether a half-written last
  // line was dropped. Throws LogError for records that do not belong to this run.
  bool read_previous() {
    const size_t n = records_.size();
    JsonlContents prev = read_jsonl(results_path_);
    for (size_t k = 0; k < prev.records.size(); ++k) {
      const json& r = prev.records[k];
      const std::string where = results_path_ + ":" + std::to_string(prev.lines[k]);
      if (!r.contains("index") || !r["index"].is_number_unsigned())
        throw LogError(where + ": field 'index' missing or not a non-negative integer");
      const size_t i = r["index"].get<size_t>();
      if (i >= n)
        throw LogError(where + ": index " + std::to_string(i) + " is outside this run's " +
                       std::to_string(n) + " questions");
      if (r.value("prompt_sha256", "") != hashes_[i])
        throw LogError(where + ": prompt_sha256 '" + r.value("prompt_sha256", "") +
                       "' differs from this run's prompt for question " + std::to_string(i) +
                       " ('" + hashes_[i] +
                       "'): data, shots or prompt format changed; use a fresh --out");
      if (r.contains("error")) continue;  // failed before: asked again
      done_[i] = r;
    }
    if (prev.dropped_tail) truncate_file(results_path_, prev.good_bytes);
    return prev.dropped_tail;
  }

  // 3. The server: open files for the connections, the key, the flush (also the reachability
  // check), the model name for OpenAI APIs and the streaming mode.
  std::optional<int> connect() {
    gp_.max_new_tokens = c_.max_new_tokens;
    gp_.temperature = c_.temperature;
    gp_.stops = c_.stops;
    gp_.stream = c_.stream;
    gp_.model = c_.model;
    gp_.thinking = c_.thinking;
    incremental_ = c_.incremental_stream;
    if (done_.size() == records_.size()) return std::nullopt;  // nothing left to ask
    if (auto e = check_open_file_limit(size_t(c_.parallel), "--parallel"); !e.empty()) {
      std::fprintf(stderr, "dsv4-eval gsm8k: %s\n", e.c_str());
      return kExitUsage;
    }
    if (c_.flush_cache) {
      if (auto code = flush()) return code;
    }
    if (c_.api != Api::kSglang && gp_.model.empty()) {
      const HttpResult r = get_json(c_.url + "/v1/models", 3, c_.backoff_s);
      if (auto refusal = api_key_refusal(r); !refusal.empty()) return stop_early(refusal);
      const json j = json::parse(r.ok() ? r.body : "", nullptr, false);
      if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
          j["data"][0].contains("id") && j["data"][0]["id"].is_string())
        gp_.model = j["data"][0]["id"].get<std::string>();
      if (gp_.model.empty()) gp_.model = "default";
    }
    if (!gp_.model.empty()) report_.context.push_back({"model", gp_.model});
    if (c_.api == Api::kSglang && c_.stream && !c_.incremental_stream) {
      // /server_info says whether /generate streams deltas (--incremental-streaming-output).
      AcceptInfo info;
      if (server_info(info).empty() && info.incremental_streaming.value_or(false)) {
        incremental_ = true;
        report_.notes.push_back(
            "the server streams incremental text (incremental_streaming_output in /server_info)");
      }
    }
    return std::nullopt;
  }

  // POST /flush_cache so the server's accept counters cover exactly this run.
  std::optional<int> flush() {
    std::string last;
    for (int attempt = 0; attempt < 5; ++attempt) {
      HttpRequest r;
      r.url = c_.url + "/flush_cache";
      r.timeout_s = 60;
      r.max_attempts = c_.retries + 1;
      r.backoff_s = c_.backoff_s;
      const HttpResult res = http_fetch(std::move(r));
      if (res.ok()) {
        flushed_ = true;
        return std::nullopt;
      }
      if (unreachable(res))
        return stop_early("server " + c_.url + " unreachable: " + res.error_message);
      if (auto refusal = api_key_refusal(res); !refusal.empty()) return stop_early(refusal);
      last = res.error_message;
      if (res.status != 400) break;  // 400: requests still running on the server; wait a little
      ::usleep(1000 * 1000);
    }
    report_.notes.push_back("flush_cache failed (" + last +
                            "); server accept length may include earlier requests");
    return std::nullopt;
  }

  // GET /server_info (or /get_server_info); "" or why it could not be read.
  std::string server_info(AcceptInfo& info) {
    std::string err;
    for (const char* path : {"/server_info", "/get_server_info"}) {
      const HttpResult res = get_json(c_.url + path, c_.retries + 1, c_.backoff_s);
      if (res.ok()) return parse_server_info(res.body, info);
      err = res.error_message;
      if (res.status != 404) break;
    }
    return err;
  }

  // 4. The request loop: every question not answered yet, --parallel in flight.
  void ask() {
    const size_t n = records_.size();
    inv_.resumed = resumed_;
    if (done_.size() == n) return;
    size_t correct_so_far = 0, answered_so_far = 0;
    for (const auto& [i, r] : done_) {
      ++answered_so_far;
      if (r.value("correct", false)) ++correct_so_far;
    }
    Progress progress(n, answered_so_far, c_.progress_interval_s);
    HttpClient client(HttpClientOptions{.max_in_flight = std::max(1, c_.parallel)});
    const std::string url = c_.url + generation_path(c_.api);
    std::vector<std::unique_ptr<StreamAccumulator>> streams(n);
    std::vector<Completion> parsed(n);
    for (size_t i = 0; i < n; ++i) {
      if (done_.count(i)) continue;
      HttpRequest r;
      r.url = url;
      r.body = generation_body(c_.api, prompts_[i], gp_);
      r.timeout_s = c_.timeout_s;
      r.max_attempts = c_.retries + 1;
      r.backoff_s = c_.backoff_s;
      r.sse = c_.stream;
      if (c_.stream) {
        streams[i] = std::make_unique<StreamAccumulator>(c_.api, incremental_);
        StreamAccumulator* acc = streams[i].get();
        r.on_event = [acc](const SseEvent& ev) { return acc->feed(ev); };
        r.validate = [acc, &parsed, i](const HttpResult&) { return acc->finish(parsed[i]); };
      } else {
        r.validate = [&parsed, i, api = c_.api](const HttpResult& res) {
          return parse_completion(api, res.body, parsed[i]);
        };
      }
      r.on_done = [&, i](HttpResult& res) {
        if (res.error == HttpErrorKind::kCancelled) return;
        ++inv_.requests;
        inv_.retries += size_t(std::max(0, res.attempts - 1));
        json rec;
        if (res.ok()) {
          rec = make_gsm8k_record(i, hashes_[i], records_[i].label, parsed[i], c_.stops,
                                  res.end_s - res.start_s, res.attempts, labels_[i]);
          if (parsed[i].completion_tokens)
            inv_.completion_tokens += size_t(*parsed[i].completion_tokens);
          ++answered_so_far;
          if (rec.value("correct", false)) ++correct_so_far;
          done_[i] = rec;
        } else {
          rec = {{"index", i},
                 {"prompt_sha256", hashes_[i]},
                 {"label", records_[i].label},
                 {"error", res.error_message},
                 {"error_kind", to_string(res.error)},
                 {"attempts", res.attempts}};
          ++failed_now_;
          inv_.errors[to_string(res.error)]++;
        }
        if (!log_.write(rec)) stop(client, "cannot write " + results_path_);
        if (auto refusal = api_key_refusal(res); !refusal.empty()) stop(client, refusal);
        if (failed_now_ > c_.max_failed)
          stop(client, std::to_string(failed_now_) + " request(s) failed (allowed: --max-failed " +
                           std::to_string(c_.max_failed) + "); last: " + res.error_message);
        parsed[i] = Completion{};
        streams[i].reset();
      };
      client.submit(std::move(r));
    }
    inv_.submitted = client.pending();
    const double cpu0 = thread_cpu_seconds();
    const double wall0 = monotonic_seconds();  // after data, download and flush: requests only
    {
      StopSignals signals;
      client.run(
          [&] {
            progress.update(answered_so_far, correct_so_far, monotonic_seconds() - wall0);
            if (g_signal)
              stop(client,
                   std::string("interrupted by ") + (g_signal == SIGINT ? "SIGINT" : "SIGTERM") +
                       "; finished answers are in " + results_path_ + " (--resume continues)");
          },
          0.1);
    }
    progress.finish(answered_so_far, correct_so_far, monotonic_seconds() - wall0);
    inv_.wall_s = monotonic_seconds() - wall0;
    inv_.cpu_s = thread_cpu_seconds() - cpu0;
    log_.close();
  }

  void stop(HttpClient& client, const std::string& why) {
    if (aborted_) return;
    aborted_ = true;
    abort_reason_ = why;
    client.cancel_all();
  }

  // 5. Server-side accept length after the run, every DP rank, one row per invocation.
  void read_server_accept() {
    if (inv_.requests == 0 || aborted_) return;
    AcceptInfo ai;
    if (auto err = server_info(ai); !err.empty()) {
      accept_note_ = "server info unavailable: " + err;
      return;
    }
    json row = {{"completion_tokens", inv_.completion_tokens},
                {"flushed", flushed_},
                {"per_rank", json::array()}};
    for (const auto& v : ai.per_rank) row["per_rank"].push_back(v ? json(*v) : json(nullptr));
    if (ai.decode_servers > 0)
      report_.notes.push_back("router: accept length of the first of " +
                              std::to_string(ai.decode_servers) + " decode server(s)");
    JsonlWriter w;
    if (w.open(accept_path_, true).empty()) w.write(row);
  }

  // bench_sglang's closing lines on stdout, and its result line appended to --result-file.
  void print_bench_sglang_lines(const Metrics& m) {
    auto get = [&](const char* k) { return m.count(k) ? m.at(k) : 0.0; };
    std::printf("Accuracy: %.3f\nInvalid: %.3f\nLatency: %.3f s\nOutput throughput: %.3f token/s\n",
                get("accuracy"), get("invalid"), get("latency"), get("output_throughput"));
    std::fflush(stdout);
    if (c_.result_file.empty()) return;
    auto round3 = [](double v) { return std::round(v * 1000) / 1000; };
    const json line = {{"task", "gsm8k"},
                       {"backend", to_string(c_.api)},
                       {"num_gpus", 1},
                       {"latency", round3(get("latency"))},
                       {"accuracy", round3(get("accuracy"))},
                       {"num_requests", records_.size()},
                       {"other", {{"num_questions", records_.size()}, {"parallel", c_.parallel}}}};
    JsonlWriter w;
    if (auto e = w.open(c_.result_file, true); !e.empty() || !w.write(line))
      report_.notes.push_back("cannot append to --result-file " + c_.result_file);
  }

  // 6. Metrics (combined over invocations), gates and the reports.
  int report_and_gate() {
    std::vector<json> accept_rows;
    try {
      accept_rows = read_jsonl(accept_path_).records;
    } catch (const LogError& e) {
      report_.notes.push_back(std::string("ignored ") + e.what());
    }
    Gsm8kSummary s = summarize_gsm8k(records_, done_, inv_, accept_rows);
    if (!accept_note_.empty())
      for (const auto& [name, what] : accept_metric_definitions())
        if (s.missing.count(name)) s.missing[name] = accept_note_;
    fill_gsm8k_report(report_, s, inv_, accept_note_);
    if (aborted_) return finish(kExitCouldNotRun, "ERROR", abort_reason_);
    if (s.truncated > 0) {
      const size_t answered = s.correct + s.wrong + s.invalid;
      std::string note = std::to_string(s.truncated) + " of " + std::to_string(answered) +
                         " answers were cut by the token budget (finish_reason length)";
      if (2 * s.truncated > answered) {
        note = "most answers were cut by the token budget: " + note + "; raise --max-new-tokens (" +
               std::to_string(c_.max_new_tokens) +
               " now): a reasoning model spends it on reasoning_content before it answers";
        std::fprintf(stderr, "dsv4-eval gsm8k: warning: %s\n", note.c_str());
      }
      report_.notes.push_back(note);
    }
    if (failed_now_ > 0)
      report_.notes.push_back(std::to_string(failed_now_) +
                              " request(s) failed after retries and count as wrong answers, "
                              "never as invalid ones");
    print_bench_sglang_lines(s.metrics);
    report_.gates = evaluate_gates(c_.gates, s.metrics, s.missing);
    const bool pass = all_pass(report_.gates);
    return finish(pass ? kExitPass : kExitGateFailed, pass ? "PASS" : "FAIL", "");
  }
};

}  // namespace

int run_gsm8k(const Gsm8kConfig& c) { return Gsm8kRun(c).run(); }

}  // namespace dsv4::eval
