// dsv4-replay entry point.
#include <iostream>

#include "dsv4/replay/replay.hpp"

int main(int argc, char** argv) { return dsv4::replay::main_cli(argc, argv, std::cout, std::cerr); }
