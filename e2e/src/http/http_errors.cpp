// The names and the retry policy of HttpClient's error kinds.
#include "http/http_client.hpp"

namespace dsv4::eval {

const char* to_string(HttpErrorKind kind) {
  switch (kind) {
    case HttpErrorKind::kNone:
      return "ok";
    case HttpErrorKind::kConnect:
      return "connect";
    case HttpErrorKind::kTimeout:
      return "timeout";
    case HttpErrorKind::kTransport:
      return "transport";
    case HttpErrorKind::kHttp5xx:
      return "http_5xx";
    case HttpErrorKind::kHttp429:
      return "http_429";
    case HttpErrorKind::kHttp4xx:
      return "http_4xx";
    case HttpErrorKind::kInvalid:
      return "invalid_response";
    case HttpErrorKind::kRequest:
      return "bad_request";
    case HttpErrorKind::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

bool is_retryable(HttpErrorKind kind) {
  switch (kind) {
    case HttpErrorKind::kConnect:
    case HttpErrorKind::kTimeout:
    case HttpErrorKind::kTransport:
    case HttpErrorKind::kHttp5xx:
    case HttpErrorKind::kHttp429:
    case HttpErrorKind::kInvalid:
      return true;
    default:
      return false;
  }
}

std::string attempt_cause(const HttpResult& r) {
  switch (r.error) {
    case HttpErrorKind::kHttp5xx:
    case HttpErrorKind::kHttp429:
    case HttpErrorKind::kHttp4xx:
      return "HTTP " + std::to_string(r.status);
    case HttpErrorKind::kInvalid:
      return r.error_message.find("aborted the request") != std::string::npos ? "HTTP-200 abort"
                                                                              : "invalid response";
    case HttpErrorKind::kRequest:
      return "bad request";
    default:
      return to_string(r.error);
  }
}

}  // namespace dsv4::eval
