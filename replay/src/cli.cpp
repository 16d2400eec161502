// dsv4-replay's command line (cxxopts): parses the arguments, runs the replay, maps the result to
// exit codes.
#include <charconv>
#include <ostream>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "dsv4/replay/replay.hpp"

namespace dsv4::replay {
namespace {

const char* kUsage =
    "usage: dsv4-replay CASE.safetensors [--family NAME] [--reference | --device]\n"
    "                   [--strict | --tolerant] [--json]\n"
    "       dsv4-replay --draw FAMILY [--shape SPEC | --sweep NAME] [--set SPEC] [--seed N]\n"
    "                   [--max-points N] [--out DIR]\n"
    "       dsv4-replay --list\n"
    "Runs a kernel family's CPU reference (--reference, the default) or its GPU kernel\n"
    "(--device) on the in.* tensors of a case file and compares with the stored output using\n"
    "the family's comparator. --family defaults to the case's dsv4.family metadata.\n"
    "--strict holds the output to the family's own comparator (bit for bit for the project's\n"
    "bitwise kernels); --tolerant to the verdict SGLang's tests would accept (tied indices at\n"
    "the cut-off, derived tolerances). Default: tolerant when the case's dsv4.source is not\n"
    "dsv4 (a foreign implementation's output), strict otherwise.\n"
    "--json prints the report as one JSON object on stdout (the exit codes are the same).\n"
    "--draw writes the family's case for the shape SPEC (its vars words, comma-separated,\n"
    "e.g. B=4,V=1025,top-p; missing keys keep their defaults) or every point of a named sweep\n"
    "(--list names them) drawn from seed N into DIR (default .), one\n"
    "<family>--<id>--seed<N>.safetensors per point, each path printed as written. --set SPEC\n"
    "lays vars over every point (a key=value replaces the point's, a flag is added; a point\n"
    "it does not fit is left out and named on stderr); --max-points N draws N of the points,\n"
    "evenly spaced over the sweep.\n"
    "Exit codes: 0 match, 1 mismatch, 2 bad usage or malformed case file, 3 could not run\n"
    "(--draw: 0 all written, 2 bad usage, 3 a file cannot be written).\n";

// --list: per family its case layout, its shape keys with their defaults, its sweeps.
void list_families(std::ostream& out) {
  for (const auto& n : family_names()) {
    const Family* f = find_family(n);
    out << n << "\n  " << f->summary << "\n";
    if (!f->drawing) continue;
    out << "  shape keys: " << f->drawing->keys << "\n  sweeps:";
    for (const auto& s : f->drawing->sweeps)
      out << " " << s.name << " (" << s.points().size() << ")";
    out << "\n";
  }
}

int usage(std::ostream& err, const std::string& why) {
  err << "dsv4-replay: " << why << "\n" << kUsage;
  return 2;
}

// The same fields --json prints for a run, for a usage error before any run.
int usage_json(std::ostream& out, std::ostream& err, const Request& req, const std::string& why) {
  Result res;
  res.exit_code = 2;
  res.error = why;
  out << result_json(req, res) << "\n";
  err << "dsv4-replay: " << why << "\n";
  return 2;
}

}  // namespace

int main_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  cxxopts::Options o("dsv4-replay", "Replays a kernel family's case file");
  o.add_options()("family", "family (default: the case's dsv4.family metadata)",
                  cxxopts::value<std::string>())("reference", "run the CPU reference (default)")(
      "device", "run the GPU kernel")("strict", "the family's own comparator (bitwise kernels)")(
      "tolerant", "the verdict SGLang's tests would accept")("list", "list the families")(
      "json", "the report as one JSON object")("draw", "draw cases of FAMILY",
                                               cxxopts::value<std::string>())(
      "shape", "the shape to draw (SPEC)", cxxopts::value<std::string>())(
      "sweep", "the named sweep to draw", cxxopts::value<std::string>())(
      "set", "vars laid over every drawn point (SPEC)", cxxopts::value<std::string>())(
      "max-points", "at most N points of the sweep, evenly spaced", cxxopts::value<std::string>())(
      "seed", "the seed to draw from", cxxopts::value<std::string>())(
      "out", "the directory drawn cases go to", cxxopts::value<std::string>())(
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
  const bool json = r.count("json") != 0;
  auto bad = [&](const std::string& why) {
    return json && !r.count("draw") ? usage_json(out, err, req, why) : usage(err, why);
  };
  if (r.count("strict")) req.verdict = Verdict::kStrict;
  if (r.count("tolerant")) req.verdict = Verdict::kTolerant;
  if (r.count("device")) req.mode = Mode::kDevice;
  if (r.count("reference")) req.mode = Mode::kReference;
  if (r.count("reference") && r.count("device"))
    return bad("--reference and --device exclude each other");
  if (r.count("strict") && r.count("tolerant"))
    return bad("--strict and --tolerant exclude each other");
  if (r.count("family")) {
    req.family = r["family"].as<std::string>();
    if (req.family.empty()) return bad("--family needs a non-empty value");
  }
  if (r.count("list")) {
    list_families(out);
    return 0;
  }
  const auto positional =
      r.count("case") ? r["case"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (r.count("draw")) {
    if (!positional.empty()) return usage(err, "--draw takes no case file (" + positional[0] + ")");
    for (const char* f : {"json", "device", "reference", "strict", "tolerant", "family"})
      if (r.count(f)) return usage(err, std::string("--") + f + " does not apply to --draw");
    DrawRequest d;
    d.family = r["draw"].as<std::string>();
    if (r.count("shape")) d.spec = r["shape"].as<std::string>();
    if (r.count("sweep")) d.sweep = r["sweep"].as<std::string>();
    if (r.count("set")) d.set = r["set"].as<std::string>();
    if (r.count("max-points")) {
      const std::string v = r["max-points"].as<std::string>();
      size_t n = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (v.empty() || ec != std::errc() || end != v.data() + v.size() || n == 0)
        return usage(err, "--max-points " + v + " is not a positive integer");
      d.max_points = n;
    }
    if (r.count("out")) d.dir = r["out"].as<std::string>();
    if (r.count("seed")) {
      const std::string v = r["seed"].as<std::string>();
      uint64_t seed = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), seed);
      if (v.empty() || ec != std::errc() || end != v.data() + v.size())
        return usage(err, "--seed " + v + " is not a non-negative integer");
      d.seed = seed;
    }
    return draw(d, out, err);
  }
  for (const char* f : {"shape", "sweep", "set", "max-points", "seed", "out"})
    if (r.count(f)) return bad(std::string("--") + f + " needs --draw FAMILY");
  if (positional.size() != 1)
    return bad("expected one case file, got " + std::to_string(positional.size()));
  req.path = positional[0];
  const Result res = run(req);
  if (json)
    out << result_json(req, res) << "\n";
  else
    (res.exit_code >= 2 ? err : out) << res.report;
  return res.exit_code;
}

}  // namespace dsv4::replay
