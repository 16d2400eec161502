// The PyTorch peer of a benchmark: runs bench/torch_attention.py (eager and torch.compile timings
// on the same device, in the same run) and reads its "key us" lines.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>

namespace dsv4::bench {

struct TorchPeer {
  std::map<std::string, double> us;  // "eager <case>" / "compile <case>" -> microseconds
  std::string note;                  // why there are no timings ("" when there are)
  // "12.3" or "n/a" for one timing.
  std::string cell(const std::string& key) const {
    auto it = us.find(key);
    if (it == us.end()) return "n/a";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", it->second);
    return buf;
  }
};

// Runs `python3 bench/torch_attention.py <args>` ($DSV4_PYTHON overrides the interpreter). The
// script prints "us <key> <value>" lines; any other line is passed through to stdout.
inline TorchPeer run_torch_peer(const std::string& args) {
  TorchPeer p;
  const auto script = std::filesystem::path(DSV4_BENCH_DIR) / "torch_attention.py";
  const char* py = std::getenv("DSV4_PYTHON");
  const std::string cmd =
      std::string(py ? py : "python3") + " " + script.string() + " " + args + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) {
    p.note = "could not start " + cmd;
    return p;
  }
  char line[4096];
  std::string tail;
  while (std::fgets(line, sizeof line, f)) {
    std::istringstream in(line);
    std::string tag, key;
    double v;
    if (in >> tag >> key >> v && tag == "us")
      p.us[key] = v;
    else
      tail += line;
  }
  const int rc = pclose(f);
  if (rc != 0 || p.us.empty())
    p.note = "torch peer failed (" + cmd + "): " + tail;
  else if (!tail.empty())
    std::printf("%s", tail.c_str());
  return p;
}

}  // namespace dsv4::bench
