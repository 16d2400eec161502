// Sub-command registry of dsv4-eval: each command file registers itself with DSV4_EVAL_COMMAND.
#pragma once

#include <cxxopts.hpp>

#include <optional>
#include <string>
#include <vector>

#include "common/exit_codes.hpp"

namespace dsv4::eval {

// argv[0] is the sub-command's name; returns one of Exit.
using CommandFn = int (*)(int argc, char** argv);

struct Command {
  std::string name;
  std::string summary;
  CommandFn run;
};

struct CommandRegistrar {
  CommandRegistrar(const char* name, const char* summary, CommandFn fn);
};

const std::vector<Command>& commands();

// Parses a sub-command's options. Returns nullopt once --help was asked and printed (followed by
// `epilogue` when given); throws std::invalid_argument naming a stray positional argument.
std::optional<cxxopts::ParseResult> parse_options(cxxopts::Options& o, int argc, char** argv,
                                                  const char* epilogue = nullptr);
const Command* find_command(const std::string& name);

}  // namespace dsv4::eval

#define DSV4_EVAL_COMMAND(name, summary, fn) \
  static const ::dsv4::eval::CommandRegistrar dsv4_eval_command_registrar_ { name, summary, fn }
