// JSONL result logs and the small statistics used by the reports.
#include "report/results_log.hpp"

#include <unistd.h>

#include "http/process_setup.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

namespace dsv4::eval {

JsonlWriter::~JsonlWriter() { close(); }

std::string JsonlWriter::open(const std::string& path, bool append) {
  close();
  f_ = std::fopen(path.c_str(), append ? "ab" : "wb");
  if (!f_) return "cannot open '" + path + "' for writing";
  path_ = path;
  return "";
}

bool JsonlWriter::write(const nlohmann::json& record) {
  if (!f_) return false;
  std::string line =
      redact(redact_json(record).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  line.push_back('\n');
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size()) return false;
  return std::fflush(f_) == 0;
}

void JsonlWriter::close() {
  if (f_) std::fclose(f_);
  f_ = nullptr;
}

JsonlContents read_jsonl(const std::string& path) {
  JsonlContents out;
  std::ifstream f(path, std::ios::binary);
  if (!f) return out;
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  size_t pos = 0, line = 0;
  while (pos < text.size()) {
    ++line;
    const size_t nl = text.find('\n', pos);
    const bool last = nl == std::string::npos || nl + 1 == text.size();
    const std::string_view body(text.data() + pos,
                                (nl == std::string::npos ? text.size() : nl) - pos);
    if (nl == std::string::npos) {  // cut short: no newline
      out.dropped_tail = true;
      break;
    }
    if (body.find_first_not_of(" \t\r") != std::string_view::npos) {
      nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        if (last) {
          out.dropped_tail = true;
          break;
        }
        throw LogError(path + ":" + std::to_string(line) + ": not a JSON object: '" +
                       std::string(body.substr(0, 80)) + "'");
      }
      out.records.push_back(std::move(j));
      out.lines.push_back(line);
    }
    pos = nl + 1;
    out.good_bytes = pos;
  }
  return out;
}

bool truncate_file(const std::string& path, size_t size) {
  return ::truncate(path.c_str(), off_t(size)) == 0;
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

}  // namespace dsv4::eval
