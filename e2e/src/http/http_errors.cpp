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

}  // namespace dsv4::eval
