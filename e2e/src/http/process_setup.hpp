// Process-wide settings of the runner's HTTP use: the API key and the server it belongs to, the
// redaction of that key from everything the runner writes, and the open-file limit.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "http/http_client.hpp"

namespace dsv4::eval {

// The API key (SGLang's --api-key, OpenAI's OPENAI_API_KEY) and the server it was given for. It
// goes out as "Authorization: Bearer <key>" only on requests to that server's origin (scheme,
// host, port: the PD router's own origin when --url names the router), never to another host (a
// dataset download, a redirect elsewhere: redirects are never followed) and only when the request
// names no Authorization of its own. The key is registered for redaction (see redact()). An empty
// key clears it; an empty `server_url` sends it nowhere.
void set_api_key(std::string key, const std::string& server_url = "");
const std::string& api_key();
// --api-key when given, else $OPENAI_API_KEY, else "".
std::string api_key_from(const std::string& flag_value);
// "scheme://host:port" of a URL (scheme and host lowercased, the scheme's default port filled in,
// user info dropped); "" when the URL has no scheme or host.
std::string url_origin(const std::string& url);
// Whether a request to `url` carries the key: a key is set and `url` has the key's origin.
bool api_key_goes_to(const std::string& url);
// "" unless `r` is a refusal of the key (HTTP 401 or 403): then a message naming the key's
// source, for the "could not run" exit (never retried).
std::string api_key_refusal(const HttpResult& r);

// Redaction: every registered secret (the API key, and any key found on the command line or in
// $OPENAI_API_KEY by register_secrets_from_args) is replaced by "***". Applied to recorded command
// lines, log lines, error messages and every report and JSONL file the runner writes.
void register_secret(const std::string& secret);
std::string redact(std::string text);
nlohmann::json redact_json(nlohmann::json j);  // every string value and key, recursively
// Registers the value of --api-key (also --api-key=V and argparse-style prefixes such as --api-k)
// in argv and $OPENAI_API_KEY, before the options are parsed, so that even a usage error prints
// no key.
void register_secrets_from_args(int argc, char** argv);
// "dsv4-eval <argv...>" with the value of --api-key (in any spelling above) written as ***, and
// arguments holding spaces or shell characters quoted: the command line reports record.
std::string recorded_command_line(int argc, char** argv);

// Raises the soft limit on open files to the hard limit (as bench_serving's set_ulimit) and
// returns the soft limit now in force.
size_t raise_open_file_limit();
// "" when `in_flight` connections fit the open-file limit (with room for the process's other
// files), else the error naming `flag`, the limit and the way out.
std::string check_open_file_limit(size_t in_flight, const std::string& flag);

}  // namespace dsv4::eval
