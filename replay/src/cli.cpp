// dsv4-replay's command line (cxxopts): parses the arguments, runs the replay, maps the result to
// exit codes.
#include <ostream>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "dsv4/replay/replay.hpp"

namespace dsv4::replay {
namespace {

const char* kUsage =
    "usage: dsv4-replay CASE.safetensors [--family NAME] [--reference | --device]\n"
    "                   [--strict | --tolerant]\n"
    "       dsv4-replay --list\n"
    "Runs a kernel family's CPU reference (--reference, the default) or its GPU kernel\n"
    "(--device) on the in.* tensors of a case file and compares with the stored output using\n"
    "the family's comparator. --family defaults to the case's dsv4.family metadata.\n"
    "--strict holds the output to the family's own comparator (bit for bit for the project's\n"
    "bitwise kernels); --tolerant to the verdict SGLang's tests would accept (tied indices at\n"
    "the cut-off, derived tolerances). Default: tolerant when the case's dsv4.source is not\n"
    "dsv4 (a foreign implementation's output), strict otherwise.\n"
    "Exit codes: 0 match, 1 mismatch, 2 bad usage or malformed case file, 3 could not run.\n";

}  // namespace

int main_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  cxxopts::Options o("dsv4-replay", "Replays a kernel family's case file");
  o.add_options()("family", "family (default: the case's dsv4.family metadata)",
                  cxxopts::value<std::string>())("reference", "run the CPU reference (default)")(
      "device", "run the GPU kernel")("strict", "the family's own comparator (bitwise kernels)")(
      "tolerant", "the verdict SGLang's tests would accept")("list", "list the families")(
      "h,help", "print this help")("case", "case file", cxxopts::value<std::vector<std::string>>());
  o.parse_positional({"case"});
  cxxopts::ParseResult r;
  try {
    r = o.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    err << "dsv4-replay: " << e.what() << "\n" << kUsage;
    return 2;
  }
  if (r.count("help")) {
    out << kUsage;
    return 0;
  }
  Request req;
  if (r.count("reference") && r.count("device")) {
    err << "dsv4-replay: --reference and --device exclude each other\n" << kUsage;
    return 2;
  }
  if (r.count("strict") && r.count("tolerant")) {
    err << "dsv4-replay: --strict and --tolerant exclude each other\n" << kUsage;
    return 2;
  }
  if (r.count("strict")) req.verdict = Verdict::kStrict;
  if (r.count("tolerant")) req.verdict = Verdict::kTolerant;
  if (r.count("device")) req.mode = Mode::kDevice;
  if (r.count("reference")) req.mode = Mode::kReference;
  if (r.count("family")) {
    req.family = r["family"].as<std::string>();
    if (req.family.empty()) {
      err << "dsv4-replay: --family needs a non-empty value\n" << kUsage;
      return 2;
    }
  }
  if (r.count("list")) {
    for (const auto& n : family_names()) {
      const Family* f = find_family(n);
      out << n << "\n  " << f->summary << "\n";
    }
    return 0;
  }
  const auto positional =
      r.count("case") ? r["case"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (positional.size() != 1) {
    err << "dsv4-replay: expected one case file, got " << positional.size() << "\n" << kUsage;
    return 2;
  }
  req.path = positional[0];
  const Result res = run(req);
  (res.exit_code >= 2 ? err : out) << res.report;
  return res.exit_code;
}

}  // namespace dsv4::replay
