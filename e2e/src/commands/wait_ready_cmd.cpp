// `dsv4-eval wait-ready`: polls /health_generate (SGLang) or /v1/models until the server answers.
#include <unistd.h>

#include <cxxopts.hpp>

#include <cmath>
#include <cstdio>

#include "commands/command.hpp"
#include "http/http_client.hpp"
#include "http/process_setup.hpp"
#include "http/server_api.hpp"

namespace dsv4::eval {
namespace {

int wait_ready_main(int argc, char** argv) {
  cxxopts::Options o("dsv4-eval wait-ready",
                     "Waits until a server answers its readiness endpoint with 200.\n"
                     "Exit: 0 ready, 2 bad usage, 3 not ready within --timeout or the API key "
                     "refused (401/403, at once).");
  // clang-format off
  o.add_options()
    ("url", "server base URL", cxxopts::value<std::string>()->default_value("http://127.0.0.1:30000"))
    ("api", "sglang (GET /health_generate) | openai-completions | openai-chat (GET /v1/models)", cxxopts::value<std::string>()->default_value("sglang"))
    ("path", "poll this path instead", cxxopts::value<std::string>())
    ("api-key", "bearer token for the server's requests, sent to its origin only (default: $OPENAI_API_KEY)", cxxopts::value<std::string>())
    ("timeout", "seconds to wait in all", cxxopts::value<double>()->default_value("3000"))
    ("interval", "seconds between polls", cxxopts::value<double>()->default_value("2"))
    ("request-timeout", "seconds one poll may take", cxxopts::value<double>()->default_value("60"))
    ("quiet", "no progress lines")
    ("h,help", "print this help");
  // clang-format on
  std::string url, path;
  double timeout = 0, interval = 0, request_timeout = 0;
  bool quiet = false;
  register_secrets_from_args(argc, argv);
  try {
    const auto parsed = parse_options(o, argc, argv);
    if (!parsed) return kExitPass;
    const auto& r = *parsed;
    url = normalize_base_url(r["url"].as<std::string>());
    set_api_key(api_key_from(r.count("api-key") ? r["api-key"].as<std::string>() : ""), url);
    const auto api = parse_api(r["api"].as<std::string>());
    if (!api)
      throw std::invalid_argument("--api '" + r["api"].as<std::string>() +
                                  "' is not one of sglang, openai-completions, openai-chat");
    path = r.count("path") ? r["path"].as<std::string>() : readiness_path(*api);
    if (path.empty() || path[0] != '/')
      throw std::invalid_argument("--path '" + path + "' must start with '/'");
    timeout = r["timeout"].as<double>();
    interval = r["interval"].as<double>();
    request_timeout = r["request-timeout"].as<double>();
    if (!(timeout > 0)) throw std::invalid_argument("--timeout must be > 0");
    if (!(interval >= 0)) throw std::invalid_argument("--interval must be >= 0");
    if (!(request_timeout > 0)) throw std::invalid_argument("--request-timeout must be > 0");
    quiet = r.count("quiet") > 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsv4-eval wait-ready: %s\n", redact(e.what()).c_str());
    return kExitUsage;
  }
  const double t0 = monotonic_seconds();
  const double deadline = t0 + timeout;
  double last_note = t0;
  std::string last;
  for (int poll = 1;; ++poll) {
    HttpRequest r;
    r.method = "GET";
    r.url = url + path;
    r.max_attempts = 1;
    r.timeout_s = std::max(0.1, std::min(request_timeout, deadline - monotonic_seconds()));
    r.connect_timeout_s = std::min(10.0, r.timeout_s);
    HttpResult res = http_fetch(std::move(r));
    const double now = monotonic_seconds();
    if (res.ok()) {
      std::fprintf(stderr, "dsv4-eval wait-ready: %s%s ready after %.1f s (%d polls)\n",
                   url.c_str(), path.c_str(), now - t0, poll);
      return kExitPass;
    }
    // A refused key does not become right by waiting (SGLang checks it on every endpoint but
    // /health*): "could not run" at once, naming the key.
    if (auto refusal = api_key_refusal(res); !refusal.empty()) {
      std::fprintf(stderr, "dsv4-eval wait-ready: %s%s: %s\n", url.c_str(), path.c_str(),
                   refusal.c_str());
      return kExitCouldNotRun;
    }
    last = res.error_message;
    if (!quiet && now - last_note >= 30) {
      std::fprintf(stderr, "dsv4-eval wait-ready: not ready after %.0f s: %s\n", now - t0,
                   last.c_str());
      last_note = now;
    }
    if (now + interval >= deadline) break;
    ::usleep(useconds_t(interval * 1e6));
  }
  std::fprintf(stderr, "dsv4-eval wait-ready: %s%s not ready within %.1f s; last: %s\n",
               url.c_str(), path.c_str(), timeout, last.c_str());
  return kExitCouldNotRun;
}

}  // namespace
}  // namespace dsv4::eval

DSV4_EVAL_COMMAND("wait-ready", "wait until the server answers /health_generate or /v1/models",
                  dsv4::eval::wait_ready_main);
