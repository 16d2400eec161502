// Sub-command registry of dsv4-eval.
#include "commands/command.hpp"

#include <cstdio>
#include <stdexcept>

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

std::optional<cxxopts::ParseResult> parse_options(cxxopts::Options& o, int argc, char** argv,
                                                  const char* epilogue) {
  auto r = o.parse(argc, argv);
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
