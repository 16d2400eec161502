// Sub-command registry of dsv4-eval.
#include "commands/command.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "http/server_api.hpp"

namespace dsv4::eval {
namespace {
std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}
}  // namespace

CommandRegistrar::CommandRegistrar(const char* name, const char* summary, CommandFn fn) {
  registry().push_back({name, summary, fn});
}

const std::vector<Command>& commands() { return registry(); }

std::vector<std::string> expand_abbreviations(const cxxopts::Options& o, int argc, char** argv) {
  std::vector<std::string> names;
  for (const auto& g : o.groups())
    for (const auto& opt : o.group_help(g).options)
      for (const auto& l : opt.l) names.push_back(l);
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i > 0 && a.size() > 2 && a.rfind("--", 0) == 0) {
      const size_t eq = a.find('=');
      const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        std::vector<std::string> hits;
        for (const auto& n : names)
          if (n.rfind(name, 0) == 0) hits.push_back(n);
        if (hits.size() > 1) {
          std::string list;
          for (const auto& h : hits) list += (list.empty() ? "--" : ", --") + h;
          throw std::invalid_argument("option '--" + name + "' is ambiguous: " + list);
        }
        if (hits.size() == 1) a = "--" + hits[0] + (eq == std::string::npos ? "" : a.substr(eq));
      }
    }
    out.push_back(a);
  }
  return out;
}

std::string base_url_from(const cxxopts::ParseResult& r) {
  if (r.count("url") && (r.count("host") || r.count("port")))
    throw std::invalid_argument(std::string("--url and --") + (r.count("host") ? "host" : "port") +
                                " both name the server; give --url, or --host and --port");
  if (r.count("url") || (!r.count("host") && !r.count("port")))
    return normalize_base_url(r["url"].as<std::string>());
  std::string host = r["host"].as<std::string>();
  {  // SGLang's scripts join "{host}:{port}", so a port in --host makes a bad URL: refused
    const size_t scheme = host.find("://");
    std::string authority = host.substr(scheme == std::string::npos ? 0 : scheme + 3);
    authority = authority.substr(0, authority.find('/'));
    size_t colon = std::string::npos;
    if (!authority.empty() && authority[0] == '[') {  // [IPv6] or [IPv6]:port
      const size_t close = authority.find(']');
      if (close != std::string::npos && close + 1 < authority.size() && authority[close + 1] == ':')
        colon = close + 1;
    } else if (std::count(authority.begin(), authority.end(), ':') == 1) {  // not a bare IPv6
      colon = authority.find(':');
    }
    if (colon != std::string::npos)
      throw std::invalid_argument(
          "--host '" + host + "' holds a port (" + authority.substr(colon + 1) +
          "): give the host alone and --port " + authority.substr(colon + 1) + ", or --url " +
          (scheme == std::string::npos ? "http://" + host : host));
  }
  if (host.find("://") == std::string::npos) host = "http://" + host;
  while (!host.empty() && host.back() == '/') host.pop_back();
  const long long port = r["port"].as<long long>();
  if (port < 1 || port > 65535)
    throw std::invalid_argument("--port " + std::to_string(port) + " is not in 1..65535");
  return normalize_base_url(host + ":" + std::to_string(port));
}

namespace {

// cxxopts says "Argument 'abc' failed to parse": the flag that took it is named here.
std::string name_bad_value(const std::string& what, const std::vector<std::string>& args) {
  const std::string head = "Argument ", tail = " failed to parse";
  if (what.rfind(head, 0) != 0 || what.size() < head.size() + tail.size()) return what;
  std::string value = what.substr(head.size(), what.size() - head.size() - tail.size());
  for (const char* q : {"'", "\u2018"})  // cxxopts quotes with ' or with curly quotes
    if (value.rfind(q, 0) == 0) value.erase(0, std::string(q).size());
  for (const char* q : {"'", "\u2019"}) {
    const std::string qs(q);
    if (value.size() >= qs.size() && value.compare(value.size() - qs.size(), qs.size(), qs) == 0)
      value.resize(value.size() - qs.size());
  }
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) continue;
    const size_t eq = a.find('=');
    const bool joined = eq != std::string::npos && a.substr(eq + 1) == value;
    if (joined || (eq == std::string::npos && i + 1 < args.size() && args[i + 1] == value))
      return a.substr(0, joined ? eq : std::string::npos) + " '" + value +
             "': not a valid value for this flag (see --help for what it takes)";
  }
  return "'" + value + "' is not a valid value for the flag it follows (see --help)";
}

}  // namespace

std::optional<cxxopts::ParseResult> parse_options(cxxopts::Options& o, int argc, char** argv,
                                                  const char* epilogue) {
  std::vector<std::string> args = expand_abbreviations(o, argc, argv);
  std::vector<char*> ptrs;
  for (auto& a : args) ptrs.push_back(a.data());
  std::optional<cxxopts::ParseResult> parsed;
  try {
    parsed.emplace(o.parse(int(ptrs.size()), ptrs.data()));
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    throw std::invalid_argument(name_bad_value(e.what(), args));
  }
  auto& r = *parsed;
  if (r.count("help")) {
    std::printf("%s\n%s", o.help().c_str(), epilogue ? epilogue : "");
    return std::nullopt;
  }
  if (!r.unmatched().empty())
    throw std::invalid_argument("unexpected argument '" + r.unmatched()[0] + "'");
  return r;
}

const Command* find_command(const std::string& name) {
  for (const auto& c : registry())
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace dsv4::eval
