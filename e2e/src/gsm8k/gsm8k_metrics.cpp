// GSM8K records, metrics and report tables.
#include "gsm8k/gsm8k_metrics.hpp"

#include <algorithm>
#include <cmath>

#include "report/accept_length.hpp"
#include "report/results_log.hpp"

namespace dsv4::eval {

using json = nlohmann::json;

json make_gsm8k_record(size_t index, const std::string& prompt_hash, const std::string& label,
                       const Completion& c, const std::vector<std::string>& stops, double latency_s,
                       int attempts, std::optional<double> simple_eval_label) {
  std::optional<std::string> pred;
  bool correct = false;
  if (simple_eval_label) {
    if (const auto v = gsm8k::simple_eval_answer(c.text)) {
      pred = format_number(*v, 15);
      correct = *v == *simple_eval_label;
    }
  } else {
    pred = gsm8k::extract_answer(c.text, stops);
    correct = pred && *pred == label;
  }
  json r = {{"index", index},
            {"prompt_sha256", prompt_hash},
            {"label", label},
            {"pred", pred ? json(*pred) : json(nullptr)},
            {"correct", correct},
            {"invalid", !pred},
            {"output", c.text},
            {"completion_tokens", c.completion_tokens ? json(*c.completion_tokens) : json(nullptr)},
            {"prompt_tokens", c.prompt_tokens ? json(*c.prompt_tokens) : json(nullptr)},
            {"spec_verify_ct", c.spec_verify_ct ? json(*c.spec_verify_ct) : json(nullptr)},
            {"latency_s", latency_s},
            {"attempts", attempts},
            {"finish_reason", c.finish_reason}};
  if (c.completion_tokens && c.spec_verify_ct && *c.spec_verify_ct > 0)
    r["accept_length"] = double(*c.completion_tokens) / double(*c.spec_verify_ct);
  else
    r["accept_length"] = nullptr;
  return r;
}

namespace {
std::optional<double> num(const json& r, const char* key) {
  if (!r.contains(key) || !r[key].is_number()) return std::nullopt;
  return r[key].get<double>();
}
std::string f4(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", v);
  return b;
}
}  // namespace

Gsm8kSummary summarize_gsm8k(const std::vector<gsm8k::Record>& questions,
                             const std::map<size_t, json>& answered, const InvocationStats& inv,
                             const std::vector<json>& accept_rows) {
  Gsm8kSummary s;
  const size_t n = questions.size();
  std::vector<double> latency, tokens, accept;
  double verify_sum = 0, tokens_with_verify = 0;
  for (const auto& [i, r] : answered) {
    if (r.value("correct", false))
      ++s.correct;
    else if (r.value("invalid", false))
      ++s.invalid;
    else
      ++s.wrong;
    if (r.value("finish_reason", "").rfind("length", 0) == 0) ++s.truncated;
    if (auto v = num(r, "latency_s")) latency.push_back(*v);
    if (auto v = num(r, "completion_tokens")) tokens.push_back(*v);
    if (auto v = num(r, "accept_length")) {
      accept.push_back(*v);
      tokens_with_verify += *num(r, "completion_tokens");
      verify_sum += *num(r, "spec_verify_ct");
    }
  }
  for (size_t i : inv.failed_questions)
    if (i < n && !answered.count(i)) ++s.failed;
  s.not_asked = n - answered.size() - s.failed;
  Metrics& m = s.metrics;
  auto& miss = s.missing;
  auto put = [&](const std::string& name, double v) { m[name] = v; };
  put("questions", double(n));
  put("accuracy", n ? double(s.correct) / double(n) : 0);
  put("invalid", n ? double(s.invalid) / double(n) : 0);
  put("failed", double(s.failed));
  put("not_asked", double(s.not_asked));
  put("truncated", double(s.truncated));
  put("resumed", double(inv.resumed));
  put("requests_sent", double(inv.requests));
  put("retries", double(inv.retries));
  if (inv.requests > 0 && inv.wall_s > 0) {
    put("latency", inv.wall_s);
    put("output_throughput", double(inv.completion_tokens) / inv.wall_s);
    put("client_cpu_s", inv.cpu_s);
    put("client_cpu_ms_per_request", 1e3 * inv.cpu_s / double(inv.requests));
    put("client_cpu_fraction", inv.cpu_s / inv.wall_s);
  } else {
    for (const char* k : {"latency", "output_throughput", "client_cpu_s",
                          "client_cpu_ms_per_request", "client_cpu_fraction"})
      miss[k] = "no request was sent by this invocation (every answer was resumed)";
  }
  if (!latency.empty()) {
    put("latency_p50", percentile(latency, 50));
    put("latency_p90", percentile(latency, 90));
    put("latency_p99", percentile(latency, 99));
    put("latency_max", percentile(latency, 100));
  }
  if (!tokens.empty()) {
    double sum = 0;
    for (double t : tokens) sum += t;
    put("completion_tokens_total", sum);
    put("completion_tokens_mean", sum / double(tokens.size()));
  }
  if (!accept.empty()) {
    put("request_accept_length_mean", mean(accept));
    put("request_accept_length_p10", percentile(accept, 10));
    put("request_accept_length_p50", percentile(accept, 50));
    put("request_accept_length_p90", percentile(accept, 90));
    put("request_accept_length_total", tokens_with_verify / verify_sum);
  } else {
    for (const char* k :
         {"request_accept_length_mean", "request_accept_length_p10", "request_accept_length_p50",
          "request_accept_length_p90", "request_accept_length_total"})
      miss[k] =
          "no response carried spec_verify_ct (speculative decoding off, or an API "
          "without it)";
  }
  // Server-side accept length per DP rank, combined over the invocations' parts: a part's
  // verify steps are its tokens / its accept length (an integer on the server, so rounded when
  // within 1e-6), and the whole is sum(tokens) / sum(verify steps), bit for bit what the server
  // would report for one uninterrupted part of the same requests.
  size_t ranks = 0, parts = 0, unread_parts = 0;
  double row_tokens = 0, unread_tokens = 0;
  std::vector<std::string> unread_why;
  for (const auto& row : accept_rows) {
    const double t = row.value("completion_tokens", 0.0);
    row_tokens += t;
    if (row.contains("unread") || !row.contains("per_rank") || !row["per_rank"].is_array()) {
      ++unread_parts;
      unread_tokens += t;
      if (row.contains("unread") && row["unread"].is_string())
        unread_why.push_back(row["unread"].get<std::string>());
      continue;
    }
    ++parts;
    ranks = std::max(ranks, row["per_rank"].size());
  }
  std::vector<std::optional<double>> per_rank(ranks);
  for (size_t r = 0; r < ranks; ++r) {
    double t_sum = 0, v_sum = 0, only = 0;
    int contributing = 0;
    for (const auto& row : accept_rows) {
      if (row.contains("unread") || !row.contains("per_rank") || !row["per_rank"].is_array() ||
          r >= row["per_rank"].size())
        continue;
      const json& a = row["per_rank"][r];
      const double t = row.value("completion_tokens", 0.0);
      if (!a.is_number() || a.get<double>() <= 0 || t <= 0) continue;
      double v = t / a.get<double>();
      if (std::fabs(v - std::round(v)) < 1e-6) v = std::round(v);
      t_sum += t;
      v_sum += v;
      only = a.get<double>();
      ++contributing;
    }
    if (contributing == 1)
      per_rank[r] = only;  // the server's own number, bit for bit
    else if (v_sum > 0)
      per_rank[r] = t_sum / v_sum;
  }
  s.accept_note = put_accept_metrics(
      per_rank,
      accept_rows.empty() ? "no /server_info was read after a run"
                          : "speculative decoding off (no avg_spec_accept_length in /server_info "
                            "internal_states)",
      m, miss);
  // Answers whose invocation left no row (killed before it could read /server_info).
  double answered_tokens = 0;
  for (double t : tokens) answered_tokens += t;
  const double missing_tokens = std::max(0.0, answered_tokens - row_tokens);
  s.accept_parts = parts;
  if (unread_parts > 0 || missing_tokens > 0) {
    const double covered = std::max(0.0, answered_tokens - unread_tokens - missing_tokens);
    s.accept_status = "partial";
    s.accept_detail = "partial: the server's counters cover " + std::to_string(size_t(covered)) +
                      " of the " + std::to_string(size_t(answered_tokens)) +
                      " completion tokens answered";
    if (unread_parts > 0)
      s.accept_detail += "; " + std::to_string(unread_parts) +
                         " invocation(s) could not read /server_info when they stopped (" +
                         (unread_why.empty() ? std::string("no reason recorded") : unread_why[0]) +
                         ")";
    if (missing_tokens > 0)
      s.accept_detail += "; " + std::to_string(size_t(missing_tokens)) +
                         " tokens were answered by an invocation that ended before it read "
                         "/server_info (killed)";
  } else if (parts > 1) {
    s.accept_status = "combined";
    s.accept_detail = "combined over " + std::to_string(parts) +
                      " invocations (the server's counters read at each stop and at the end, "
                      "weighted by their tokens)";
  } else if (parts == 1) {
    s.accept_status = "single";
  }

  ReportTable outcomes{
      "Outcomes", {"correct", "wrong", "invalid", "failed", "not asked", "questions"}, {}};
  outcomes.rows.push_back({std::to_string(s.correct), std::to_string(s.wrong),
                           std::to_string(s.invalid), std::to_string(s.failed),
                           std::to_string(s.not_asked), std::to_string(n)});
  s.tables.push_back(outcomes);
  if (ranks > 0) {
    ReportTable t{"Server accept length per DP rank (/server_info after /flush_cache)",
                  {"rank", "avg_spec_accept_length"},
                  {}};
    for (size_t r = 0; r < ranks; ++r)
      t.rows.push_back({std::to_string(r), per_rank[r] ? f4(*per_rank[r]) : "n/a (key missing)"});
    s.tables.push_back(t);
  }
  if (!accept.empty()) {
    ReportTable t{"Per-request accept length (completion_tokens / spec_verify_ct)",
                  {"min", "p10", "p25", "p50", "p75", "p90", "max", "mean", "requests"},
                  {}};
    t.rows.push_back(
        {f4(percentile(accept, 0)), f4(percentile(accept, 10)), f4(percentile(accept, 25)),
         f4(percentile(accept, 50)), f4(percentile(accept, 75)), f4(percentile(accept, 90)),
         f4(percentile(accept, 100)), f4(mean(accept)), std::to_string(accept.size())});
    s.tables.push_back(t);
  }
  if (!inv.errors.empty()) {
    ReportTable t{"Requests that failed after retries (this invocation)", {"kind", "count"}, {}};
    for (const auto& [k, v] : inv.errors) t.rows.push_back({k, std::to_string(v)});
    s.tables.push_back(t);
  }
  if (!inv.attempt_causes.empty()) {
    ReportTable t{
        "Failed attempts by cause, retried or final (this invocation)", {"cause", "attempts"}, {}};
    for (const auto& [k, v] : inv.attempt_causes) t.rows.push_back({k, std::to_string(v)});
    s.tables.push_back(t);
  }
  return s;
}

void fill_gsm8k_report(RunReport& report, const Gsm8kSummary& s, const InvocationStats& inv,
                       const std::string& accept_note) {
  struct Def {
    const char* name;
    const char* unit;
    const char* what;
  };
  static const Def defs[] = {
      {"accuracy", "", "correct answers / questions"},
      {"invalid", "", "answers without a number / questions"},
      {"failed", "", "questions whose request failed after retries (no answer)"},
      {"not_asked", "",
       "questions without an answer that were never asked, or cancelled in flight, because the "
       "run stopped first"},
      {"truncated", "",
       "answers cut by the token budget (finish_reason length; a reasoning model that spent "
       "--max-new-tokens on reasoning_content)"},
      {"questions", "", "questions asked"},
      {"latency", "s", "wall time of this invocation's requests"},
      {"output_throughput", "tok/s", "completion tokens of this invocation / latency"},
      {"latency_p50", "s", "per-request latency, median"},
      {"latency_p90", "s", "per-request latency, p90"},
      {"latency_p99", "s", "per-request latency, p99"},
      {"latency_max", "s", "per-request latency, max"},
      {"completion_tokens_total", "tok", "sum of completion_tokens"},
      {"completion_tokens_mean", "tok", "mean completion_tokens"},
      {"request_accept_length_mean", "", "mean of completion_tokens / spec_verify_ct"},
      {"request_accept_length_p10", "", "per-request accept length, p10"},
      {"request_accept_length_p50", "", "per-request accept length, median"},
      {"request_accept_length_p90", "", "per-request accept length, p90"},
      {"request_accept_length_total", "", "sum completion_tokens / sum spec_verify_ct"},
      {"requests_sent", "", "requests finished by this invocation"},
      {"retries", "", "retried attempts in this invocation"},
      {"resumed", "", "answers read back from results.jsonl"},
      {"client_cpu_s", "s", "CPU time of the client thread"},
      {"client_cpu_ms_per_request", "ms", "client CPU time per request"},
      {"client_cpu_fraction", "", "client CPU time / latency"},
  };
  report.metrics.clear();
  for (const Def& d : defs) {
    ReportMetric m{d.name, std::nullopt, d.unit, d.what, ""};
    if (auto it = s.metrics.find(d.name); it != s.metrics.end()) m.value = it->second;
    if (auto it = s.missing.find(d.name); it != s.missing.end()) {
      m.note = it->second;
    }
    report.metrics.push_back(m);
  }
  for (const auto& [name, what] : accept_metric_definitions()) {
    ReportMetric m{name, std::nullopt, "", what, ""};
    if (auto it = s.metrics.find(name); it != s.metrics.end()) {
      m.value = it->second;
      m.note = s.accept_detail;
    }
    if (auto it = s.missing.find(name); it != s.missing.end())
      m.note = accept_note.empty() ? it->second : accept_note;
    report.metrics.push_back(m);
  }
  if (!s.accept_note.empty()) report.notes.push_back(s.accept_note);
  if (!s.accept_detail.empty()) report.notes.push_back("server accept length " + s.accept_detail);
  for (const auto& [k, v] : s.metrics)
    if (k.rfind("accept_length_rank", 0) == 0)
      report.metrics.push_back(
          {k, v, "", "server avg_spec_accept_length of DP rank " + k.substr(18), s.accept_detail});
  report.tables = s.tables;
  nlohmann::json per_rank = nlohmann::json::object();
  for (const auto& [k, v] : s.metrics)
    if (k.rfind("accept_length_rank", 0) == 0) per_rank[k] = v;
  report.extra["accept_length_per_rank"] = per_rank;
  report.extra["accept_length_parts"] = {
      {"status", s.accept_status.empty() ? "none" : s.accept_status},
      {"parts", s.accept_parts},
      {"detail", s.accept_detail}};
  report.extra["client"] = {{"requests", inv.requests},
                            {"retries", inv.retries},
                            {"cpu_s", inv.cpu_s},
                            {"wall_s", inv.wall_s}};
}

}  // namespace dsv4::eval
