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
#include <stdexcept>
#include <string>
#include <vector>

#include "dsv4/fixtures/case_file.hpp"
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

struct Family {
  std::string name;
  std::string summary;  // the case layout, printed by --list
  // Runs the CPU reference on the case's inputs.
  std::function<Outputs(const fx::Case&)> reference;
  // Runs the kernel on the device (empty when the family has no launcher). Called only when a
  // GPU is available; may also throw CannotRun.
  std::function<DeviceRun(const fx::Case&)> device;
  // The family's comparator for one output, `got` under test against `want`.
  std::function<::testing::AssertionResult(const std::string& output, const st::Tensor& got,
                                           const st::Tensor& want, const fx::Case& c)>
      compare;
  // Whether golden files of this case hold the reference's outputs bit for bit (else within
  // `compare`); empty: bit for bit.
  std::function<bool(const fx::Case&)> golden_bitwise;
};

// A family whose adapter is a fx::KernelCase: `make` builds the case object from a case file's
// inputs (throwing st::FormatError or std::invalid_argument when they do not fit), and the
// reference, the device run (poisoned, canary-guarded buffers, in-place outputs starting from
// their input) and the comparator of every output all come from it.
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

struct Request {
  std::string path;
  std::string family;  // "" takes the case's dsv4.family metadata
  Mode mode = Mode::kReference;
};

struct Result {
  int exit_code = 0;   // 0 match, 1 mismatch, 2 bad usage or malformed case, 3 could not run
  std::string report;  // what the tool prints
  // Per compared output, the comparator's message ("" when it matched).
  std::map<std::string, std::string> mismatches;
};

// Reference mode: the reference's outputs are `want`, the case's stored got.* (else want.*) are
// `got`, so a case saved by a failing kernel test reports the same mismatch the test did.
// Device mode: the kernel's fresh outputs are `got`, the stored want.* (else the reference's
// outputs) are `want`; the report also says whether the kernel reproduced the stored got.*.
Result run(const Request& r);

// The command line: dsv4-replay CASE.safetensors [--family NAME] [--reference|--device]
// [--list] [--help]. Returns the exit code; the report goes to `out`, usage errors to `err`.
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
