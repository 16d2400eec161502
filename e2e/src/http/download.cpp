// Cached, checksum-verified downloads.
#include "http/download.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/files.hpp"
#include "http/http_client.hpp"
#include "http/sha256.hpp"

namespace dsv4::eval {

namespace fs = std::filesystem;

std::string default_cache_dir() {
  if (const char* d = std::getenv("DSV4_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/dsv4-eval";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/dsv4-eval";
  return ".dsv4-cache";
}

std::string fetch_cached(const std::string& url, const std::string& sha256,
                         const std::string& cache_dir, double timeout_s) {
  std::string name = url.substr(url.find_last_of('/') + 1);
  const size_t q = name.find_first_of("?#");
  if (q != std::string::npos) name.resize(q);
  if (name.empty()) name = "download";
  const size_t dot = name.find_last_of('.');
  const std::string stem = dot == std::string::npos ? name : name.substr(0, dot);
  const std::string ext = dot == std::string::npos ? "" : name.substr(dot);
  const std::string tag = sha256.empty() ? sha256_hex(url).substr(0, 12) : sha256.substr(0, 12);
  const fs::path target = fs::path(cache_dir) / (stem + "-" + tag + ext);

  std::error_code ec;
  if (fs::exists(target, ec)) {
    if (sha256.empty() || sha256_file(target.string()) == sha256) return target.string();
    fs::remove(target, ec);  // corrupt cache entry: fetch again
  }
  fs::create_directories(cache_dir, ec);
  if (ec) throw DownloadError("cannot create cache directory '" + cache_dir + "': " + ec.message());

  HttpRequest r;
  r.method = "GET";
  r.url = url;
  r.timeout_s = timeout_s;
  r.max_attempts = 4;
  r.backoff_s = 1;
  HttpResult res = http_fetch(std::move(r), "GET " + url);
  if (!res.ok()) throw DownloadError("cannot download " + url + ": " + res.error_message);
  const std::string got = sha256_hex(res.body);
  if (!sha256.empty() && got != sha256)
    throw ChecksumError("sha256 of " + url + " (" + std::to_string(res.body.size()) +
                        " bytes) is " + got + ", expected " + sha256);
  std::string err;
  if (!write_file_atomic(target, res.body, &err)) throw DownloadError(err);
  return target.string();
}

}  // namespace dsv4::eval
