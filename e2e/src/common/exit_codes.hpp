// Exit codes shared by every dsv4-eval command (and the scripts that call them).
#pragma once

namespace dsv4::eval {

enum Exit : int {
  kExitPass = 0,         // every gate passed
  kExitGateFailed = 1,   // a gate failed
  kExitUsage = 2,        // bad usage, config or data
  kExitCouldNotRun = 3,  // server unreachable, too many failed requests, I/O failure
};

}  // namespace dsv4::eval
