// Process-wide settings of the runner's HTTP use: the API key and the open-file limit.
#pragma once

#include <cstddef>
#include <string>

#include "http/http_client.hpp"

namespace dsv4::eval {

// The API key sent as "Authorization: Bearer <key>" on every request of this process (SGLang's
// --api-key, OpenAI's OPENAI_API_KEY) unless the request names its own Authorization; empty: none.
void set_api_key(std::string key);
const std::string& api_key();
// --api-key when given, else $OPENAI_API_KEY, else "".
std::string api_key_from(const std::string& flag_value);
// "" unless `r` is a refusal of the key (HTTP 401 or 403): then a message naming the key's
// source, for the "could not run" exit (never retried).
std::string api_key_refusal(const HttpResult& r);

// Raises the soft limit on open files to the hard limit (as bench_serving's set_ulimit) and
// returns the soft limit now in force.
size_t raise_open_file_limit();
// "" when `in_flight` connections fit the open-file limit (with room for the process's other
// files), else the error naming `flag`, the limit and the way out.
std::string check_open_file_limit(size_t in_flight, const std::string& flag);

}  // namespace dsv4::eval
