// Process-wide settings of the runner's HTTP use: the API key every request carries, and the
// open-file limit its connections need.
#include "http/process_setup.hpp"

#include <sys/resource.h>

#include <cstdlib>
#include <string>
#include <utility>

namespace dsv4::eval {

namespace {
std::string& key_slot() {
  static std::string key;
  return key;
}
}  // namespace

void set_api_key(std::string key) { key_slot() = std::move(key); }
const std::string& api_key() { return key_slot(); }

std::string api_key_from(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  const char* env = std::getenv("OPENAI_API_KEY");
  return env ? env : "";
}

std::string api_key_refusal(const HttpResult& r) {
  if (r.status != 401 && r.status != 403) return "";
  return "the server refused the request with HTTP " + std::to_string(r.status) + " (" +
         r.error_message + "): " +
         (api_key().empty() ? "it needs an API key: pass --api-key or set OPENAI_API_KEY"
                            : "the API key (from --api-key or OPENAI_API_KEY) is wrong");
}

size_t raise_open_file_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    rlimit want = rl;
    want.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
  }
  return rl.rlim_cur == RLIM_INFINITY ? size_t(-1) : size_t(rl.rlim_cur);
}

std::string check_open_file_limit(size_t in_flight, const std::string& flag) {
  const size_t limit = raise_open_file_limit();
  const size_t reserve = 64;  // stdio, logs, the epoll fd, curl's internals
  if (limit >= in_flight + reserve) return "";
  return flag + " " + std::to_string(in_flight) + " needs " + std::to_string(in_flight + reserve) +
         " open files, but the limit is " + std::to_string(limit) +
         " even after raising the soft limit to the hard one: lower " + flag +
         " or raise the hard limit (ulimit -Hn)";
}

}  // namespace dsv4::eval
