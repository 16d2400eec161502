// Process-wide settings of the runner's HTTP use: the API key and its origin, redaction of secrets,
// and the open-file limit its connections need.
#include "http/process_setup.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace dsv4::eval {

namespace {
struct KeyState {
  std::string key, origin;
  std::vector<std::string> secrets;  // longest first, so a key holding another is cut whole
  std::mutex mu;
};
KeyState& state() {
  static KeyState s;
  return s;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// --api-key's spellings: the full name or an argparse prefix of it that no other option of the
// runner's commands shares ("--api" alone is --api, the API kind).
bool is_key_flag(const std::string& name) {
  static const std::string full = "api-key";
  return name.size() >= 4 && full.rfind(name, 0) == 0;
}
}  // namespace

void register_secret(const std::string& secret) {
  if (secret.empty()) return;
  KeyState& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  if (std::find(s.secrets.begin(), s.secrets.end(), secret) != s.secrets.end()) return;
  s.secrets.push_back(secret);
  std::sort(s.secrets.begin(), s.secrets.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

std::string redact(std::string text) {
  KeyState& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  for (const auto& secret : s.secrets) {
    for (size_t p = text.find(secret); p != std::string::npos; p = text.find(secret, p + 3))
      text.replace(p, secret.size(), "***");
  }
  return text;
}

nlohmann::json redact_json(nlohmann::json j) {
  if (j.is_string()) return redact(j.get<std::string>());
  if (j.is_array()) {
    for (auto& v : j) v = redact_json(std::move(v));
    return j;
  }
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto& [k, v] : j.items()) out[redact(k)] = redact_json(v);
    return out;
  }
  return j;
}

std::string url_origin(const std::string& url) {
  const size_t colon = url.find("://");
  if (colon == std::string::npos || colon == 0) return "";
  const std::string scheme = lower(url.substr(0, colon));
  const size_t start = colon + 3;
  const size_t end = std::min(url.find_first_of("/?#", start), url.size());
  std::string authority = url.substr(start, end - start);
  if (const size_t at = authority.rfind('@'); at != std::string::npos)
    authority = authority.substr(at + 1);
  std::string host = authority, port;
  if (!authority.empty() && authority[0] == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string::npos) return "";
    host = authority.substr(0, close + 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':')
      port = authority.substr(close + 2);
  } else if (const size_t c = authority.rfind(':'); c != std::string::npos) {
    host = authority.substr(0, c);
    port = authority.substr(c + 1);
  }
  if (host.empty()) return "";
  if (port.empty()) port = scheme == "https" ? "443" : scheme == "http" ? "80" : "";
  while (port.size() > 1 && port[0] == '0') port.erase(0, 1);
  return scheme + "://" + lower(host) + ":" + port;
}

void set_api_key(std::string key, const std::string& server_url) {
  register_secret(key);
  KeyState& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  s.origin = key.empty() ? "" : url_origin(server_url);
  s.key = std::move(key);
}

const std::string& api_key() { return state().key; }

bool api_key_goes_to(const std::string& url) {
  KeyState& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  return !s.key.empty() && !s.origin.empty() && url_origin(url) == s.origin;
}

std::string api_key_from(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  const char* env = std::getenv("OPENAI_API_KEY");
  return env ? env : "";
}

void register_secrets_from_args(int argc, char** argv) {
  if (const char* env = std::getenv("OPENAI_API_KEY"); env && *env) register_secret(env);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0) continue;
    const size_t eq = a.find('=');
    if (!is_key_flag(a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2))) continue;
    if (eq != std::string::npos)
      register_secret(a.substr(eq + 1));
    else if (i + 1 < argc)
      register_secret(argv[i + 1]);
  }
}

std::string recorded_command_line(int argc, char** argv) {
  std::string s = "dsv4-eval";
  bool hide_next = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (hide_next) {
      a = "***";
      hide_next = false;
    } else if (i > 0 && a.rfind("--", 0) == 0) {
      const size_t eq = a.find('=');
      if (is_key_flag(a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2))) {
        if (eq == std::string::npos)
          hide_next = true;
        else
          a = a.substr(0, eq + 1) + "***";
      }
    }
    a = redact(a);
    const bool quote = a.empty() || a.find_first_of(" '\"<>|&;$\\`") != std::string::npos;
    s += " " + (quote ? "'" + a + "'" : a);
  }
  return s;
}

std::string api_key_refusal(const HttpResult& r) {
  if (r.status != 401 && r.status != 403) return "";
  return redact("the server refused the request with HTTP " + std::to_string(r.status) + " (" +
                r.error_message + "): " +
                (api_key().empty() ? "it needs an API key: pass --api-key or set OPENAI_API_KEY"
                                   : "the API key (from --api-key or OPENAI_API_KEY) is wrong"));
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
