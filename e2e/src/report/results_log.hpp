// Append-only JSONL result logs: one JSON object a line, flushed as written, read back for
// --resume.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/percentile.hpp"

namespace dsv4::eval {

// A log line that is not valid (not at the very end): the message names the file and line.
struct LogError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class JsonlWriter {
 public:
  JsonlWriter() = default;
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;
  // Opens `path` for appending (append = true) or truncates it; returns "" or an error.
  std::string open(const std::string& path, bool append);
  // Writes one line (every registered secret written as ***) and flushes it to the kernel (it
  // survives a kill of this process).
  bool write(const nlohmann::json& record);
  void close();
  const std::string& path() const { return path_; }

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

struct JsonlContents {
  std::vector<nlohmann::json> records;
  std::vector<size_t> lines;  // 1-based line number of each record
  size_t good_bytes = 0;      // length of the well-formed prefix
  bool dropped_tail = false;  // the last line was cut short (an interrupted write) and is ignored
};

// Reads a log; a missing file gives no records. A last line without its newline or not parseable
// is an interrupted write: dropped (dropped_tail). Any other bad line throws LogError.
JsonlContents read_jsonl(const std::string& path);

// Shrinks a file to `size` bytes (drops an interrupted last line before appending).
bool truncate_file(const std::string& path, size_t size);

double mean(const std::vector<double>& values);

}  // namespace dsv4::eval
