// dsv4-replay's command line: parses the arguments, runs the replay, maps the result to exit codes.
#include <ostream>
#include <string>
#include <vector>

#include "dsv4/replay/replay.hpp"

namespace dsv4::replay {
namespace {

const char* kUsage =
    "usage: dsv4-replay CASE.safetensors [--family NAME] [--reference | --device]\n"
    "       dsv4-replay --list\n"
    "Runs a kernel family's CPU reference (--reference, the default) or its GPU kernel\n"
    "(--device) on the in.* tensors of a case file and compares with the stored output using\n"
    "the family's comparator. --family defaults to the case's dsv4.family metadata.\n"
    "Exit codes: 0 match, 1 mismatch, 2 bad usage or malformed case file, 3 could not run.\n";

}  // namespace

int main_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  Request req;
  bool mode_set = false, list = false;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto set_mode = [&](Mode m) {
      if (mode_set && req.mode != m) {
        err << "dsv4-replay: --reference and --device exclude each other\n" << kUsage;
        return false;
      }
      req.mode = m;
      mode_set = true;
      return true;
    };
    if (a == "--help" || a == "-h") {
      out << kUsage;
      return 0;
    } else if (a == "--list") {
      list = true;
    } else if (a == "--reference") {
      if (!set_mode(Mode::kReference)) return 2;
    } else if (a == "--device") {
      if (!set_mode(Mode::kDevice)) return 2;
    } else if (a == "--family" || a.rfind("--family=", 0) == 0) {
      std::string v;
      if (a == "--family") {
        if (i + 1 >= argc) {
          err << "dsv4-replay: --family needs a value\n" << kUsage;
          return 2;
        }
        v = argv[++i];
      } else {
        v = a.substr(9);
      }
      if (v.empty()) {
        err << "dsv4-replay: --family needs a non-empty value\n" << kUsage;
        return 2;
      }
      req.family = v;
    } else if (a.size() > 1 && a[0] == '-') {
      err << "dsv4-replay: unknown option '" << a << "'\n" << kUsage;
      return 2;
    } else {
      positional.push_back(a);
    }
  }
  if (list) {
    for (const auto& n : family_names()) {
      const Family* f = find_family(n);
      out << n << (f->device ? "" : " (reference only)") << "\n  " << f->summary << "\n";
    }
    return 0;
  }
  if (positional.size() != 1) {
    err << "dsv4-replay: expected one case file, got " << positional.size() << "\n" << kUsage;
    return 2;
  }
  req.path = positional[0];
  const Result r = run(req);
  (r.exit_code >= 2 ? err : out) << r.report;
  return r.exit_code;
}

}  // namespace dsv4::replay
