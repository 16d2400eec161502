// The wire protocols dsv4-eval speaks: SGLang native /generate and the OpenAI-compatible
// completions and chat APIs (request bodies, responses, streams), plus /server_info parsing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_client.hpp"

namespace dsv4::eval {

enum class Api { kSglang, kOpenAICompletions, kOpenAIChat };
std::optional<Api> parse_api(
    std::string_view name);  // "sglang", "openai-completions", "openai-chat"
const char* to_string(Api api);
const char* generation_path(Api api);  // "/generate", "/v1/completions", "/v1/chat/completions"
const char* readiness_path(Api api);   // "/health_generate" (sglang) or "/v1/models"

struct GenParams {
  size_t max_new_tokens = 512;
  double temperature = 0;
  std::vector<std::string> stops;
  bool stream = false;
  std::string model;  // OpenAI "model" field (SGLang ignores it)
  // Chat only: chat_template_kwargs {"thinking": b, "enable_thinking": b} (DeepSeek's and Qwen's
  // template switches); unset sends none, so the template's default applies.
  std::optional<bool> thinking;
};

// The JSON body of one generation request for `prompt` (chat: one user message).
std::string generation_body(Api api, const std::string& prompt, const GenParams& p);

struct Completion {
  std::string text;
  std::string reasoning;  // chat: reasoning_content (scored only when content is empty)
  std::optional<int64_t> prompt_tokens;
  std::optional<int64_t> completion_tokens;
  std::optional<int64_t> spec_verify_ct;  // SGLang meta_info, present with speculative decoding
  std::string finish_reason;              // "stop", "stop:Question", "length", ...
};

// Parses a non-streaming response body; returns "" or what is wrong with it (missing field,
// wrong type, not JSON, an error object).
std::string parse_completion(Api api, std::string_view body, Completion& out);

// Builds a Completion from a stream's events. SGLang's /generate streams the cumulative text by
// default (incremental_text = false); OpenAI streams deltas. feed() restarts when an event of a
// new attempt arrives.
class StreamAccumulator {
 public:
  explicit StreamAccumulator(Api api, bool incremental_text = false)
      : api_(api), incremental_(incremental_text) {}
  // One SSE payload; returns "" or an error ("error chunk: ...", "chunk is not JSON: ...").
  std::string feed(const SseEvent& ev);
  // After the stream ended: the completion, or an error if no content event arrived.
  std::string finish(Completion& out) const;
  size_t content_events() const { return content_events_; }
  double first_content_s() const { return first_content_s_; }  // arrival of the first text

 private:
  Api api_;
  bool incremental_;
  int attempt_ = 0;
  Completion acc_;
  size_t content_events_ = 0;
  double first_content_s_ = 0;
};

// What dsv4-eval reads from /server_info (/get_server_info): avg_spec_accept_length of every DP
// rank and the streaming mode. Behind SGLang's prefill/decode router the body is
// {"prefill": [...], "decode": [info, ...]}: the first decode server's info is read, as
// bench_serving does.
struct AcceptInfo {
  // One per internal_states entry; empty where the rank has no avg_spec_accept_length or
  // reports 0.0 (no speculative forward step since the flush).
  std::vector<std::optional<double>> per_rank;
  std::optional<bool> incremental_streaming;  // server arg incremental_streaming_output
  size_t decode_servers = 0;                  // > 0: a router's body
  bool any() const;
};
// Returns "" or why the body cannot be read (not JSON, no internal_states list).
std::string parse_server_info(std::string_view body, AcceptInfo& out);

// Normalises a base URL: no trailing '/', must start with http:// or https://; throws
// std::invalid_argument naming the value.
std::string normalize_base_url(const std::string& url);

}  // namespace dsv4::eval
