// Asynchronous HTTP/1.1 client over libcurl's multi interface: one thread drives many transfers.
//
// The loop is event-driven (curl's socket API on epoll), so a wake-up costs O(ready sockets);
// connections are kept alive and reused.
//
// Usage (every callback runs on the thread that calls run(); the client is not thread-safe):
//
//   HttpClient client({.max_in_flight = 512});
//   HttpRequest r;
//   r.url = "http://127.0.0.1:30000/generate";
//   r.body = R"({"text":"1+1=","sampling_params":{"max_new_tokens":8}})";
//   r.timeout_s = 600;                   // per attempt
//   r.on_done = [](HttpResult& res) {    // called once per request, after the last attempt
//     if (res.ok()) use(res.body); else log(res.error_message);
//   };
//   client.submit(std::move(r));         // queued; at most max_in_flight run at once
//   client.run();                        // returns when nothing is queued, delayed or running
//
// Retries: connection errors, timeouts, broken transfers, 5xx, 429 and validation failures are
// retried up to max_attempts with exponential backoff (backoff_s * 2^(attempt-1), capped at
// backoff_max_s, +-jitter; a 429's Retry-After is honoured up to backoff_max_s). Other 4xx and
// request errors (bad URL) fail at once.
//
// Streaming (sse = true): the body is read as Server-Sent Events; every `data:` payload is handed
// to on_event as it arrives, with its arrival time. A new attempt restarts the stream: events carry
// their attempt number so a consumer can reset what it accumulated (see SseEvent). A 2xx stream
// that ends without `data: [DONE]` is a broken transfer (retried) unless require_done is false.
// A non-2xx answer to a streaming request is read as a plain body.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.hpp"

namespace dsv4::eval {

// Why a request did not succeed; kNone when it did.
enum class HttpErrorKind {
  kNone,
  kConnect,    // could not connect (refused, unreachable, resolve failure)
  kTimeout,    // the attempt ran past timeout_s, connect_timeout_s or idle_timeout_s
  kTransport,  // the connection broke: reset, nothing received, truncated body or stream
  kHttp5xx,    // the server answered 5xx
  kHttp429,    // the server answered 429 Too Many Requests
  kHttp4xx,    // another 4xx (or an unexpected 1xx/3xx): not retried
  kInvalid,    // a 2xx whose body (or event) the request's validator rejected
  kRequest,    // the request itself is unusable (malformed URL, unsupported scheme): not retried
  kCancelled,  // cancelled by cancel() / cancel_all()
};
const char* to_string(HttpErrorKind kind);
bool is_retryable(HttpErrorKind kind);
struct HttpResult;
// A failed attempt's cause in a word or two, for counts in reports: "HTTP 503" (any status the
// server answered), "HTTP-200 abort" (SGLang's finish_reason abort), "connect", "timeout",
// "transport", "invalid response", "bad request", "cancelled".
std::string attempt_cause(const HttpResult& attempt);

// Monotonic clock in seconds (steady_clock); every time in this header is on this clock.

// One Server-Sent Event `data:` payload (the text after "data:" and one optional space; several
// data lines of one event are joined by '\n'). "[DONE]" is delivered like any payload.
struct SseEvent {
  std::string data;
  double t = 0;     // arrival time (monotonic_seconds)
  int attempt = 1;  // 1-based attempt this event belongs to
};

struct HttpResult {
  uint64_t id = 0;   // the id submit() returned
  long status = 0;   // HTTP status of the last attempt (0 when none was received)
  std::string body;  // body of the last attempt (for sse requests: only when the status is not 2xx)
  HttpErrorKind error = HttpErrorKind::kNone;
  std::string error_message;   // empty on success; otherwise names the URL, attempt and cause
  int attempts = 0;            // attempts made (1 = no retry)
  bool saw_done = false;       // sse: `data: [DONE]` was received on the last attempt
  size_t events = 0;           // sse: events received on the last attempt
  double submit_s = 0;         // when submit() was called
  double start_s = 0;          // when the first attempt started
  double attempt_start_s = 0;  // when the last attempt started
  double first_byte_s = 0;     // first body byte of the last attempt (0 if none)
  double end_s = 0;            // when the request finished (success or final failure)
  std::vector<std::string> attempt_errors;  // one line per failed attempt, in order
  std::vector<std::string> attempt_causes;  // the same attempts' causes (attempt_cause)
  bool ok() const { return error == HttpErrorKind::kNone; }
};

struct HttpRequest {
  std::string method = "POST";  // "GET" or "POST" (a POST without body sends an empty body)
  std::string url;
  std::string body;
  // Extra header lines ("Name: value"). POST bodies get "Content-Type: application/json" unless
  // a Content-Type is given here; "Expect: 100-continue" is always disabled.
  std::vector<std::string> headers;
  double timeout_s = 600;  // whole attempt, connect included; <= 0: no limit
  double connect_timeout_s = 10;
  double idle_timeout_s = 0;  // abort an attempt receiving nothing for this long; 0: off
  int max_attempts = 4;       // 1 + retries
  double backoff_s = 0.5;     // delay before the 2nd attempt; doubles each retry
  double backoff_max_s = 8;
  bool sse = false;
  bool require_done = true;  // sse: a 2xx stream must end with `data: [DONE]`
  // sse: each event as it arrives; return "" to go on, or a message to fail the attempt as
  // kInvalid (retried), e.g. for an `{"error": ...}` chunk.
  std::function<std::string(const SseEvent&)> on_event;
  // After a 2xx attempt: return "" to accept, or a message to fail the attempt as kInvalid
  // (retried). For sse requests it runs after the stream ended.
  std::function<std::string(const HttpResult&)> validate;
  // Called exactly once with the final result (success, final failure or cancellation).
  std::function<void(HttpResult&)> on_done;
};

struct HttpClientOptions {
  int max_in_flight = 64;  // transfers running at once; more are queued in submit order
  double jitter = 0.1;     // backoff delays are scaled by a factor in [1-jitter, 1+jitter]
  uint64_t seed = 1;       // for the jitter
  bool verbose = false;    // libcurl's own trace on stderr
};

struct HttpCounters {
  uint64_t submitted = 0;
  uint64_t attempts = 0;
  uint64_t retries = 0;
  uint64_t succeeded = 0;
  uint64_t failed = 0;  // final failures, cancellations included
};

class HttpClient {
 public:
  explicit HttpClient(HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Queues a request and returns its id. May be called from inside any callback.
  uint64_t submit(HttpRequest request);

  // Drives every transfer until nothing is queued, waiting for a retry or running. on_tick (if
  // set) runs about every tick_s seconds and once more at the end; it may submit or cancel.
  void run(const std::function<void()>& on_tick = {}, double tick_s = 0.25);

  // Drives transfers for at most `seconds`; returns true when the client is idle.
  bool run_for(double seconds);

  // Finishes a queued, delayed or running request with kCancelled (its on_done runs inside the
  // next run()/run_for() step). Unknown or finished ids are ignored.
  void cancel(uint64_t id);
  void cancel_all();
  // Cancels what is queued or waiting to retry; transfers on the wire go on (a run that stops
  // lets them finish).
  void cancel_queued();

  size_t running() const;  // transfers on the wire
  size_t pending() const;  // queued or waiting to retry
  bool idle() const { return running() == 0 && pending() == 0; }
  HttpCounters counters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Blocking single request (its own client); for one-off calls such as /flush_cache or downloads.
// A SIGINT/SIGTERM that StopSignals (stop_signals.hpp) records while it waits cancels it
// (kCancelled, the message naming the signal); one recorded before it started does not (a run
// that stops still reads the server's counters). With `waiting_for` set ("POST
// http://.../flush_cache"), a request still unanswered after 5 s prints one line on stderr saying
// what it waits for, then one every 15 s.
HttpResult http_fetch(HttpRequest request, const std::string& waiting_for = "");

}  // namespace dsv4::eval
