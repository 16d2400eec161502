// Child processes of run-suite: logs, exit codes, bounded waits, and a stop that ends the whole
// process group (grandchildren and children that ignore SIGTERM included).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "helpers.hpp"
#include "process.hpp"

namespace dsv4::nightly {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(Process, LogsOutputAndReturnsTheExitCode) {
  test::TempDir dir;
  Process p = Process::start({{"sh", "-c", "echo to-out; echo to-err >&2; exit 3"},
                              {{"DSV4_TEST_VALUE", "v42"}},
                              dir / "log",
                              false,
                              ""});
  const auto rc = p.wait(10);
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 3);
  EXPECT_EQ(p.describe_exit(), "exit code 3");
  const std::string log = test::read_file(dir / "log");
  EXPECT_NE(log.find("to-out"), std::string::npos) << log;
  EXPECT_NE(log.find("to-err"), std::string::npos) << log;

  Process q = Process::start({{"sh", "-c", "echo $DSV4_TEST_VALUE; pwd"},
                              {{"DSV4_TEST_VALUE", "v42"}},
                              dir / "log2",
                              true,
                              dir.path()});
  EXPECT_EQ(q.wait(10).value_or(-1), 0);
  const std::string log2 = test::read_file(dir / "log2");
  EXPECT_NE(log2.find("v42\n" + dir.path()), std::string::npos) << log2;
}

TEST(Process, MissingProgramIsNamed) {
  test::TempDir dir;
  try {
    Process::start({{"dsv4-no-such-program"}, {}, dir / "log", false, ""});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("dsv4-no-such-program"), std::string::npos) << e.what();
  }
  EXPECT_EQ(find_program("sh", "/nonexistent:/bin:/usr/bin").empty(), false);
  EXPECT_EQ(find_program("sh", "/nonexistent"), "");
}

TEST(Process, WaitIsBoundedAndStopEndsTheGroup) {
  test::TempDir dir;
  const std::string pidfile = dir / "grandchild.pid";
  Process p = Process::start(
      {{"sh", "-c", "sleep 60 & echo $! > " + pidfile + "; wait"}, {}, dir / "log", false, ""});
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(p.wait(0.3).has_value());
  EXPECT_LT(seconds_since(t0), 5.0);
  for (int i = 0; i < 100 && test::read_file(pidfile).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const long grandchild = std::stol(test::read_file(pidfile));
  ASSERT_TRUE(test::process_alive(grandchild));
  const long leader = p.pid();
  EXPECT_TRUE(p.stop(5));
  EXPECT_FALSE(test::process_alive(leader));
  for (int i = 0; i < 100 && test::process_alive(grandchild); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(test::process_alive(grandchild)) << "the grandchild outlived the stop";
}

TEST(Process, StopKillsWhatIgnoresSigterm) {
  test::TempDir dir;
  Process p = Process::start({{"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"},
                              {},
                              dir / "log",
                              false,
                              ""});
  for (int i = 0; i < 100 && test::read_file(dir / "log").empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const long leader = p.pid();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(p.stop(0.5)) << "SIGTERM is ignored: the stop must need SIGKILL";
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_FALSE(test::process_alive(leader));
  EXPECT_EQ(p.exit_code(), 128 + SIGKILL);
}

}  // namespace
}  // namespace dsv4::nightly
