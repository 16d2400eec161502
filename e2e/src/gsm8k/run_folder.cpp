// The --out folder of a gsm8k run: previous runs, settings.json, --overwrite.
#include "gsm8k/run_folder.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "common/files.hpp"

namespace dsv4::eval {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::vector<std::string>& run_folder_files() {
  static const std::vector<std::string> f = {"results.jsonl", "server_accept.jsonl",
                                             "settings.json", "report.json",
                                             "report.md",     "junit.xml"};
  return f;
}

std::vector<std::string> previous_run_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& name : run_folder_files()) {
    std::error_code ec;
    const fs::path p = fs::path(dir) / name;
    if (!fs::exists(p, ec)) continue;
    if (name == "results.jsonl" && fs::is_regular_file(p, ec) && fs::file_size(p, ec) == 0)
      continue;
    out.push_back(name);
  }
  return out;
}

std::string clear_run_folder(const std::string& dir) {
  for (const auto& name : run_folder_files()) {
    std::error_code ec;
    fs::remove(fs::path(dir) / name, ec);
    if (ec) return "cannot remove " + (fs::path(dir) / name).string() + ": " + ec.message();
  }
  return "";
}

json read_run_settings(const std::string& dir) {
  const fs::path p = fs::path(dir) / "settings.json";
  std::error_code ec;
  if (!fs::exists(p, ec)) return nullptr;
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (!j.is_object())
    throw std::runtime_error(p.string() + " is not a JSON object of the run's settings");
  return j;
}

bool write_run_settings(const std::string& dir, const json& settings, std::string* err) {
  return write_file_atomic(fs::path(dir) / "settings.json", settings.dump(2) + "\n", err);
}

std::vector<std::string> settings_differences(const json& recorded, const json& now) {
  std::vector<std::string> out;
  if (!recorded.is_object() || !now.is_object()) return out;
  for (const auto& [k, v] : now.items()) {
    if (!recorded.contains(k) || recorded[k] == v) continue;
    out.push_back(k + ": recorded " + recorded[k].dump() + ", now " + v.dump());
  }
  return out;
}

}  // namespace dsv4::eval
