// The nightly suite registry (nightly/suites.json): data model and a validating loader with named
// errors.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace dsv4::nightly {

// A registry problem: `path` is the JSON field (e.g. "suites[2].server.port"), `value` its JSON
// text.
class RegistryError : public std::runtime_error {
 public:
  RegistryError(std::string file, std::string path, std::string problem, std::string value);
  const std::string& path() const { return path_; }
  const std::string& value() const { return value_; }

 private:
  std::string path_;
  std::string value_;
};

struct Container {
  std::string image;    // empty: the job runs on the runner itself
  std::string options;  // docker options (devices, shared memory, volumes)
};

struct Build {
  std::string preset;                // configure and build preset, e.g. "hip", "cpu"
  std::vector<std::string> targets;  // empty: everything
};

// e2e: the server under test. Placeholders: {host}, {port}, {port_file}, {out}.
struct Server {
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  int port = 0;  // 0: run-suite picks a free port, or reads {port_file} when the command has it
  int ready_timeout_s = 1800;
  int stop_grace_s = 30;
};

// e2e: the runner that measures the server and applies the gates. Placeholders: {url}, {out}.
struct Runner {
  std::vector<std::string> command;
  std::vector<std::string> gates;  // each passed as --gate 'metric op value'
  int timeout_s = 3600;
};

// kernels: which tests run and how the summary table is laid out.
struct Ctest {
  std::string test_preset;            // ctest --preset NAME (run from the source directory), or
  std::string test_dir;               // ctest --test-dir DIR (relative to the source directory)
  std::string label;                  // -L LABEL
  int parallel = 1;                   // -j N
  int slots_per_gpu = 1;              // resource spec: tests that may share one GPU
  int timeout_s = 3600;               // the whole ctest run
  std::vector<std::string> families;  // table rows
  std::vector<std::pair<std::string, std::string>> checks;  // table columns: name -> regex
};

enum class Kind { kKernels, kE2e };

struct Suite {
  std::string name;
  Kind kind = Kind::kKernels;
  std::string description;
  std::string runs_on;
  int timeout_minutes = 60;
  Container container;
  std::map<std::string, std::string> env;
  Build build;
  Server server;  // e2e only
  Runner run;     // e2e only
  Ctest ctest;    // kernels only
};

struct NightlyWorkflow {
  std::string name = "nightly";
  std::string cron;
  std::string artifact_dir = "out/nightly";
  int retention_days = 14;
  std::string report_runs_on = "ubuntu-latest";
};

struct PrWorkflow {
  std::string name = "pr";
  std::string runs_on = "ubuntu-latest";
  std::string image;  // container image, e.g. debian:12
  int timeout_minutes = 40;
  std::string deps_command;  // installs the Debian packages (node and npm among them)
  std::string test_command;  // the README test command: cpu preset tests and the compile checks
  std::string junit;         // uploaded as an artifact when present
};

struct Registry {
  std::string file;  // where it was loaded from, for messages
  NightlyWorkflow nightly;
  PrWorkflow pr;
  std::vector<Suite> suites;

  const Suite* find(const std::string& name) const;
};

const char* kind_name(Kind k);

// Parses and validates; throws RegistryError naming the field and value of the first problem.
Registry parse_registry(const nlohmann::json& doc, const std::string& file);
Registry load_registry(const std::string& path);

// Replaces {name} placeholders from `vars`; throws std::invalid_argument on an unknown one.
std::string substitute(const std::string& text, const std::map<std::string, std::string>& vars);

}  // namespace dsv4::nightly
