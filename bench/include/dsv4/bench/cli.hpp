// dsv4-bench's command line: every family's benchmark rows, checked, timed, judged and reported.
#pragma once

#include <iosfwd>

namespace dsv4::bench {

// dsv4-bench [--family F]... [--shape SPEC]... [--torch | --peers FILE] [--out DIR] [--seed N]
//            [--reps N] [--jobs N] [--list] [--draw DIR]
// Exit codes: 0 every target met, 1 a target missed or an output wrong, 2 bad usage, 3 could not
// run (no GPU, no row measured, a target left unjudged). Tables go to stdout as rows are
// measured; `out` and `err` take --list and the errors.
int main_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace dsv4::bench
