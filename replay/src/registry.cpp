// The family registry: adapters add themselves at static initialisation, looked up by name.
#include <algorithm>
#include <map>
#include <stdexcept>

#include "dsv4/gpu/runtime.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4::replay {
namespace {

std::map<std::string, Family>& families() {
  static std::map<std::string, Family> all;  // constructed on first use, before any lookup
  return all;
}

}  // namespace

bool register_family(Family f) {
  if (f.name.empty() || !f.reference || !f.compare)
    throw std::logic_error("replay family '" + f.name +
                           "' needs a name, a reference and a comparator");
  const std::string name = f.name;
  if (!families().emplace(name, std::move(f)).second)
    throw std::logic_error("replay family '" + name + "' registered twice");
  return true;
}

const Family* find_family(const std::string& name) {
  auto it = families().find(name);
  return it == families().end() ? nullptr : &it->second;
}

std::vector<std::string> family_names() {
  std::vector<std::string> names;
  for (const auto& [n, f] : families()) names.push_back(n);
  return names;
}

}  // namespace dsv4::replay

namespace dsv4::replay {

Family kernel_case_family(std::string name, std::string summary,
                          std::function<std::unique_ptr<fx::KernelCase>(const fx::Tensors&)> make) {
  Family f;
  f.name = std::move(name);
  f.summary = std::move(summary);
  f.reference = [make](const fx::Case& c) { return make(c.inputs)->reference(c.inputs); };
  f.device = [make](const fx::Case& c) {
    const auto k = make(c.inputs);
    if (const std::string why = k->cannot_run(); !why.empty()) throw CannotRun(why);
    gpu::StreamHandle s;
    fx::CaseDevice dev(*k, c.inputs, s);
    dev.reset_outputs();
    dev.launch();
    gpu::synchronize(s);
    gpu::check_last_error(k->family().c_str());
    DeviceRun run;
    run.outputs = dev.download();
    if (auto g = dev.guards_intact(); !g) run.failures.push_back(g.message());
    return run;
  };
  f.golden_bitwise = [make](const fx::Case& c) { return make(c.inputs)->golden_bitwise(); };
  f.compare = [make, fam = f.name](const std::string& output, const st::Tensor& got,
                                   const st::Tensor& want, const fx::Case& c) {
    const auto k = make(c.inputs);
    for (const fx::OutputSpec& spec : k->outputs(c.inputs))
      if (spec.name == output) {
        if (got.shape != want.shape)
          return ::testing::AssertionFailure()
                 << output << ": shape " << got.shape_str() << " under test, " << want.shape_str()
                 << " expected";
        return k->compare(spec, got, want, c.inputs);
      }
    return ::testing::AssertionFailure() << fam << " has no output '" << output << "'";
  };
  return f;
}

::testing::AssertionResult check_golden(const std::string& family) {
  const Family* fam = find_family(family);
  if (!fam) return ::testing::AssertionFailure() << "no registered family '" << family << "'";
  const auto files = fx::golden_files(family);
  if (files.empty())
    return ::testing::AssertionFailure()
           << "no golden case file in " << fx::golden_directory(family);
  int bad = 0;
  size_t bitwise = 0, within = 0;
  auto result = ::testing::AssertionFailure();
  for (const std::string& path : files) {
    const fx::Case c = fx::Case::read(path);
    if (c.got.empty()) {
      result << (bad++ ? "\n" : "") << path << ": stores no got.* output";
      continue;
    }
    const bool exact = !fam->golden_bitwise || fam->golden_bitwise(c);
    const Outputs ref = fam->reference(c);
    for (const auto& [name, got] : c.got) {
      ++(exact ? bitwise : within);
      auto it = ref.find(name);
      if (it == ref.end()) {
        result << (bad++ ? "\n" : "") << path << ": the reference gives no output '" << name << "'";
        continue;
      }
      auto r = exact ? fx::bitwise_tensors(got, it->second, name)
                     : fam->compare(name, got, it->second, c);
      if (!r) result << (bad++ ? "\n" : "") << path << ":\n" << r.message();
    }
  }
  ::testing::Test::RecordProperty("golden_files", std::to_string(files.size()));
  if (bad) return result;
  auto ok = ::testing::AssertionSuccess() << files.size() << " golden files, ";
  if (bitwise) ok << bitwise << " outputs bit for bit";
  if (bitwise && within) ok << ", ";
  if (within) ok << within << " outputs within the family's tolerance";
  return ok;
}

}  // namespace dsv4::replay
