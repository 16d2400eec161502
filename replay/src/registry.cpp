// The family registry: adapters add themselves at static initialisation, looked up by name.
#include <algorithm>
#include <map>
#include <stdexcept>

#include "dsv4/cases/foreign.hpp"
#include "dsv4/gpu/runtime.hpp"
#include "dsv4/replay/replay.hpp"
#include "dsv4/replay/shaped_family.hpp"

namespace dsv4::replay {
namespace {

std::map<std::string, Family>& families() {
  static std::map<std::string, Family> all;  // constructed on first use, before any lookup
  return all;
}

}  // namespace

bool register_family(Family f) {
  if (f.name.empty() || !f.make)
    throw std::logic_error("replay family '" + f.name + "' needs a name and a factory");
  const std::string name = f.name;
  if (!families().emplace(name, std::move(f)).second)
    throw std::logic_error("replay family '" + name + "' registered twice");
  return true;
}

std::optional<fx::Vars> stated_vars(const fx::Case& c) {
  auto it = c.metadata.find("dsv4.shape");
  if (it == c.metadata.end() || it->second.empty()) return std::nullopt;
  try {
    return fx::Vars::parse(it->second);
  } catch (const fx::VarsError& e) {
    throw_stated(e.what());
  }
}

void throw_stated(const std::string& why) {
  throw st::FormatError("case", "", "__metadata__.dsv4.shape", why);
}

void check_stated(const fx::Vars& stated, const std::string& built) {
  if (fx::Vars::parse(built) != stated)
    throw_stated("the case states the shape '" + stated.spec() + "' but its inputs give '" + built +
                 "'");
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

std::vector<std::string> kernel_family_names() {
  std::vector<std::string> names;
  for (const auto& [n, f] : families())
    if (n != kHarnessFamily) names.push_back(n);
  return names;
}

}  // namespace dsv4::replay

namespace dsv4::replay {

std::string case_source(const fx::Case& c) {
  auto it = c.metadata.find("dsv4.source");
  return it == c.metadata.end() || it->second.empty() ? std::string("dsv4") : it->second;
}

bool foreign_source(const fx::Case& c) { return case_source(c) != "dsv4"; }

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kStrict:
      return "strict";
    case Verdict::kTolerant:
      return "tolerant";
    default:
      return "auto";
  }
}

Verdict verdict_for(const fx::Case& c, Verdict requested) {
  if (requested != Verdict::kAuto) return requested;
  return foreign_source(c) ? Verdict::kTolerant : Verdict::kStrict;
}

Outputs Family::reference(const fx::Case& c) const {
  const Bound b = make(c);
  return b.k->reference(b.inputs);
}

DeviceRun Family::device(const fx::Case& c) const {
  const Bound b = make(c);
  std::string why;
  if (!gpu::available(&why)) throw CannotRun("--device needs a GPU: " + why);
  if (why = b.k->cannot_run(); !why.empty()) throw CannotRun(why);
  gpu::StreamHandle s;
  fx::CaseDevice dev(*b.k, b.inputs, s);
  dev.reset_outputs();
  dev.launch();
  gpu::synchronize(s);
  gpu::check_last_error(b.k->family().c_str());
  DeviceRun run;
  run.outputs = dev.download();
  if (auto g = dev.guards_intact(); !g) run.failures.push_back(g.message());
  return run;
}

bool Family::golden_bitwise(const fx::Case& c) const { return make(c).k->golden_bitwise(); }

::testing::AssertionResult Family::compare(const std::string& output, const st::Tensor& got,
                                           const st::Tensor& want, const fx::Case& c,
                                           Verdict verdict) const {
  const Bound b = make(c);
  for (const fx::OutputSpec& spec : b.k->outputs(b.inputs))
    if (spec.name == output) {
      if (got.shape != want.shape)
        return ::testing::AssertionFailure() << output << ": shape " << got.shape_str()
                                             << " under test, " << want.shape_str() << " expected";
      const auto* foreign = dynamic_cast<const cases::Foreign*>(b.k.get());
      if (foreign && verdict_for(c, verdict) == Verdict::kTolerant)
        return foreign->compare_foreign(spec, got, want, b.inputs);
      return b.k->compare(spec, got, want, b.inputs);
    }
  return ::testing::AssertionFailure() << name << " has no output '" << output << "'";
}

Family kernel_case_family(std::string name, std::string summary,
                          std::function<std::unique_ptr<fx::KernelCase>(const fx::Tensors&)> make) {
  Family f;
  f.name = std::move(name);
  f.summary = std::move(summary);
  f.make = [make = std::move(make)](const fx::Case& c) {
    return Family::Bound{make(c.inputs), c.inputs};
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
    const bool exact = fam->golden_bitwise(c);
    const Outputs ref = fam->reference(c);
    for (const auto& [name, got] : c.got) {
      ++(exact ? bitwise : within);
      auto it = ref.find(name);
      if (it == ref.end()) {
        result << (bad++ ? "\n" : "") << path << ": the reference gives no output '" << name << "'";
        continue;
      }
      auto r = exact ? fx::bitwise_tensors(got, it->second, name)
                     : fam->compare(name, got, it->second, c, Verdict::kStrict);
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
