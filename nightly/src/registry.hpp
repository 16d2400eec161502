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

// The job's container, started by a step (ci/gpu-container.sh) with only the pod's GPUs.
struct Container {
  std::string image;       // may hold {date} and {sglang_tag} (resolved at start)
  std::string not_before;  // YYYYMMDD: no {date} image older than this (the code under test)
  int days = 7;            // {date}: the newest of the last `days` days that has an image
  std::string options;     // extra docker run options (shared memory, ...)
};

// A step run in the job's container after the suite (kernels): `{artifacts}` is the suite's
// absolute artifact folder, `{build}` its build folder.
struct ExtraStep {
  std::string name;
  std::string run;
};

struct Build {
  std::string preset;                // configure and build preset, e.g. "hip", "cpu"
  std::vector<std::string> targets;  // empty: everything
  bool ship = false;  // built once per run by the job build_job_of(preset), shipped to the suite
};

// The job that builds a shipped preset once per run for every suite that ships it.
inline std::string build_job_of(const std::string& preset) { return "build-" + preset; }

// e2e: the server under test. Placeholders: {host}, {port}, {port_file}, {out}, {model}.
struct Server {
  std::string model;  // Hugging Face id; offline mode when the HF cache holds its snapshot
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  int port = 0;  // 0: run-suite picks a free port, or reads {port_file} when the command has it
  int ready_timeout_s = 1800;
  int stop_grace_s = 30;
  bool allow_download = false;  // false: a model missing from the HF cache is could-not-run
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
  bool sglang_source = false;         // the tests import the night's SGLang checkout
                                      // (DSV4_SGLANG_SRC), not the image's
  std::vector<std::string> families;  // table rows
  std::vector<std::pair<std::string, std::string>> checks;  // table columns: name -> regex
};

enum class Kind { kKernels, kE2e };
enum class Schedule { kNightly, kWeekly };

struct Suite {
  std::string name;
  std::string job;  // the workflow job that runs it (default: its name); e2e suites of one job
                    // share its setup and run as consecutive steps
  Kind kind = Kind::kKernels;
  Schedule schedule = Schedule::kNightly;
  std::string description;
  std::string runner;   // a class of nightly.runners
  std::string runs_on;  // that class's runner label
  int timeout_minutes = 60;
  Container container;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> sources;  // launch field -> where SGLang sets it
  Build build;          // kernels: built in the container; e2e: the tools job's build
  Server server;        // e2e only
  Runner run;           // e2e only
  int retries = 0;      // e2e: reruns after a could-not-run attempt (with HF_HUB_OFFLINE=1)
  Ctest ctest;          // kernels only
  std::string qualify;  // kernels: "asan" runs ci/asan-qualify.sh before the suite
  std::vector<ExtraStep> extra_steps;  // kernels: after the suite, in its container
};

// The e2e launch fields that must name their source in `sources`.
const std::vector<std::string>& launch_fields();

// The job that builds dsv4-eval, dsv4-nightly and the test server once, on a hosted runner, and
// passes them to the e2e and report jobs as an artifact (ci/bundle-tools.sh).
struct Tools {
  std::string runs_on = "ubuntu-latest";
  std::string image = "debian:12";
  std::string max_glibc;    // the oldest glibc of the images the bundle runs in
  std::string max_glibcxx;  // and their oldest libstdc++ symbol version (3.4.N)
};

// The runners' Hugging Face cache: a host folder mounted into e2e containers.
struct HfCache {
  std::string host_path;
  std::string mount;
  std::string hf_home;
};

// SGLang checked out beside the project and installed into the e2e container
// (ci/sglang-install.sh sglang INSTALL_ARGS), or checked against the image's SGLang.
struct Sglang {
  std::string repository = "sgl-project/sglang";
  std::string ref = "main";
  std::string install_args;  // ci/sglang-install.sh options: extras, Dockerfile stage, GPU archs
};

// A class of self-hosted runners: its label (the reusable workflow's input `runs_on_<class>`
// defaults to it) and GPU vendor (how ci/gpu-container.sh gives the container its GPUs).
struct RunnerClass {
  std::string name;
  std::string label;
  std::string vendor = "amd";  // "amd" or "nvidia"
};

struct NightlyWorkflow {
  std::string name = "nightly";
  std::string cron;
  std::string weekly_cron;  // the weekly workflow (suites with "schedule": "weekly")
  std::string repository;   // jobs run only in this repository (forks do not queue)
  std::string artifact_dir = "out/nightly";
  int retention_days = 14;
  int triage_runs = 3;  // earlier scheduled runs the report compares with
  std::string report_runs_on = "ubuntu-latest";
  std::string reusable = "nightly-suites";  // the reusable workflow's file name (without .yml)
  // The ref the shipped external callers pin, in `uses: ...@REF` and `dsv4_ref` alike.
  std::string caller_ref = "main";
  // The secrets the Docker Hub login reads (defaults of the reusable workflow's inputs; SGLang's).
  std::string dockerhub_username_secret = "DOCKERHUB_AMD_USERNAME";
  std::string dockerhub_token_secret = "DOCKERHUB_AMD_TOKEN";
  // Workflows whose runs the report reads for dormant tests (skipped in every run of each).
  std::vector<std::string> dormancy_workflows;
  std::vector<RunnerClass> runners;
  Tools tools;
  HfCache hf_cache;
  Sglang sglang;

  const RunnerClass* runner(const std::string& name) const;
};

// A preset (configure or test) that no workflow runs, with the reason and how to run it.
struct Manual {
  bool test = false;  // a test preset ("test_preset"), else a configure preset ("configure_preset")
  std::string preset;
  std::string reason;
};

struct PrWorkflow {
  std::string name = "pr";
  std::string runs_on = "ubuntu-latest";
  std::string image;  // container image, e.g. debian:12
  int timeout_minutes = 40;
  std::string deps_command;  // installs the Debian packages (node and npm among them)
  std::string test_command;  // the README test command: cpu preset tests and the compile checks
  std::string junit;         // uploaded as an artifact when present
  std::string hip_image;     // ROCm 7.x image the hip preset is configured and built in
  std::string hip_preset = "hip";
};

struct Registry {
  std::string file;  // where it was loaded from, for messages
  NightlyWorkflow nightly;
  PrWorkflow pr;
  std::vector<Manual> manual;
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
