// Replays one case file: runs the family's reference or kernel and compares with the stored output.
#include <exception>
#include <sstream>
#include <stdexcept>

#include "dsv4/fixtures/replay.hpp"
#include "dsv4/gpu/runtime.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4::replay {
namespace {

std::string describe(const std::map<std::string, st::Tensor>& m, const char* prefix) {
  std::ostringstream os;
  bool first = true;
  for (const auto& [n, t] : m) {
    os << (first ? "" : ", ") << prefix << n << " " << st::dtype_name(t.dtype) << t.shape_str();
    if (!t.format.empty()) os << " (" << t.format << ")";
    first = false;
  }
  return first ? std::string("none") : os.str();
}

std::string known_families() {
  std::string s;
  for (const auto& n : family_names()) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? std::string("none") : s;
}

Result fail(int code, std::ostringstream& report, const std::string& why, Result res = {}) {
  report << "error: " << why << "\n";
  res.exit_code = code;
  res.report = report.str();
  res.error = why;
  return res;
}

// One output judged by the family's comparator, with the structured reports the comparisons it
// ran left (fx::ComparisonLog) merged into one.
OutputVerdict judge(const Family& fam, const std::string& out, const st::Tensor& got,
                    const st::Tensor& want, const fx::Case& c, Verdict verdict) {
  fx::ComparisonLog log;
  const auto r = fam.compare(out, got, want, c, verdict);
  OutputVerdict v{.name = out, .ok = bool(r), .message = r ? "" : r.message()};
  size_t checked = 0, mismatched = 0;
  for (const fx::Comparison& e : log.entries()) {
    if (v.comparator.find(e.comparator) == std::string::npos)
      v.comparator += (v.comparator.empty() ? "" : "+") + e.comparator;
    checked += e.checked;
    mismatched += e.mismatched;
    for (const fx::Mismatch& m : e.first)
      if (v.first.size() < 8) v.first.push_back(m);
  }
  if (!log.entries().empty()) {
    v.checked = checked;
    v.mismatched = mismatched;
  } else {
    v.comparator = "unreported";  // a comparator that gives no counts: the message alone
  }
  return v;
}

}  // namespace

Result run(const Request& req) {
  std::ostringstream report;
  fx::Case c;
  Result res;
  res.family = req.family;
  try {
    c = fx::Case::read(req.path);
  } catch (const std::exception& e) {
    return fail(2, report, std::string("malformed case file: ") + e.what(), res);
  }
  std::string name = req.family;
  if (name.empty()) name = c.family;
  res.family = name;
  res.case_name = c.name;
  res.source = case_source(c);
  if (auto it = c.metadata.find("dsv4.repro"); it != c.metadata.end()) res.redraw = it->second;
  if (name.empty())
    return fail(2, report,
                "the case names no family (metadata dsv4.family); pass --family NAME (known: " +
                    known_families() + ")",
                res);
  if (!c.family.empty() && c.family != name)
    return fail(2, report,
                "--family " + name + " contradicts the case's dsv4.family '" + c.family + "'", res);
  const Family* fam = find_family(name);
  if (!fam)
    return fail(2, report, "unknown family '" + name + "' (known: " + known_families() + ")", res);
  c.family = name;

  const bool device = req.mode == Mode::kDevice;
  report << "case:   " << req.path << "\n"
         << "family: " << name << ", mode: " << (device ? "device" : "reference") << "\n";
  if (!c.name.empty()) report << "id:     " << c.name << "\n";
  if (c.seed) report << "seed:   " << *c.seed << "\n";
  if (auto it = c.metadata.find("dsv4.test"); it != c.metadata.end())
    report << "test:   " << it->second << "\n";
  report << "inputs: " << describe(c.inputs, "in.") << "\n";
  // The kernel under --device is the project's own: strict unless --tolerant is asked for.
  const Verdict verdict = device ? (req.verdict == Verdict::kAuto ? Verdict::kStrict : req.verdict)
                                 : verdict_for(c, req.verdict);
  res.rule = verdict_name(verdict);
  report << "source: " << case_source(c) << ", verdict: " << verdict_name(verdict)
         << (verdict == Verdict::kTolerant
                 ? " (tied indices at the cut-off and derived tolerances where the family has them)"
                 : "")
         << "\n";

  size_t device_failures = 0;
  try {
    if (!device) {
      const auto& stored = c.got.empty() ? c.want : c.got;
      const char* role = c.got.empty() ? "want." : "got.";
      if (stored.empty())
        return fail(2, report, "the case stores no output to check (no got.* or want.* tensor)",
                    res);
      report << "stored: " << describe(stored, role) << "\n";
      const Outputs ref = fam->reference(c);
      for (const auto& [out, t] : stored) {
        auto it = ref.find(out);
        if (it == ref.end())
          throw st::FormatError("case", role + out, "name",
                                "the " + name + " reference produces no output '" + out + "'");
        const OutputVerdict r = judge(*fam, out, t, it->second, c, verdict);
        res.mismatches[out] = r.message;
        res.outputs.push_back(r);
        report << (r.ok ? "match:    " : "MISMATCH: ") << role << out << " vs reference"
               << (r.ok ? "\n" : ":\n" + r.message + "\n");
      }
    } else {
      std::string why;
      if (!gpu::available(&why)) throw CannotRun("--device needs a GPU: " + why);
      const DeviceRun dev = fam->device(c);
      const Outputs& got = dev.outputs;
      const bool stored_want = !c.want.empty();
      const Outputs want = stored_want ? Outputs(c.want) : fam->reference(c);
      report << "device: " << gpu::device_info().name << " (" << gpu::device_info().arch << ")\n";
      for (const auto& [out, w] : want) {
        auto it = got.find(out);
        if (it == got.end())
          throw st::FormatError("case", "want." + out, "name",
                                "the " + name + " kernel produces no output '" + out + "'");
        const OutputVerdict r = judge(*fam, out, it->second, w, c, verdict);
        res.mismatches[out] = r.message;
        res.outputs.push_back(r);
        report << (r.ok ? "match:    " : "MISMATCH: ") << "kernel " << out << " vs "
               << (stored_want ? "stored want." : "reference ") << out
               << (r.ok ? "\n" : ":\n" + r.message + "\n");
        if (auto g = c.got.find(out); g != c.got.end()) {
          const auto same =
              fx::same_bytes(it->second.data, g->second.data, "kernel output", "stored got");
          report << "          the kernel " << (same ? "reproduces" : "does not reproduce")
                 << " the stored got." << out << " bit for bit"
                 << (same ? std::string() : ": " + std::string(same.message())) << "\n";
        }
      }
      for (const std::string& f : dev.failures) {
        report << "MISMATCH: " << f << "\n";
        res.outputs.push_back({.name = "device buffers", .comparator = "canaries", .message = f});
      }
      device_failures = dev.failures.size();
    }
  } catch (const st::FormatError& e) {
    return fail(2, report, std::string("the case does not fit the family: ") + e.what(), res);
  } catch (const std::invalid_argument& e) {
    // The family's reference or launcher refused the case's sizes or layout.
    return fail(2, report, std::string("the case does not fit the family: ") + e.what(), res);
  } catch (const CannotRun& e) {
    return fail(3, report, e.what(), res);
  } catch (const std::exception& e) {
    return fail(3, report, std::string("the run failed: ") + e.what(), res);
  }
  size_t bad = 0;
  for (const auto& [o, m] : res.mismatches) bad += m.empty() ? 0 : 1;
  bad += device_failures;
  res.exit_code = bad ? 1 : 0;
  if (bad)
    report << "result: MISMATCH (" << bad << " failed checks; " << res.mismatches.size()
           << " outputs compared)\n";
  else
    report << "result: match (" << res.mismatches.size() << " outputs compared)\n";
  res.report = report.str();
  return res;
}

}  // namespace dsv4::replay
