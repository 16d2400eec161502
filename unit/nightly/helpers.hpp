// Shared helpers of the nightly tests: temporary directories, files, and running commands.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace dsv4::nightly::test {

// A fresh directory under /tmp, removed with its contents when the object goes.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/dsv4-nightly-test-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty() && ::getenv("DSV4_KEEP_TEMP") == nullptr)
      std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& text, bool executable = false) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  if (executable)
    std::filesystem::permissions(path, std::filesystem::perms::owner_all |
                                           std::filesystem::perms::group_read |
                                           std::filesystem::perms::group_exec);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

struct CommandResult {
  int code = -1;
  std::string output;  // stdout and stderr
};

// Runs `cmd` with /bin/sh, stdout and stderr captured together.
inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// True while `pid` exists and is not a zombie.
inline bool process_alive(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

// A registry document around `suites` with every required top-level field.
inline nlohmann::json registry_doc(const nlohmann::json& suites) {
  return {{"schema", 3},
          {"nightly",
           {{"cron", "0 2 * * *"},
            {"weekly_cron", "0 4 * * 6"},
            {"repository", "o/r"},
            {"runners", {{"mi35x-8", {{"label", "linux-mi35x-gpu-8"}, {"vendor", "amd"}}}}},
            {"tools", {{"image", "debian:12"}, {"max_glibc", "2.35"}, {"max_glibcxx", "3.4.30"}}},
            {"hf_cache", {{"host_path", "/h"}, {"mount", "/m"}, {"hf_home", "/m/hf"}}},
            {"sglang", {{"repository", "a/b"}, {"ref", "main"}}}}},
          {"pr", {{"deps_command", "true"}, {"test_command", "true"}, {"hip_image", "rocm"}}},
          {"suites", suites}};
}

// An e2e suite's required `sources`, each naming a stand-in.
inline nlohmann::json e2e_sources() {
  nlohmann::json s = nlohmann::json::object();
  for (const char* f : {"container.image", "env", "server.model", "server.command", "server.env",
                        "server.ready_timeout_s", "run.gates"})
    s[f] = "test";
  return s;
}

}  // namespace dsv4::nightly::test
