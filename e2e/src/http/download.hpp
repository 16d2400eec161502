// Cached, checksum-verified download of a data file (the GSM8K test set) through libcurl.
#pragma once

#include <stdexcept>
#include <string>

namespace dsv4::eval {

// The download could not be made (network, HTTP status, disk): the run could not start.
struct DownloadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The bytes are not the expected ones (sha256 mismatch): bad data.
struct ChecksumError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Default cache directory: $DSV4_CACHE_DIR, else $XDG_CACHE_HOME/dsv4-eval, else
// $HOME/.cache/dsv4-eval, else ./.dsv4-cache.
std::string default_cache_dir();

// Returns the path of `url`'s content in `cache_dir` (file name: <name>-<sha256[0:12]>.<ext>).
// A cached file is used when its sha256 matches; otherwise the URL is fetched (timeout_s, with
// retries on connection errors and 5xx), checked, and moved into place atomically. An empty
// `sha256` skips the check (the file is still cached).
std::string fetch_cached(const std::string& url, const std::string& sha256,
                         const std::string& cache_dir, double timeout_s = 120);

}  // namespace dsv4::eval
