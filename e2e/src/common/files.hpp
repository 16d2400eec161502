// File writes of the e2e tools: whole files replaced atomically, the CI step summary appended.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace dsv4::eval {

// Writes `text` to a temporary file beside `path` and renames it over `path`, so a reader never
// sees half a file. Returns false with *error set (when given) on failure.
inline bool write_file_atomic(const std::filesystem::path& path, const std::string& text,
                              std::string* error = nullptr) {
  const std::string tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f || !f.write(text.data(), std::streamsize(text.size())) || !f.flush()) {
      if (error) *error = "cannot write " + tmp;
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    if (error) *error = "cannot rename " + tmp + " to " + path.string();
    return false;
  }
  return true;
}

// Appends Markdown to the file named by $GITHUB_STEP_SUMMARY (nothing to do when unset).
inline bool append_step_summary(const std::string& markdown, std::string* error = nullptr) {
  const char* summary = std::getenv("GITHUB_STEP_SUMMARY");
  if (!summary || !*summary) return true;
  std::ofstream f(summary, std::ios::app);
  if (!(f << markdown << "\n")) {
    if (error) *error = std::string("cannot append to $GITHUB_STEP_SUMMARY file ") + summary;
    return false;
  }
  return true;
}

}  // namespace dsv4::eval
