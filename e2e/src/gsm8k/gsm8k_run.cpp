// The GSM8K engine, one function per step of a run: 0 an earlier run in --out (refused unless
// --resume or --overwrite), 1 data and prompts, 2 the resumed answers and settings, 3 the server
// (flush, model name, streaming mode), 4 --out claimed (results.jsonl, settings.json), 5 the
// request loop, 6 the server's accept counters (also at a stop), 7 metrics, gates and reports.
#include "gsm8k/gsm8k_run.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include "commands/command.hpp"
#include "gsm8k/gsm8k_data.hpp"
#include "gsm8k/gsm8k_metrics.hpp"
#include "gsm8k/progress.hpp"
#include "gsm8k/run_folder.hpp"
#include "http/download.hpp"
#include "http/http_client.hpp"
#include "http/process_setup.hpp"
#include "http/sha256.hpp"
#include "http/stop_signals.hpp"
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
                                  "not_asked",
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

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool unreachable(const HttpResult& r) {
  return r.error == HttpErrorKind::kConnect || r.error == HttpErrorKind::kTimeout ||
         r.error == HttpErrorKind::kTransport;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

class Gsm8kRun {
 public:
  explicit Gsm8kRun(const Gsm8kConfig& c) : c_(c), t_start_(monotonic_seconds()) {
    report_.suite = "gsm8k";
    report_.title = "GSM8K " + std::string(to_string(c.api)) + " " + c.url;
  }

  // Nothing in --out is touched before step 4: a run refused for its flags, its data or its
  // server leaves an earlier run there as it was.
  int run() {
    StopSignals signals;                            // the whole run, not only the request loop
    if (auto code = check_out_dir()) return *code;  // 0
    if (auto code = load_data()) return *code;      // 1
    if (auto code = read_resume()) return *code;    // 2
    if (auto code = connect()) return *code;        // 3
    if (auto code = open_results()) return *code;   // 4
    ask();                                          // 5
    read_server_accept();                           // 6
    return report_and_gate();                       // 7
  }

 private:
  const Gsm8kConfig& c_;
  const double t_start_;
  RunReport report_;
  // 0
  bool keep_out_ = false;  // --out holds an earlier run that --overwrite replaces at step 4
  // 1
  std::vector<gsm8k::Record> records_;
  std::vector<std::string> prompts_, hashes_;  // hashes: sha256 of each prompt, 16 hex digits
  std::vector<std::optional<double>> labels_;  // simple-eval: each answer's value
  std::string data_path_, data_sha256_;
  // 2
  std::string results_path_, accept_path_;
  std::map<size_t, json> done_;  // index -> successful record
  size_t resumed_ = 0;
  bool dropped_tail_ = false;
  size_t good_bytes_ = 0;
  json recorded_settings_;  // settings.json of the run resumed (null: none)
  JsonlWriter log_;
  // 3
  GenParams gp_;
  bool flushed_ = false, incremental_ = false;
  // 5
  InvocationStats inv_;
  size_t failed_now_ = 0, cancelled_in_flight_ = 0;
  bool aborted_ = false;
  double drain_until_ = 0;
  std::string abort_reason_, accept_note_;

  void say(const std::string& line) const {
    std::fprintf(stderr, "dsv4-eval gsm8k: %s\n", redact(line).c_str());
    std::fflush(stderr);
  }

  int finish(int code, const std::string& status, const std::string& error) {
    report_.exit_code = code;
    report_.status = status;
    report_.error = error;
    report_.duration_s = monotonic_seconds() - t_start_;
    if (!error.empty()) say(error);
    if (keep_out_) {  // the earlier run stays whole: no report of this one over it
      say(status + " (exit " + std::to_string(code) + "); --out " + c_.out_dir +
          " left as it was (--overwrite replaces the earlier run only once this one can start)");
      return code;
    }
    std::string werr;
    if (!write_reports(report_, c_.out_dir, &werr)) {
      say(werr);
      if (code == kExitPass || code == kExitGateFailed) code = kExitCouldNotRun;
    }
    say(status + " (exit " + std::to_string(code) + "); reports in " + c_.out_dir);
    return code;
  }

  // A report with what is known so far, for runs that stop before asking anything.
  int stop_early(const std::string& error) {
    InvocationStats none;
    none.resumed = resumed_;
    none.failed_questions = inv_.failed_questions;
    Gsm8kSummary s = summarize_gsm8k(records_, done_, none, {});
    fill_gsm8k_report(report_, s, {}, "");
    return finish(kExitCouldNotRun, "ERROR", error);
  }

  std::optional<int> interrupted(const std::string& during) {
    if (!stop_signal()) return std::nullopt;
    return stop_early("interrupted by " + stop_signal_name() + " during " + during +
                      ", before any question was asked");
  }

  // The settings the answers depend on, as settings.json records them.
  json settings_now(bool with_model) const {
    json s = {{"url", c_.url},
              {"api", to_string(c_.api)},
              {"protocol", c_.simple_eval ? "simple-eval" : "bench-sglang"},
              {"temperature", c_.temperature},
              {"max_new_tokens", c_.max_new_tokens},
              {"stops", c_.stops},
              {"thinking", c_.thinking ? json(*c_.thinking) : json(nullptr)}};
    const std::string model = with_model ? gp_.model : c_.model;
    if (!model.empty()) s["model"] = model;
    return s;
  }

  // --resume against other settings mixes two runs' answers: refused (exit 2) unless
  // --allow-changed-settings, which notes every difference in the report.
  std::optional<int> check_settings(bool with_model) {
    if (!c_.resume || recorded_settings_.is_null()) return std::nullopt;
    const auto diff = settings_differences(recorded_settings_, settings_now(with_model));
    if (diff.empty()) return std::nullopt;
    if (c_.allow_changed_settings) {
      for (const auto& d : diff)
        if (std::find(report_.notes.begin(), report_.notes.end(),
                      "resumed with a changed setting (--allow-changed-settings): " + d) ==
            report_.notes.end())
          report_.notes.push_back("resumed with a changed setting (--allow-changed-settings): " +
                                  d);
      return std::nullopt;
    }
    say("cannot resume: this run's settings differ from those recorded in " + c_.out_dir +
        "/settings.json, and the answers would mix two runs: " + join(diff, "; ") +
        ". Resume with the recorded settings, give another --out, or pass "
        "--allow-changed-settings");
    return kExitUsage;
  }

  // 0. An earlier run in --out is continued (--resume) or replaced (--overwrite), never lost.
  std::optional<int> check_out_dir() {
    const auto prev = previous_run_files(c_.out_dir);
    if (prev.empty() || c_.resume) return std::nullopt;
    if (!c_.overwrite) {
      say("--out '" + c_.out_dir + "' holds an earlier run (" + join(prev, ", ") +
          "): --resume continues it, --overwrite replaces it, or give another --out");
      return kExitUsage;
    }
    keep_out_ = true;
    return std::nullopt;
  }

  // 1. Data and prompts (exit 2 on bad data, 3 when the download cannot be made).
  std::optional<int> load_data() {
    try {
      data_path_ = c_.data_path.empty()
                       ? fetch_cached(c_.data_url, c_.data_sha256, c_.cache_dir, c_.timeout_s)
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
      say(e.what());
      return kExitUsage;
    } catch (const gsm8k::DataError& e) {
      say(std::string("bad data: ") + e.what());
      return kExitUsage;
    } catch (const ChecksumError& e) {
      say(std::string("bad data: ") + e.what());
      return kExitUsage;
    } catch (const DownloadError& e) {
      report_.context = {{"url", c_.url}, {"data_url", c_.data_url}, {"command", c_.command_line}};
      return finish(kExitCouldNotRun, "ERROR", e.what());  // CI still gets an errored junit.xml
    }
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
    return interrupted("the data loading");
  }

  // 2. --resume: the answers and settings of the run in --out (read only; exit 2 when they do
  // not belong to this run).
  std::optional<int> read_resume() {
    results_path_ = (fs::path(c_.out_dir) / "results.jsonl").string();
    accept_path_ = (fs::path(c_.out_dir) / "server_accept.jsonl").string();
    if (!c_.resume) return std::nullopt;
    try {
      recorded_settings_ = read_run_settings(c_.out_dir);
      read_previous();
    } catch (const LogError& e) {
      say(std::string("cannot resume: ") + e.what());
      return kExitUsage;
    } catch (const std::runtime_error& e) {
      say(std::string("cannot resume: ") + e.what());
      return kExitUsage;
    }
    resumed_ = done_.size();
    if (auto code = check_settings(false)) return code;
    if (recorded_settings_.is_null() && resumed_ > 0)
      report_.notes.push_back(
          "the resumed run recorded no settings.json: its settings were not "
          "compared with this run's");
    if (resumed_ > 0 || dropped_tail_)
      report_.notes.push_back("resumed: " + std::to_string(resumed_) + " answers read from " +
                              results_path_ +
                              (dropped_tail_ ? " (an interrupted last line dropped)" : ""));
    return std::nullopt;
  }

  // Reads results.jsonl of the interrupted run into done_ (and its failed questions). Throws
  // LogError for records that do not belong to this run.
  void read_previous() {
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
      if (r.contains("error")) {  // failed before: asked again, failed until answered
        if (!done_.count(i)) inv_.failed_questions.insert(i);
        continue;
      }
      done_[i] = r;
      inv_.failed_questions.erase(i);
    }
    dropped_tail_ = prev.dropped_tail;
    good_bytes_ = prev.good_bytes;
  }

  HttpRequest server_request(const std::string& method, const std::string& path) const {
    HttpRequest r;
    r.method = method;
    r.url = c_.url + path;
    r.timeout_s = c_.timeout_s;
    r.max_attempts = c_.retries + 1;
    r.backoff_s = c_.backoff_s;
    return r;
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
      say(e);
      return kExitUsage;
    }
    if (c_.flush_cache) {
      if (auto code = flush()) return code;
    }
    if (c_.api != Api::kSglang && gp_.model.empty()) {
      const HttpResult r =
          http_fetch(server_request("GET", "/v1/models"), "GET " + c_.url + "/v1/models");
      if (auto code = interrupted("GET /v1/models")) return code;
      if (auto refusal = api_key_refusal(r); !refusal.empty()) return stop_early(refusal);
      const json j = json::parse(r.ok() ? r.body : "", nullptr, false);
      if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
          j["data"][0].contains("id") && j["data"][0]["id"].is_string())
        gp_.model = j["data"][0]["id"].get<std::string>();
      if (gp_.model.empty()) gp_.model = "default";
    }
    if (!gp_.model.empty()) report_.context.push_back({"model", gp_.model});
    if (auto code = check_settings(true)) return code;
    if (c_.api == Api::kSglang && c_.stream && !c_.incremental_stream) {
      // /server_info says whether /generate streams deltas (--incremental-streaming-output).
      AcceptInfo info;
      if (server_info(info).empty() && info.incremental_streaming.value_or(false)) {
        incremental_ = true;
        report_.notes.push_back(
            "the server streams incremental text (incremental_streaming_output in /server_info)");
      }
      if (auto code = interrupted("GET /server_info")) return code;
    }
    return std::nullopt;
  }

  // POST /flush_cache so the server's accept counters cover exactly this run; every attempt
  // under --timeout, a line on stderr while it waits.
  std::optional<int> flush() {
    std::string last;
    for (int attempt = 0; attempt < 5; ++attempt) {
      const HttpResult res =
          http_fetch(server_request("POST", "/flush_cache"), "POST " + c_.url + "/flush_cache");
      if (auto code = interrupted("POST /flush_cache")) return code;
      if (res.ok()) {
        flushed_ = true;
        return std::nullopt;
      }
      if (unreachable(res))
        return stop_early("server " + c_.url + " unreachable: " + res.error_message);
      if (auto refusal = api_key_refusal(res); !refusal.empty()) return stop_early(refusal);
      last = res.error_message;
      if (res.status != 400) break;  // 400: requests still running on the server; wait a little
      say("POST /flush_cache answered 400 (requests still running on the server); again in 1 s");
      for (int k = 0; k < 10 && !stop_signal(); ++k) ::usleep(100 * 1000);
    }
    report_.notes.push_back("flush_cache failed (" + last +
                            "); server accept length may include earlier requests");
    return std::nullopt;
  }

  // GET /server_info (or /get_server_info); "" or why it could not be read.
  std::string server_info(AcceptInfo& info) {
    std::string err;
    for (const char* path : {"/server_info", "/get_server_info"}) {
      const HttpResult res = http_fetch(server_request("GET", path), "GET " + c_.url + path);
      if (res.ok()) return parse_server_info(res.body, info);
      err = res.error_message;
      if (res.status != 404) break;
    }
    return err;
  }

  // 4. --out: an earlier run replaced (--overwrite), results.jsonl opened (appended on
  // --resume, a cut last line dropped first), settings.json recorded.
  std::optional<int> open_results() {
    std::error_code ec;
    if (keep_out_) {
      if (auto e = clear_run_folder(c_.out_dir); !e.empty()) {
        say(e);
        return kExitCouldNotRun;
      }
      keep_out_ = false;
    }
    fs::create_directories(c_.out_dir, ec);
    if (ec) {
      say("cannot create --out '" + c_.out_dir + "': " + ec.message());
      return kExitCouldNotRun;
    }
    if (dropped_tail_) truncate_file(results_path_, good_bytes_);
    if (!c_.resume) fs::remove(accept_path_, ec);
    if (auto e = log_.open(results_path_, c_.resume); !e.empty()) {
      say(e);
      return kExitCouldNotRun;
    }
    if (!c_.resume || recorded_settings_.is_null()) {
      std::string err;
      if (!write_run_settings(c_.out_dir, redact_json(settings_now(true)), &err)) {
        say(err);
        return kExitCouldNotRun;
      }
    }
    return std::nullopt;
  }

  // 5. The request loop: every question not answered yet, --parallel in flight.
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
        count_attempt_errors(res);
        if (res.error == HttpErrorKind::kCancelled) {
          if (res.attempts > 0) ++cancelled_in_flight_;
          return;
        }
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
          inv_.failed_questions.erase(i);
        } else {
          rec = {{"index", i},
                 {"prompt_sha256", hashes_[i]},
                 {"label", records_[i].label},
                 {"error", res.error_message},
                 {"error_kind", to_string(res.error)},
                 {"attempts", res.attempts}};
          ++failed_now_;
          inv_.errors[to_string(res.error)]++;
          inv_.failed_questions.insert(i);
        }
        if (!log_.write(rec)) stop(client, "cannot write " + results_path_, true);
        if (auto refusal = api_key_refusal(res); !refusal.empty()) stop(client, refusal, true);
        if (failed_now_ > c_.max_failed)
          stop(client,
               std::to_string(failed_now_) + " request(s) failed (allowed: --max-failed " +
                   std::to_string(c_.max_failed) + "); last: " + res.error_message,
               false);
        parsed[i] = Completion{};
        streams[i].reset();
      };
      client.submit(std::move(r));
    }
    inv_.submitted = client.pending();
    const double cpu0 = thread_cpu_seconds();
    const double wall0 = monotonic_seconds();  // after data, download and flush: requests only
    client.run(
        [&] {
          progress.update(answered_so_far, correct_so_far, monotonic_seconds() - wall0);
          if (stop_signal())
            stop(client,
                 "interrupted by " + stop_signal_name() + "; finished answers are in " +
                     results_path_ + " (--resume continues)",
                 false);
          // The requests in flight had --stop-grace to finish; a second signal ends them now.
          if (aborted_ && client.running() > 0 &&
              (stop_signal_count() > 1 || monotonic_seconds() >= drain_until_))
            client.cancel_all();
        },
        0.1);
    progress.finish(answered_so_far, correct_so_far, monotonic_seconds() - wall0);
    inv_.wall_s = monotonic_seconds() - wall0;
    inv_.cpu_s = thread_cpu_seconds() - cpu0;
    log_.close();
  }

  // Failed attempts by cause (HTTP status, connect, time-out, abort, ...), retried or final.
  void count_attempt_errors(const HttpResult& res) {
    for (const auto& cause : res.attempt_causes) inv_.attempt_causes[cause]++;
  }

  // Ends the run: nothing more is sent; the requests in flight get --stop-grace seconds to
  // finish (their answers are kept and the server's counters then cover exactly the answers
  // recorded) unless `at_once`.
  void stop(HttpClient& client, const std::string& why, bool at_once) {
    if (!aborted_) {
      aborted_ = true;
      abort_reason_ = why;
      client.cancel_queued();
      drain_until_ = monotonic_seconds() + c_.stop_grace_s;
      if (!at_once && client.running() > 0)
        say("stopping (" + why + "): waiting up to " + format_number(c_.stop_grace_s) +
            " s (--stop-grace) for the " + std::to_string(client.running()) +
            " request(s) in flight; a second signal cancels them");
    }
    if (at_once) client.cancel_all();
  }

  // 6. The server's accept counters for this invocation, read at its end or at its stop, one
  // row per invocation; a row that could not be read says why (the figure is then partial).
  void read_server_accept() {
    if (inv_.requests == 0) return;
    json row = {{"completion_tokens", inv_.completion_tokens},
                {"flushed", flushed_},
                {"per_rank", json::array()}};
    if (aborted_) row["stopped"] = abort_reason_;
    if (cancelled_in_flight_ > 0) row["cancelled_in_flight"] = cancelled_in_flight_;
    AcceptInfo ai;
    if (auto err = server_info(ai); !err.empty()) {
      row["unread"] = err;
      row.erase("per_rank");
      if (!aborted_) accept_note_ = "server info unavailable: " + err;
    } else {
      for (const auto& v : ai.per_rank) row["per_rank"].push_back(v ? json(*v) : json(nullptr));
      if (ai.decode_servers > 0)
        report_.notes.push_back("router: accept length of the first of " +
                                std::to_string(ai.decode_servers) + " decode server(s)");
    }
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

  // 7. Metrics (combined over invocations), gates and the reports.
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
    // A gate on a server accept length that covers only part of the answers says so.
    for (auto& g : report_.gates)
      if (s.accept_status == "partial" && g.gate.metric.rfind("accept_length", 0) == 0) {
        g.detail += " (" + s.accept_detail + ")";
        say("warning: gate '" + g.gate.text +
            "' is judged on a partial accept length: " + s.accept_detail);
      }
    const bool pass = all_pass(report_.gates);
    return finish(pass ? kExitPass : kExitGateFailed, pass ? "PASS" : "FAIL", "");
  }
};

}  // namespace

int run_gsm8k(const Gsm8kConfig& c) { return Gsm8kRun(c).run(); }

}  // namespace dsv4::eval
