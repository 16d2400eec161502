// serve-bench's run against a live SGLang server: vocabulary size, warmup, flush, timed loop.
#include "serve_bench/serve_bench_run.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "commands/command.hpp"
#include "http/http_client.hpp"
#include "http/process_setup.hpp"
#include "http/server_api.hpp"
#include "http/stop_signals.hpp"
#include "serve_bench/bpe_decoder.hpp"
#include "serve_bench/bpe_encoder.hpp"
#include "serve_bench/sharegpt.hpp"

namespace dsv4::eval::serve {
using nlohmann::json;

std::string generate_body(const BenchRequest& req, int64_t max_new_tokens) {
  const auto& ids = req.input_ids;
  std::string s;
  if (req.as_text) {
    s = "{\"text\":" + json(req.text).dump(-1, ' ', false, json::error_handler_t::replace);
  } else {
    s.reserve(ids.size() * 7 + 128);
    s += "{\"input_ids\":[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) s += ',';
      s += std::to_string(ids[i]);
    }
    s += ']';
  }
  s += ",\"sampling_params\":{\"temperature\":0.0,\"max_new_tokens\":" +
       std::to_string(max_new_tokens) + ",\"ignore_eos\":true},\"stream\":true}";
  return s;
}

namespace {

// The integer after the last `"key":` in `s` (outside strings by construction: a quote inside a
// JSON string is escaped, so `"key":` cannot occur there).
std::optional<int64_t> last_int_field(const std::string& s, const char* key) {
  const std::string k = std::string("\"") + key + "\":";
  const size_t p = s.rfind(k);
  if (p == std::string::npos) return std::nullopt;
  size_t i = p + k.size();
  while (i < s.size() && s[i] == ' ') ++i;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str() + i, &end, 10);
  if (end == s.c_str() + i) return std::nullopt;
  return v;
}

}  // namespace

std::string read_chunk(const std::string& payload, double t, StreamTimer& timer,
                       int64_t* prompt_tokens) {
  if (payload == "[DONE]") {
    timer.on_line(t);
    return "";
  }
  // SGLang's HTTP-200 abort ends the stream with finish_reason {"type": "abort", "message"}: a
  // failed request. The cheap test first: only a payload naming "abort" is parsed whole.
  if (payload.find("abort") != std::string::npos) {
    const json j = json::parse(payload, nullptr, false);
    if (j.is_object() && j.contains("meta_info") && j["meta_info"].is_object()) {
      const json& fr = j["meta_info"].value("finish_reason", json());
      if (fr.is_object() && fr.value("type", "") == "abort") {
        std::string why = "the server aborted the request (HTTP 200, finish_reason abort)";
        if (fr.contains("message") && fr["message"].is_string())
          why += ": " + fr["message"].get<std::string>();
        timer.on_abort();
        return why;
      }
    }
  }
  if (auto ct = last_int_field(payload, "completion_tokens")) {
    timer.on_tokens(t, *ct);
    if (prompt_tokens)
      if (auto pt = last_int_field(payload, "prompt_tokens")) *prompt_tokens = *pt;
    return "";
  }
  json j;
  try {
    j = json::parse(payload);
  } catch (const json::parse_error&) {
    return "stream chunk is not JSON: " + payload.substr(0, 120);
  }
  if (j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    std::string msg = e.is_object() ? e.value("message", e.dump()) : e.dump();
    return "error chunk: " + msg;
  }
  return "stream chunk without meta_info.completion_tokens: " + payload.substr(0, 120);
}

namespace {

struct Job {
  const BenchRequest* req;
  int64_t output_len;
  double send_at_s;
};

struct DriveResult {
  std::vector<RequestTiming> timings;
  std::vector<int64_t> prompt_tokens;  // as the server reported, -1 when absent
  double duration_s = 0;
  size_t sent = 0;          // jobs sent (the first `sent`, in order)
  size_t cancelled = 0;     // sent and cancelled by a signal
  std::string interrupted;  // "interrupted by SIGTERM" when a signal stopped it
};

class ProgressLine {
 public:
  ProgressLine(bool on, size_t total, const char* what)
      : on_(on), tty_(::isatty(2) == 1), total_(total), what_(what) {}
  void update(size_t done, size_t failed, double elapsed, bool last = false) {
    if (!on_) return;
    const double every = tty_ ? 0.5 : 10.0;
    if (!last && elapsed - last_ < every) return;
    last_ = elapsed;
    std::fprintf(stderr, "%sserve-bench %s: %zu/%zu done, %zu failed, %.1f s%s", tty_ ? "\r" : "",
                 what_, done, total_, failed, elapsed, tty_ && !last ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  bool on_, tty_;
  size_t total_;
  const char* what_;
  double last_ = 0;
};

DriveResult drive(const std::string& gen_url, const std::vector<Job>& jobs,
                  std::optional<int64_t> concurrency, double timeout_s, bool paced,
                  ProgressLine& progress) {
  DriveResult out;
  out.timings.resize(jobs.size());
  out.prompt_tokens.assign(jobs.size(), -1);
  const size_t cap = concurrency ? size_t(*concurrency) : jobs.size();
  HttpClient client(HttpClientOptions{.max_in_flight = int(std::clamp<size_t>(cap, 1, 1 << 20))});
  size_t next = 0, running = 0, done = 0, failed = 0;
  const double t0 = monotonic_seconds();
  std::function<void()> submit_due = [&] {
    const double now = monotonic_seconds() - t0;
    while (next < jobs.size() && running < cap && jobs[next].send_at_s <= now) {
      const size_t i = next++;
      ++running;
      auto timer = std::make_shared<StreamTimer>(int64_t(jobs[i].req->input_ids.size()));
      HttpRequest r;
      r.url = gen_url;
      r.body = generate_body(*jobs[i].req, jobs[i].output_len);
      r.sse = true;
      r.max_attempts = 1;
      r.timeout_s = timeout_s;
      int64_t* pt = &out.prompt_tokens[i];
      r.on_event = [timer, pt](const SseEvent& ev) {
        return read_chunk(ev.data, ev.t, *timer, pt);
      };
      r.on_done = [&, i, timer](HttpResult& res) {
        --running;
        ++done;
        const double start = res.attempt_start_s > 0 ? res.attempt_start_s : res.submit_s;
        out.timings[i] = timer->finish(start, res.ok() ? "" : res.error_message);
        if (!out.timings[i].success) ++failed;
        submit_due();
      };
      client.submit(std::move(r));
    }
  };
  // A signal stops sending and cancels what is in flight; what finished is kept.
  auto interrupted = [&] {
    if (!stop_signal() || !out.interrupted.empty()) return !out.interrupted.empty();
    out.interrupted = "interrupted by " + stop_signal_name();
    out.sent = next;
    next = jobs.size();
    client.cancel_all();
    return true;
  };
  submit_due();
  const double tick = paced ? 0.002 : 0.25;
  while (next < jobs.size() || !client.idle()) {
    client.run(
        [&] {
          if (interrupted()) return;
          submit_due();
          progress.update(done, failed, monotonic_seconds() - t0);
        },
        tick);
    while (next < jobs.size() && client.idle() && !interrupted()) {
      const double wait = jobs[next].send_at_s - (monotonic_seconds() - t0);
      if (wait <= 0) break;
      std::this_thread::sleep_for(std::chrono::duration<double>(std::min(wait, 0.1)));
    }
    submit_due();
  }
  if (out.interrupted.empty()) {
    out.sent = jobs.size();
  } else {
    for (size_t i = 0; i < out.sent; ++i)
      if (out.timings[i].error.find("cancelled") != std::string::npos) ++out.cancelled;
    out.timings.resize(out.sent);
    out.prompt_tokens.resize(out.sent);
  }
  out.duration_s = monotonic_seconds() - t0;
  progress.update(done, failed, out.duration_s, true);
  return out;
}

// The server's non-generation endpoints: --timeout per attempt when given (else 60 s), a line on
// stderr while waiting.
double g_timeout_s = 60;
std::optional<double> g_timeout_given;

HttpResult get(const std::string& url, const char* method = "GET") {
  HttpRequest r;
  r.method = method;
  r.url = url;
  r.timeout_s = g_timeout_s;
  r.max_attempts = 3;
  r.backoff_s = 0.25;
  return http_fetch(std::move(r), std::string(method) + " " + url);
}

// A signal between the steps ends the run: exit 3 with an errored report.
void check_signal(const std::string& during) {
  if (stop_signal())
    throw BenchError(kExitCouldNotRun,
                     "interrupted by " + stop_signal_name() + " during " + during);
}

bool unreachable(const HttpResult& r) {
  return r.error == HttpErrorKind::kConnect || r.error == HttpErrorKind::kTimeout ||
         r.error == HttpErrorKind::kTransport || r.error == HttpErrorKind::kRequest;
}

void flush(const std::string& base, BenchOutcome& out) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    const HttpResult r = get(base + "/flush_cache", "POST");
    if (r.ok()) {
      out.flushed = true;
      return;
    }
    out.flush_note = "/flush_cache: " + r.error_message;
    if (r.status != 400) return;  // 400: requests still running; wait for them to drain
    for (int k = 0; k < 5 && !stop_signal(); ++k)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

HttpResult server_info(const std::string& base) {
  HttpResult r = get(base + "/server_info");
  if (r.status == 404) r = get(base + "/get_server_info");
  return r;
}

// POST `body` to the server's tokenizer endpoint `path` and return the array under `key`, one
// entry per `n` inputs; anything else is "could not run", the message saying what `why` needs.
json tokenizer_call(const std::string& base, const char* path, const json& body, const char* key,
                    size_t n, const std::string& why) {
  HttpRequest r;
  r.url = base + path;
  r.body = body.dump();
  r.timeout_s = g_timeout_s;
  r.max_attempts = 3;
  r.backoff_s = 0.25;
  const HttpResult res = http_fetch(std::move(r), "POST " + base + path);
  if (auto refusal = api_key_refusal(res); !refusal.empty())
    throw BenchError(kExitCouldNotRun, refusal);
  if (!res.ok())
    throw BenchError(kExitCouldNotRun, std::string("the server's ") + path + " (" + why +
                                           ") failed: " + res.error_message);
  json j = json::parse(res.body, nullptr, false);
  if (!j.is_object() || !j.contains(key) || !j[key].is_array() || j[key].size() != n)
    throw BenchError(kExitCouldNotRun,
                     std::string(path) + " answered without one '" + key + "' entry per input");
  return std::move(j[key]);
}

// The server's tokenizer (SGLang's /v1/tokenize): the `random` dataset's ShareGPT text, and the
// special-token count of the text form.
Encoder server_encoder(const std::string& base, const std::string& why) {
  return [base, why](const std::vector<std::string>& texts) {
    const json tokens =
        tokenizer_call(base, "/v1/tokenize", json{{"prompt", texts}, {"add_special_tokens", true}},
                       "tokens", texts.size(), why);
    std::vector<std::vector<int32_t>> out;
    for (const auto& t : tokens) {
      out.emplace_back();
      for (const auto& id : t) out.back().push_back(id.get<int32_t>());
    }
    return out;
  };
}

// The server's decoder (SGLang's POST /v1/detokenize, a batch at once, special tokens kept).
Decoder server_decoder(const std::string& base) {
  return [base](const std::vector<std::vector<int32_t>>& ids) {
    const json texts = tokenizer_call(
        base, "/v1/detokenize", json{{"tokens", ids}, {"skip_special_tokens", false}}, "text",
        ids.size(),
        "prompts go out as text; --tokenizer decodes them here, --tokenize-prompt sends "
        "input_ids instead");
    std::vector<std::string> out;
    for (const auto& t : texts) {
      if (!t.is_string())
        throw BenchError(kExitCouldNotRun, "/v1/detokenize answered a text that is not a string");
      out.push_back(t.get<std::string>());
    }
    return out;
  };
}

// Before anything is sent: the server answers, and accepts the key.
void check_server(const std::string& base) {
  const HttpResult r = server_info(base);
  if (unreachable(r)) throw BenchError(kExitCouldNotRun, "server unreachable: " + r.error_message);
  if (auto refusal = api_key_refusal(r); !refusal.empty())
    throw BenchError(kExitCouldNotRun, refusal);
}

// bench_serving's --profile: POST /start_profile before the timed requests (with num_steps, the
// server stops by itself after that many forward steps), /stop_profile after them. A server
// without the endpoints (404, or 400 when it was started without a profiler directory) cannot
// run a profiled benchmark: "could not run", before any timed request.
void start_profile(const std::string& base, std::optional<int64_t> num_steps, BenchOutcome& out) {
  HttpRequest r;
  r.url = base + "/start_profile";
  json body = json::object();
  if (num_steps) body["num_steps"] = *num_steps;
  r.body = body.dump();
  r.timeout_s = g_timeout_s;
  r.max_attempts = 1;
  const HttpResult res = http_fetch(std::move(r), "POST " + base + "/start_profile");
  if (auto refusal = api_key_refusal(res); !refusal.empty())
    throw BenchError(kExitCouldNotRun, refusal);
  if (!res.ok())
    throw BenchError(kExitCouldNotRun,
                     "--profile: profiling is not supported by this server (POST /start_profile: " +
                         res.error_message +
                         "); SGLang profiles when started with SGLANG_TORCH_PROFILER_DIR set");
  out.profile_note =
      "POST /start_profile " + body.dump() + " before the timed requests" +
      (num_steps ? " (the server stops after " + std::to_string(*num_steps) + " forward steps)"
                 : std::string());
}

void stop_profile(const std::string& base, BenchOutcome& out) {
  HttpRequest r;
  r.url = base + "/stop_profile";
  r.body = "{}";
  r.timeout_s = g_timeout_given.value_or(600);  // the server writes its trace before answering
  r.max_attempts = 1;
  const HttpResult res = http_fetch(std::move(r), "POST " + base + "/stop_profile");
  out.profile_note += res.ok() ? "; POST /stop_profile after them"
                               : "; POST /stop_profile failed: " + res.error_message;
}

void read_accept_length(const std::string& base, BenchOutcome& out) {
  const HttpResult r = server_info(base);
  if (!r.ok()) {
    out.accept_note = "/server_info: " + r.error_message;
    return;
  }
  out.server_info = json::parse(r.body, nullptr, false);
  if (out.server_info.is_discarded()) out.server_info = nullptr;
  AcceptInfo info;
  if (auto e = parse_server_info(r.body, info); !e.empty()) {
    out.accept_note = "/server_info: " + e;
    return;
  }
  out.accept_per_rank = info.per_rank;
  if (!info.any()) {
    out.accept_note = "speculative decoding off (no avg_spec_accept_length in /server_info)";
    return;
  }
  if (!info.per_rank.empty()) out.context.accept_length = info.per_rank[0];
}

}  // namespace

BenchOutcome run_serve_bench(const BenchOptions& o) {
  BenchOutcome out;
  g_timeout_given = o.control_timeout_s;
  g_timeout_s = o.control_timeout_s.value_or(60);
  std::string base;
  try {
    base = normalize_base_url(o.url);
  } catch (const std::invalid_argument& e) {
    throw BenchError(kExitUsage, std::string("--url: ") + e.what());
  }
  if (o.max_concurrency && *o.max_concurrency < 1)
    throw BenchError(kExitUsage, "--max-concurrency=" + std::to_string(*o.max_concurrency) +
                                     ": must be at least 1");
  if (o.warmup_requests < 0)
    throw BenchError(kExitUsage,
                     "--warmup-requests=" + std::to_string(o.warmup_requests) + ": must be >= 0");
  const WorkloadSpec& w = o.workload;
  out.vocab_size = w.vocab_size;
  out.vocab_source = o.vocab_source;
  // Every connection of the run and of the warmup (sent all at once, as bench_serving does) must
  // fit the open-file limit before the first request goes out.
  // (A --num-prompts below 1 is the workload's error to name, below.)
  const size_t cap = size_t(std::max<int64_t>(0, o.max_concurrency.value_or(w.num_prompts)));
  const size_t warm = size_t(std::max<int64_t>(0, o.warmup_requests));
  if (auto e = warm > cap ? check_open_file_limit(warm, "--warmup-requests")
                          : check_open_file_limit(
                                cap, o.max_concurrency ? "--max-concurrency"
                                                       : "--num-prompts (no --max-concurrency)");
      !e.empty())
    throw BenchError(kExitUsage, e);
  // The local tokenizer (--tokenizer, byte-level BPE) decodes text prompts here, as
  // bench_serving decodes with the user's tokenizer; otherwise the server's endpoints do.
  std::optional<BpeDecoder> local;
  std::string local_note;
  if (!o.tokenize_prompt && !o.tokenizer_path.empty() && !o.server_tokenizer) {
    try {
      local = BpeDecoder::load(o.tokenizer_path);
    } catch (const std::invalid_argument& e) {
      local_note = e.what();
      std::fprintf(stderr, "dsv4-eval serve-bench: %s; prompts are decoded by the server\n",
                   e.what());
    }
  }
  // `random` encodes its ShareGPT text with the same local tokenizer when it can.
  std::optional<BpeEncoder> local_enc;
  if (w.dataset == "random" && !o.tokenizer_path.empty() && !o.server_tokenizer) {
    try {
      local_enc = BpeEncoder::load(o.tokenizer_path);
    } catch (const std::invalid_argument& e) {
      out.encode_note = e.what();
      std::fprintf(stderr,
                   "dsv4-eval serve-bench: %s; the ShareGPT text is encoded by the server\n",
                   e.what());
    }
  }
  std::vector<BenchRequest> reqs;
  try {
    Encoder enc =
        local_enc ? Encoder([&local_enc](const std::vector<std::string>& texts) {
          std::vector<std::vector<int32_t>> ids;
          for (const auto& t : texts) ids.push_back(local_enc->encode(t));
          return ids;
        })
                  : server_encoder(base,
                                   "the ShareGPT text of --dataset-name random is encoded by the "
                                   "server's tokenizer; --tokenizer encodes it here");
    reqs = w.dataset == "random" ? random_sharegpt_workload(w, load_sharegpt(o.dataset_path), enc)
                                 : make_workload(w);
    if (w.dataset == "random")
      out.encode_note = (local_enc ? "ShareGPT text encoded by --tokenizer " + o.tokenizer_path
                                   : "ShareGPT text encoded by the server's /v1/tokenize") +
                        (out.encode_note.empty() ? "" : " (" + out.encode_note + ")");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    throw BenchError(kExitUsage, what.rfind("--", 0) == 0 ? what : "--" + what);
  } catch (const BenchError&) {  // the server's /v1/tokenize refused: could not run
    throw;
  } catch (const std::runtime_error& e) {  // the local tokenizer cannot encode a text
    throw BenchError(kExitUsage, e.what());
  }
  check_signal("the workload's preparation");
  check_server(base);
  check_signal("GET /server_info");
  if (o.tokenize_prompt) {
    out.prompt_form = "input_ids (--tokenize-prompt)";
  } else if (local) {
    out.special_tokens = local->special_tokens();
    const BpeDecoder& dec = *local;
    to_text_prompts(reqs, out.special_tokens, [&dec](const std::vector<std::vector<int32_t>>& ids) {
      std::vector<std::string> texts;
      for (const auto& v : ids) texts.push_back(dec.decode(v));
      return texts;
    });
    out.prompt_form = "text (decoded by --tokenizer " + dec.path() + ", " +
                      std::to_string(out.special_tokens) +
                      " special token(s) per prompt left to the server)";
  } else {
    // tokenizer.num_special_tokens_to_add(): what encoding an empty text with them adds.
    out.special_tokens =
        int64_t(server_encoder(base,
                               "the special tokens of text prompts; --tokenizer counts them here, "
                               "--tokenize-prompt sends input_ids instead")({std::string()})
                    .at(0)
                    .size());
    to_text_prompts(reqs, out.special_tokens, server_decoder(base));
    out.prompt_form = "text (/v1/detokenize, " + std::to_string(out.special_tokens) +
                      " special token(s) per prompt left to the server)" +
                      (local_note.empty() ? "" : "; --tokenizer not used: " + local_note);
  }
  out.context.request_rate = w.request_rate;
  out.context.max_concurrency = o.max_concurrency;
  const std::string gen_url = base + "/generate";

  if (o.warmup_requests > 0) {
    std::vector<Job> warm(size_t(o.warmup_requests),
                          Job{&reqs[0], std::min<int64_t>(reqs[0].output_len, 32), 0.0});
    ProgressLine p(o.progress, warm.size(), "warmup");
    check_signal("the prompts' decoding");
    const DriveResult d = drive(gen_url, warm, std::nullopt, o.request_timeout_s, false, p);
    check_signal("the warmup");
    for (const auto& t : d.timings) (t.success ? out.warmup_ok : out.warmup_failed) += 1;
    if (out.warmup_ok == 0)
      throw BenchError(kExitCouldNotRun,
                       "every warmup request failed; the first: " + d.timings[0].error);
  }
  if (o.flush_cache) flush(base, out);
  check_signal("POST /flush_cache");
  if (o.profile) start_profile(base, o.profile_num_steps, out);
  check_signal("POST /start_profile");

  std::vector<Job> jobs;
  for (const auto& r : reqs) jobs.push_back({&r, r.output_len, r.send_at_s});
  ProgressLine p(o.progress, jobs.size(), "run");
  DriveResult d =
      drive(gen_url, jobs, o.max_concurrency, o.request_timeout_s, w.request_rate.has_value(), p);
  if (!d.interrupted.empty())
    out.interrupted = d.interrupted + " after " + std::to_string(d.sent) + " of " +
                      std::to_string(reqs.size()) + " timed requests were sent (" +
                      std::to_string(d.cancelled) +
                      " cancelled in flight); the metrics cover the requests sent";
  for (size_t i = 0; i < d.timings.size(); ++i) {
    const RequestTiming& t = d.timings[i];
    out.requested_output.push_back(reqs[i].output_len);
    if (!t.success) {
      if (out.errors.size() < 5 &&
          std::find(out.errors.begin(), out.errors.end(), t.error) == out.errors.end())
        out.errors.push_back(t.error);
      continue;
    }
    if (t.output_len < reqs[i].output_len) ++out.short_outputs;
    const int64_t expect = t.prompt_len + (reqs[i].as_text ? out.special_tokens : 0);
    if (d.prompt_tokens[i] >= 0 && d.prompt_tokens[i] != expect) ++out.prompt_len_mismatches;
  }
  if (o.profile && !o.profile_num_steps) stop_profile(base, out);
  out.metrics = compute_metrics(d.timings, d.duration_s);
  out.timings = std::move(d.timings);
  read_accept_length(base, out);
  return out;
}

}  // namespace dsv4::eval::serve
