// Request bodies and response parsing for SGLang native and OpenAI-compatible generation.
#include "http/server_api.hpp"

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace dsv4::eval {

using json = nlohmann::json;

std::optional<Api> parse_api(std::string_view name) {
  if (name == "sglang") return Api::kSglang;
  if (name == "openai-completions") return Api::kOpenAICompletions;
  if (name == "openai-chat") return Api::kOpenAIChat;
  return std::nullopt;
}

const char* to_string(Api api) {
  switch (api) {
    case Api::kSglang:
      return "sglang";
    case Api::kOpenAICompletions:
      return "openai-completions";
    case Api::kOpenAIChat:
      return "openai-chat";
  }
  return "?";
}

const char* generation_path(Api api) {
  switch (api) {
    case Api::kSglang:
      return "/generate";
    case Api::kOpenAICompletions:
      return "/v1/completions";
    case Api::kOpenAIChat:
      return "/v1/chat/completions";
  }
  return "/generate";
}

const char* readiness_path(Api api) {
  return api == Api::kSglang ? "/health_generate" : "/v1/models";
}

std::string generation_body(Api api, const std::string& prompt, const GenParams& p) {
  json j;
  if (api == Api::kSglang) {
    j = {
        {"text", prompt},
        {"sampling_params",
         {{"temperature", p.temperature}, {"max_new_tokens", p.max_new_tokens}, {"stop", p.stops}}},
        {"stream", p.stream}};
    return j.dump();
  }
  j = {{"model", p.model.empty() ? std::string("default") : p.model},
       {"max_tokens", p.max_new_tokens},
       {"temperature", p.temperature},
       {"stop", p.stops},
       {"stream", p.stream}};
  if (p.stream) j["stream_options"] = {{"include_usage", true}};
  if (api == Api::kOpenAICompletions) {
    j["prompt"] = prompt;
  } else {
    j["messages"] = json::array({{{"role", "user"}, {"content", prompt}}});
    if (p.thinking)
      j["chat_template_kwargs"] = {{"thinking", *p.thinking}, {"enable_thinking", *p.thinking}};
  }
  return j.dump();
}

namespace {
std::optional<int64_t> opt_int(const json& o, const char* key) {
  if (!o.is_object() || !o.contains(key) || !o[key].is_number_integer()) return std::nullopt;
  return o[key].get<int64_t>();
}

std::string finish_text(const json& fr) {
  if (fr.is_null()) return "";
  if (fr.is_string()) return fr.get<std::string>();
  if (fr.is_object()) {
    std::string s = fr.value("type", "");
    if (fr.contains("matched")) {
      const json& m = fr["matched"];
      s += ":" + (m.is_string() ? m.get<std::string>() : m.dump());
    }
    return s;
  }
  return fr.dump();
}

std::string error_text(const json& j) {
  if (j.contains("error")) {
    const json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string())
      return e["message"].get<std::string>();
    return e.dump();
  }
  if (j.value("object", "") == "error") return j.value("message", j.dump());
  return "";
}

// SGLang ends an aborted request (scheduler abort, out of memory, /abort_request) with HTTP 200
// and finish_reason {"type": "abort", "message": ...} (native) or "abort" (OpenAI): a failed
// request, never an answer.
std::string abort_text(const json& fr) {
  if (fr.is_string() && fr.get<std::string>() == "abort") return "the server aborted the request";
  if (fr.is_object() && fr.value("type", "") == "abort")
    return "the server aborted the request" + (fr.contains("message") && fr["message"].is_string()
                                                   ? ": " + fr["message"].get<std::string>()
                                                   : std::string());
  return "";
}

// Chat: the visible answer, or reasoning_content when the answer is empty (a reasoning parser
// that kept everything as reasoning, or a budget spent while thinking).
void take_chat_text(const json& msg, Completion& out) {
  if (msg.contains("content") && msg["content"].is_string())
    out.text += msg["content"].get<std::string>();
  if (msg.contains("reasoning_content") && msg["reasoning_content"].is_string())
    out.reasoning += msg["reasoning_content"].get<std::string>();
}

std::string read_usage(const json& j, Completion& out) {
  if (!j.contains("usage") || j["usage"].is_null()) return "";
  const json& u = j["usage"];
  if (!u.is_object()) return "field 'usage' is not an object";
  out.prompt_tokens = opt_int(u, "prompt_tokens");
  out.completion_tokens = opt_int(u, "completion_tokens");
  if (auto v = opt_int(u, "spec_verify_ct")) out.spec_verify_ct = v;
  return "";
}
}  // namespace

std::string parse_completion(Api api, std::string_view body, Completion& out) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return "response is not JSON: '" + std::string(body.substr(0, 120)) + "'";
  if (!j.is_object()) return "response is not a JSON object";
  if (auto e = error_text(j); !e.empty()) return "error response: " + e;
  out = Completion{};
  if (api == Api::kSglang) {
    if (!j.contains("text") || !j["text"].is_string())
      return "field 'text' missing or not a string";
    out.text = j["text"].get<std::string>();
    if (!j.contains("meta_info") || !j["meta_info"].is_object())
      return "field 'meta_info' missing or not an object";
    const json& m = j["meta_info"];
    out.completion_tokens = opt_int(m, "completion_tokens");
    if (!out.completion_tokens)
      return "field 'meta_info.completion_tokens' missing or not an integer";
    out.prompt_tokens = opt_int(m, "prompt_tokens");
    out.spec_verify_ct = opt_int(m, "spec_verify_ct");
    if (m.contains("finish_reason")) {
      if (auto a = abort_text(m["finish_reason"]); !a.empty()) return a;
      out.finish_reason = finish_text(m["finish_reason"]);
    }
    return "";
  }
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty())
    return "field 'choices' missing or empty";
  const json& c = j["choices"][0];
  if (api == Api::kOpenAICompletions) {
    if (!c.contains("text") || !c["text"].is_string())
      return "field 'choices[0].text' missing or not a string";
    out.text = c["text"].get<std::string>();
  } else {
    if (!c.contains("message") || !c["message"].is_object() || !c["message"].contains("content"))
      return "field 'choices[0].message.content' missing";
    const json& content = c["message"]["content"];
    if (!content.is_string() && !content.is_null())
      return "field 'choices[0].message.content' is not a string";
    take_chat_text(c["message"], out);
    if (out.text.empty()) out.text = out.reasoning;
  }
  if (c.contains("finish_reason")) {
    if (auto a = abort_text(c["finish_reason"]); !a.empty()) return a;
    out.finish_reason = finish_text(c["finish_reason"]);
  }
  if (c.contains("matched_stop") && c["matched_stop"].is_string())
    out.finish_reason += ":" + c["matched_stop"].get<std::string>();
  return read_usage(j, out);
}

std::string StreamAccumulator::feed(const SseEvent& ev) {
  if (ev.attempt != attempt_) {  // a retry restarts the stream
    attempt_ = ev.attempt;
    acc_ = Completion{};
    content_events_ = 0;
    first_content_s_ = 0;
  }
  if (ev.data == "[DONE]") return "";
  json j = json::parse(ev.data, nullptr, false);
  if (j.is_discarded()) return "chunk is not JSON: '" + ev.data.substr(0, 120) + "'";
  if (!j.is_object()) return "chunk is not a JSON object";
  if (auto e = error_text(j); !e.empty()) return "error chunk: " + e;
  std::string piece;
  if (api_ == Api::kSglang) {
    if (!j.contains("text") || !j["text"].is_string()) return "chunk has no string 'text'";
    piece = j["text"].get<std::string>();
    if (incremental_)
      acc_.text += piece;
    else
      acc_.text = piece;
    if (j.contains("meta_info") && j["meta_info"].is_object()) {
      const json& m = j["meta_info"];
      if (auto v = opt_int(m, "completion_tokens")) acc_.completion_tokens = v;
      if (auto v = opt_int(m, "prompt_tokens")) acc_.prompt_tokens = v;
      if (auto v = opt_int(m, "spec_verify_ct")) acc_.spec_verify_ct = v;
      if (m.contains("finish_reason") && !m["finish_reason"].is_null()) {
        if (auto a = abort_text(m["finish_reason"]); !a.empty()) return a;
        acc_.finish_reason = finish_text(m["finish_reason"]);
      }
    }
  } else {
    if (auto e = read_usage(j, acc_); !e.empty()) return e;
    if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
      const json& c = j["choices"][0];
      if (api_ == Api::kOpenAICompletions) {
        if (c.contains("text") && c["text"].is_string()) piece = c["text"].get<std::string>();
      } else if (c.contains("delta") && c["delta"].is_object()) {
        const size_t before = acc_.text.size() + acc_.reasoning.size();
        take_chat_text(c["delta"], acc_);
        piece.assign(acc_.text.size() + acc_.reasoning.size() - before, 'x');
      }
      if (api_ == Api::kOpenAICompletions) acc_.text += piece;
      if (c.contains("finish_reason") && !c["finish_reason"].is_null()) {
        if (auto a = abort_text(c["finish_reason"]); !a.empty()) return a;
        acc_.finish_reason = finish_text(c["finish_reason"]);
        if (c.contains("matched_stop") && c["matched_stop"].is_string())
          acc_.finish_reason += ":" + c["matched_stop"].get<std::string>();
      }
    }
  }
  if (!piece.empty()) {
    if (content_events_ == 0) first_content_s_ = ev.t;
    ++content_events_;
  }
  return "";
}

std::string StreamAccumulator::finish(Completion& out) const {
  if (api_ == Api::kSglang && !acc_.completion_tokens)
    return "stream carried no meta_info.completion_tokens";
  out = acc_;
  if (api_ == Api::kOpenAIChat && out.text.empty()) out.text = out.reasoning;
  return "";
}

bool AcceptInfo::any() const {
  for (const auto& v : per_rank)
    if (v) return true;
  return false;
}

std::string parse_server_info(std::string_view body, AcceptInfo& out) {
  out.per_rank.clear();
  out.incremental_streaming.reset();
  out.decode_servers = 0;
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "server info is not a JSON object";
  if (j.contains("decode") && j["decode"].is_array()) {  // the prefill/decode router
    if (j["decode"].empty() || !j["decode"][0].is_object())
      return "router server info has no decode server";
    out.decode_servers = j["decode"].size();
    json first = j["decode"][0];
    j = std::move(first);
  }
  if (j.contains("incremental_streaming_output") && j["incremental_streaming_output"].is_boolean())
    out.incremental_streaming = j["incremental_streaming_output"].get<bool>();
  if (!j.contains("internal_states") || !j["internal_states"].is_array())
    return "server info has no 'internal_states' list";
  for (const auto& s : j["internal_states"]) {
    // A rank reporting 0.0 (or less) ran no speculative forward step since the flush, as one
    // without the key: it is skipped, never averaged in as 0.
    if (s.is_object() && s.contains("avg_spec_accept_length") &&
        s["avg_spec_accept_length"].is_number() && s["avg_spec_accept_length"].get<double>() > 0)
      out.per_rank.push_back(s["avg_spec_accept_length"].get<double>());
    else
      out.per_rank.push_back(std::nullopt);
  }
  return "";
}

std::string normalize_base_url(const std::string& url) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    throw std::invalid_argument("--url '" + url + "' must start with http:// or https://");
  std::string u = url;
  while (!u.empty() && u.back() == '/') u.pop_back();
  if (u.size() <= 8) throw std::invalid_argument("--url '" + url + "' has no host");
  return u;
}

}  // namespace dsv4::eval
