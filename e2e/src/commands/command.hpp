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
// Long options may be abbreviated to any unambiguous prefix, as Python's argparse allows (SGLang's
// scripts are argparse programs: `--random-input` is --random-input-len, `--num-prompt`
// --num-prompts); an ambiguous prefix throws std::invalid_argument naming the candidates.
std::optional<cxxopts::ParseResult> parse_options(cxxopts::Options& o, int argc, char** argv,
                                                  const char* epilogue = nullptr);
const Command* find_command(const std::string& name);

// argv with abbreviated long options written out (see parse_options).
std::vector<std::string> expand_abbreviations(const cxxopts::Options& o, int argc, char** argv);

// The server's base URL from --url, else from --host/--port as SGLang's scripts take them
// (bench_sglang: --host http://127.0.0.1; bench_serving: --host 127.0.0.1; a host without a
// scheme gets http://). Throws std::invalid_argument for a bad value, and for --url given together
// with --host or --port (both name the server).
std::string base_url_from(const cxxopts::ParseResult& r);

}  // namespace dsv4::eval

#define DSV4_EVAL_COMMAND(name, summary, fn) \
  static const ::dsv4::eval::CommandRegistrar dsv4_eval_command_registrar_ { name, summary, fn }
