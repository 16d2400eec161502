// dsv4-replay: a registry of kernel families (one adapter each) and the replay of a case file.
#pragma once

// A family adapter knows a family's case layout: which in.* tensors it reads, how to run the CPU
// reference and (in a GPU build) the kernel on them, and which comparator of fixtures/compare.hpp
// judges an output. Each adapter is a fx::KernelCase (dsv4/fixtures/kernel_case.hpp) declared in
// replay/include/dsv4/cases/<family>.hpp and defined in replay/src/families/<family>.cpp, which
// registers it with DSV4_KERNEL_FAMILY; the GPU test and the benchmark use the same class.
// Nothing else lists the families.

#include <gtest/gtest.h>

#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsv4/cases/bench_rows.hpp"
#include "dsv4/fixtures/case_file.hpp"
#include "dsv4/fixtures/case_sweep.hpp"
#include "dsv4/fixtures/kernel_case.hpp"
#include "dsv4/fixtures/safetensors.hpp"

namespace dsv4::replay {

namespace st = ::dsv4::fx::st;

enum class Mode { kReference, kDevice };

// Output tensors by name, without the role prefix ("out", "pool", ...).
using Outputs = std::map<std::string, st::Tensor>;

// A kernel run: its outputs, and the device-side failures the fixtures saw (damaged guard
// canaries, the launcher's error counter), each a readable message; any failure is a mismatch.
struct DeviceRun {
  Outputs outputs;
  std::vector<std::string> failures;
};

// The run cannot happen here (no GPU, no launcher for the family): exit code 3. A case that does
// not fit the family (missing input, wrong dtype or shape) throws st::FormatError: exit code 2.
class CannotRun : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whose output a case holds, from its __metadata__ "dsv4.source": "dsv4" (the project's kernels;
// also when the key is absent, as in every file the project's tests write) or anything else (a
// foreign implementation such as "sglang").
std::string case_source(const fx::Case& c);
bool foreign_source(const fx::Case& c);

// Which verdict judges an output. kStrict: the family's own comparator (bit for bit where the
// family's kernel is bitwise). kTolerant: the verdict SGLang's own tests would accept (tie-tolerant
// selections, derived tolerances for values), where the family defines one (cases::Foreign);
// else the family's own comparator. kAuto: tolerant for a foreign source, strict otherwise.
enum class Verdict { kAuto, kStrict, kTolerant };
const char* verdict_name(Verdict v);  // "auto", "strict", "tolerant"
// kAuto resolved for case `c`.
Verdict verdict_for(const fx::Case& c, Verdict requested);

// A family is a name, the summary of its case layout, and a factory: the fx::KernelCase adapter
// built from a case file (its inputs, and the metadata a family reads as inputs), which knows the
// reference, the kernel launch, the outputs and their comparators. Everything the replay does is
// derived from that object.
struct Family {
  // The adapter of a case and the inputs it reads (the case's in.*, plus what it takes from
  // metadata).
  struct Bound {
    std::unique_ptr<fx::KernelCase> k;
    fx::Tensors inputs;
  };
  using Factory = std::function<Bound(const fx::Case&)>;
  // What dsv4-replay --draw needs: the shape's parser (the inverse of its vars()), its keys with
  // their defaults, and the family's named sweeps (the GPU test's), each point's shape vars in
  // order, every distinct shape once.
  struct Drawing {
    std::string keys;
    // The adapter of the shape `v` names; throws fx::VarsError (a key, a value) or
    // std::invalid_argument (a shape the adapter cannot build).
    std::function<std::unique_ptr<fx::KernelCase>(const fx::Vars& v)> from_vars;
    struct NamedSweep {
      std::string name;
      std::function<std::vector<fx::Vars>()> points;
    };
    std::vector<NamedSweep> sweeps;
    // The family's benchmark rows (cases::BenchRow, dsv4-bench); empty: none declared.
    std::function<std::vector<cases::BenchRow>()> bench;
  };

  std::string name;
  std::string summary;  // the case layout, printed by --list
  Factory make;
  std::optional<Drawing> drawing;  // absent: the family draws no cases

  // Runs the CPU reference on the case's inputs.
  Outputs reference(const fx::Case& c) const;
  // Runs the kernel on the device (poisoned, canary-guarded buffers, in-place outputs starting
  // from their input). Throws CannotRun when no GPU answers or the adapter says the device
  // cannot run the case.
  DeviceRun device(const fx::Case& c) const;
  // The comparator of `output` (got under test against want), under `verdict` (kAuto: from the
  // case's source).
  ::testing::AssertionResult compare(const std::string& output, const st::Tensor& got,
                                     const st::Tensor& want, const fx::Case& c,
                                     Verdict verdict = Verdict::kAuto) const;
  // Whether golden files of this case hold the reference's outputs bit for bit (else within
  // compare()).
  bool golden_bitwise(const fx::Case& c) const;
};

// A family whose adapter is built from a case file's inputs alone (the usual case):
// `make` throws st::FormatError or std::invalid_argument when they do not fit.
Family kernel_case_family(std::string name, std::string summary,
                          std::function<std::unique_ptr<fx::KernelCase>(const fx::Tensors&)> make);

// Golden case files (fx::golden_files): every committed file of `family` replayed through the
// family's CPU reference, each stored got.* held to the reference's output bit for bit (or, for a
// family whose golden_bitwise is false, within the family's comparator). Fails when the family
// has no golden file or is not registered.
::testing::AssertionResult check_golden(const std::string& family);

// Adds a family; a second family of the same name is a programming error (std::logic_error).
bool register_family(Family f);
const Family* find_family(const std::string& name);
std::vector<std::string> family_names();
// The harness's own family: smoke, the planted-fault kernel that tests the fixtures, not a DSV4
// kernel (it has no golden files, reference library, soak or nightly row).
inline constexpr const char* kHarnessFamily = "smoke";
// The registered kernel families: family_names() less kHarnessFamily.
std::vector<std::string> kernel_family_names();

struct Request {
  std::string path;
  std::string family;  // "" takes the case's dsv4.family metadata
  Mode mode = Mode::kReference;
  Verdict verdict = Verdict::kAuto;  // --strict / --tolerant
};

// One compared output, as --json reports it: the comparisons its comparator ran (fx::Comparison),
// merged.
struct OutputVerdict {
  std::string name;
  std::string comparator;  // "bitwise", "close", a family's verdict; several joined by "+"
  bool ok = false;
  std::optional<size_t> checked, mismatched;  // absent: the comparator reported no counts
  std::vector<fx::Mismatch> first;            // at most 8
  std::string message;                        // the comparator's text ("" on a match)
};

struct Result {
  int exit_code = 0;   // 0 match, 1 mismatch, 2 bad usage or malformed case, 3 could not run
  std::string report;  // what the tool prints
  // Per compared output, the comparator's message ("" when it matched).
  std::map<std::string, std::string> mismatches;
  // What --json prints besides the request: per output, in comparison order.
  std::vector<OutputVerdict> outputs;
  std::string family, case_name, source, rule, error;  // rule: "strict" | "tolerant"
  std::string redraw;                                  // the case's dsv4.repro, if any
};

// The result as one JSON object (dsv4-replay --json): family, case, path, mode, source, rule,
// verdict, exit_code, outputs, rerun, redraw, error.
std::string result_json(const Request& req, const Result& res);

// Reference mode: the reference's outputs are `want`, the case's stored got.* (else want.*) are
// `got`, so a case saved by a failing kernel test reports the same mismatch the test did.
// Device mode: the kernel's fresh outputs are `got`, the stored want.* (else the reference's
// outputs) are `want`; the report also says whether the kernel reproduced the stored got.*.
Result run(const Request& r);

// dsv4-replay --draw: writes one case file per point (the shape `spec`, or every point of sweep
// `sweep`) of `family` drawn from `seed` into `dir`, printing each path on `out` as written.
// Returns 0, 2 (bad usage: unknown family, key, value or sweep), or 3 (a file cannot be written).
// `set` (vars words, as in spec) is laid over every point: a key=value replaces the point's value
// of that key, a flag is added; a point the result does not fit (an alternative of the set flag
// already chosen, say) is left out and named on `err`, and the same resulting point is drawn once.
// `max_points` > 0 draws that many points of the sweep, evenly spaced over it (the first and the
// last among them), in the sweep's order.
struct DrawRequest {
  std::string family, spec, sweep, set, dir = ".";
  size_t max_points = 0;
  std::optional<uint64_t> seed;  // default: the GPU tests' first seed (fx::case_seeds())
};
int draw(const DrawRequest& r, std::ostream& out, std::ostream& err);
// The path of a drawn case: <dir>/<family>--<vars().id()>--seed<N>.safetensors.
std::string drawn_path(const std::string& dir, const std::string& family, const fx::Vars& v,
                       uint64_t seed);
// A drawn case: the inputs of `k` for `seed`, want.* the reference's outputs, start.* every
// output's start state, and the metadata (dsv4.shape, dsv4.repro, dsv4.outputs, dsv4.vars, ...).
fx::Case drawn_case(const fx::KernelCase& k, const fx::Vars& v, uint64_t seed);
// The same of inputs already drawn from Rng(seed) and their reference outputs.
fx::Case drawn_case(const fx::KernelCase& k, const fx::Vars& v, uint64_t seed, fx::Tensors inputs,
                    fx::Tensors want);

// The command line: dsv4-replay CASE.safetensors [--family NAME] [--reference|--device]
// [--strict|--tolerant] [--json] [--list] [--help], or dsv4-replay --draw FAMILY [--shape SPEC |
// --sweep NAME] [--seed N] [--out DIR]. Returns the exit code; the report goes to `out`, usage
// errors to `err`.
int main_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace dsv4::replay

#define DSV4_REPLAY_CONCAT2_(a, b) a##b
#define DSV4_REPLAY_CONCAT_(a, b) DSV4_REPLAY_CONCAT2_(a, b)
// DSV4_REPLAY_FAMILY(make_family()): registers a family at static initialisation.
// DSV4_KERNEL_FAMILY("name", "summary", CaseClass): registers a fx::KernelCase adapter whose
// constructor CaseClass(const fx::Tensors& inputs) reads a case file's inputs.
#define DSV4_KERNEL_FAMILY(name, summary, CaseClass)                                 \
  DSV4_REPLAY_FAMILY(::dsv4::replay::kernel_case_family(                             \
      name, summary,                                                                 \
      [](const ::dsv4::fx::Tensors& in) -> std::unique_ptr<::dsv4::fx::KernelCase> { \
        return std::make_unique<CaseClass>(in);                                      \
      }))
#define DSV4_REPLAY_FAMILY(expr)                                                       \
  namespace {                                                                          \
  [[maybe_unused]] const bool DSV4_REPLAY_CONCAT_(dsv4_replay_registered_, __LINE__) = \
      ::dsv4::replay::register_family(expr);                                           \
  }
