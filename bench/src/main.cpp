// dsv4-bench: the kernel families' benchmark rows on the device (see dsv4/bench/cli.hpp).
#include <iostream>

#include "dsv4/bench/cli.hpp"

int main(int argc, char** argv) { return dsv4::bench::main_cli(argc, argv, std::cout, std::cerr); }
