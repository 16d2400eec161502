// Progress lines: done/total, accuracy so far, requests per second, ETA.
#include "gsm8k/progress.hpp"

#include <unistd.h>

#include <cmath>

namespace dsv4::eval {

Progress::Progress(size_t total, size_t already_done, double interval_s, std::FILE* out, int tty)
    : total_(total), interval_s_(interval_s), out_(out), done_at_start_(already_done) {
  tty_ = tty >= 0 ? tty != 0 : ::isatty(::fileno(out)) != 0;
}

std::string Progress::line(size_t done, size_t correct, double elapsed_s) const {
  const size_t fresh = done >= done_at_start_ ? done - done_at_start_ : 0;
  const double rate = elapsed_s > 0 ? double(fresh) / elapsed_s : 0;
  const double eta = rate > 0 ? double(total_ - std::min(done, total_)) / rate : NAN;
  char buf[200];
  std::snprintf(buf, sizeof buf, "[gsm8k] %zu/%zu  accuracy %.4f  %.1f req/s  ETA %s", done, total_,
                done ? double(correct) / double(done) : 0.0, rate,
                std::isnan(eta) ? "?" : (std::to_string(int(std::ceil(eta))) + "s").c_str());
  return buf;
}

void Progress::update(size_t done, size_t correct, double elapsed_s) {
  if (tty_) {
    if (elapsed_s - last_print_ < 0.2) return;
    last_print_ = elapsed_s;
    std::fprintf(out_, "\r%s\x1b[K", line(done, correct, elapsed_s).c_str());
    std::fflush(out_);
    return;
  }
  if (interval_s_ <= 0) return;
  if (last_print_ < -1e299) last_print_ = 0;
  if (elapsed_s - last_print_ < interval_s_) return;
  last_print_ = elapsed_s;
  std::fprintf(out_, "%s\n", line(done, correct, elapsed_s).c_str());
  std::fflush(out_);
}

void Progress::finish(size_t done, size_t correct, double elapsed_s) {
  std::fprintf(out_, "%s%s\n", tty_ ? "\r" : "", line(done, correct, elapsed_s).c_str());
  std::fflush(out_);
}

}  // namespace dsv4::eval
