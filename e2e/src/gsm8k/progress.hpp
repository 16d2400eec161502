// Progress reporting on stderr: a live line on a terminal, periodic plain lines otherwise.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace dsv4::eval {

class Progress {
 public:
  // total: items of the run; already_done: items finished before (resumed), not counted in the
  // rate; interval_s: seconds between plain lines (not a terminal), <= 0 disables them. `out`
  // defaults to stderr; `tty` (1/0) defaults to isatty(out).
  Progress(size_t total, size_t already_done, double interval_s, std::FILE* out = stderr,
           int tty = -1);
  // done and correct count resumed items too; elapsed is this invocation's wall time.
  void update(size_t done, size_t correct, double elapsed_s);
  void finish(size_t done, size_t correct, double elapsed_s);
  // The text of one progress line (no newline).
  std::string line(size_t done, size_t correct, double elapsed_s) const;

 private:
  size_t total_;
  double interval_s_;
  std::FILE* out_;
  bool tty_;
  size_t done_at_start_ = 0;
  double last_print_ = -1e300;
};

}  // namespace dsv4::eval
