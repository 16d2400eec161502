// Sub-command registry of dsv4-eval.
#include "command.hpp"

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

const Command* find_command(const std::string& name) {
  for (const auto& c : registry())
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace dsv4::eval
