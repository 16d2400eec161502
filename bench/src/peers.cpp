// Reading and running dsv4-bench's PyTorch peers.
#include "dsv4/bench/peers.hpp"

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "dsv4/fixtures/case_file.hpp"

namespace dsv4::bench {

using nlohmann::json;

std::optional<double> Peer::best_us() const {
  if (eager_us && compile_us) return std::min(*eager_us, *compile_us);
  return eager_us ? eager_us : compile_us;
}

std::optional<double> Peer::us(const std::string& which) const {
  if (which == "eager") return eager_us;
  if (which == "compile") return compile_us;
  return best_us();
}

const Peer* Peers::find(const std::string& id) const {
  const auto it = rows.find(id);
  return it == rows.end() ? nullptr : &it->second;
}

namespace {
std::optional<double> number(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}
std::string text(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}
}  // namespace

Peers read_peers(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("peers file " + path + ": cannot be read");
  Peers p;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception& e) {
      throw std::runtime_error("peers file " + path + ", line " + std::to_string(n) +
                               ": not JSON (" + e.what() + ")");
    }
    if (!j.is_object())
      throw std::runtime_error("peers file " + path + ", line " + std::to_string(n) +
                               ": not a JSON object");
    if (j.contains("ceiling")) {
      p.matmul_tflops = number(j, "tflops");
      p.matmul_shape = text(j, "shape");
      continue;
    }
    const std::string family = text(j, "family");
    if (family.empty() || !j.contains("shape") || !j["shape"].is_string())
      throw std::runtime_error("peers file " + path + ", line " + std::to_string(n) +
                               ": needs \"family\" and \"shape\"");
    Peer peer{.name = text(j, "peer"),
              .eager_us = number(j, "eager_us"),
              .compile_us = number(j, "compile_us"),
              .eager_error = text(j, "eager_error"),
              .compile_error = text(j, "compile_error")};
    if (p.device.empty()) p.device = text(j, "device");
    if (p.torch.empty()) p.torch = text(j, "torch");
    p.rows[family + ":" + j["shape"].get<std::string>()] = std::move(peer);
  }
  return p;
}

Peers run_peers(const std::string& python, const std::string& script, const std::string& dir,
                const std::string& out_file) {
  std::error_code ec;
  std::filesystem::remove(out_file, ec);
  const std::string cmd = python + " " + fx::shell_quoted(script) + " " + fx::shell_quoted(dir) +
                          " --out " + fx::shell_quoted(out_file);
  std::fflush(stdout);
  const int status = std::system(cmd.c_str());
  const int code = status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  Peers p;
  if (std::filesystem::exists(out_file)) p = read_peers(out_file);
  if (code == 124)  // timeout(1): cut short, the lines written so far kept
    p.error = "the PyTorch peers ran out of time after " + std::to_string(p.rows.size()) +
              " rows (" + cmd + ")";
  else if (code != 0 && code != 1)  // 1: some peer failed, the others measured
    p.error = "the PyTorch peers did not run (" + cmd + " exited " + std::to_string(code) + ")";
  else if (p.rows.empty())
    p.error = "the PyTorch peers wrote no row (" + cmd + ")";
  return p;
}

}  // namespace dsv4::bench
