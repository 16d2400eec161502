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
  if (host.find("://") == std::string::npos) host = "http://" + host;
  while (!host.empty() && host.back() == '/') host.pop_back();
  const long long port = r["port"].as<long long>();
  if (port < 1 || port > 65535)
    throw std::invalid_argument("--port " + std::to_string(port) + " is not in 1..65535");
  return normalize_base_url(host + ":" + std::to_string(port));
}

std::optional<cxxopts::ParseResult> parse_options(cxxopts::Options& o, int argc, char** argv,
                                                  const char* epilogue) {
  std::vector<std::string> args = expand_abbreviations(o, argc, argv);
  std::vector<char*> ptrs;
  for (auto& a : args) ptrs.push_back(a.data());
  auto r = o.parse(int(ptrs.size()), ptrs.data());
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
