// dsv4-eval entry point: dispatches to the registered sub-commands.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands/command.hpp"

int main(int argc, char** argv) {
  using namespace dsv4::eval;
  auto usage = [] {
    std::fprintf(stderr, "usage: dsv4-eval <command> [options]\n\ncommands:\n");
    for (const auto& c : commands())
      std::fprintf(stderr, "  %-14s %s\n", c.name.c_str(), c.summary.c_str());
    std::fprintf(stderr, "\n'dsv4-eval <command> --help' describes a command's options.\n");
  };
  if (argc < 2) {
    usage();
    return kExitUsage;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    usage();
    return kExitPass;
  }
  const Command* c = find_command(name);
  if (!c) {
    std::fprintf(stderr, "dsv4-eval: unknown command '%s'\n", name.c_str());
    usage();
    return kExitUsage;
  }
  return c->run(argc - 1, argv + 1);
}
