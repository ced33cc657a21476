// Backpressure, run's default: a storm of events slows the command down
// instead of opening a gap in the record an agent could act in.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/harness.h"

using nlohmann::json;
using namespace rt;

namespace {

int count_lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

struct StormRecord {
  long attempts = -1, failed = -1;  // as big_record_storm counted them
  int lost = 0, target_opens = 0, target_violations = 0, braked_thaws = 0;
};

// big_record_storm THREADS x OPENS in a run of the agent policy, opening
// /etc/shadow (hidden from the sandbox: each open is denied) at every 50th.
StormRecord big_record_storm(TempDir& dir, const std::vector<std::string>& run_args, int threads, int opens) {
  std::string work = dir.file("work");
  std::filesystem::create_directories(work);
  std::filesystem::copy_file(BIG_RECORD_STORM_BIN, work + "/big_record_storm",
                             std::filesystem::copy_options::overwrite_existing);
  std::string db = dir.file("storm.db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
  std::vector<std::string> args = {FLIGHTREC_BIN, "run", "--db", db};
  args.insert(args.end(), run_args.begin(), run_args.end());
  args.insert(args.end(), {"--", "./big_record_storm", "/etc/shadow", std::to_string(threads), std::to_string(opens)});
  Result r = run_in(work, args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  StormRecord out;
  REQUIRE(std::sscanf(r.out.c_str(), "attempts %ld failed %ld", &out.attempts, &out.failed) == 2);
  out.lost = count_lines(rt::flightrec({"query", "--db", db, "--json", "--type", "lost"}).out);
  std::istringstream opened(rt::flightrec({"query", "--db", db, "--json", "--type", "file_open"}).out);
  for (std::string line; std::getline(opened, line);)
    out.target_opens += json::parse(line).value("path", "") == "/etc/shadow";
  std::istringstream violations(rt::flightrec({"query", "--db", db, "--json", "--type", "violation"}).out);
  for (std::string line; std::getline(violations, line);)
    out.target_violations += json::parse(line).value("path", "") == "/etc/shadow";
  std::istringstream thaws(rt::flightrec({"query", "--db", db, "--json", "--type", "thaw"}).out);
  for (std::string line; std::getline(thaws, line);)
    out.braked_thaws += json::parse(line).value("detail", "").find("the kernel stopped") != std::string::npos;
  return out;
}

}  // namespace

TEST_CASE("backpressure by default: a stat() storm from 4 threads never hides the open a fifth thread makes") {
  REQUIRE(is_root());
  TempDir dir;
  std::string work = dir.file("work");
  std::filesystem::create_directory(work);
  std::filesystem::copy_file(STAT_STORM_BIN, work + "/stat_storm");
  std::ofstream(work + "/marker") << "m\n";
  // Default settings (the agent policy, TLS capture on). A record per trial,
  // read back by type only (each holds a few hundred thousand stat entries).
  const int trials = 100;
  int found = 0, with_loss = 0, paused = 0;
  for (int i = 0; i < trials; ++i) {
    std::string db = dir.file("s.db");
    Result r = run_in(work, {FLIGHTREC_BIN, "run", "--db", db, "--", "./stat_storm", "marker", "300"});
    INFO("trial " << i << ": " << r.err);
    REQUIRE(r.code == 0);
    bool opened = false;
    std::istringstream opens(rt::flightrec({"query", "--db", db, "--json", "--type", "file_open"}).out);
    for (std::string line; std::getline(opens, line);) {
      json e = json::parse(line);
      opened = opened || (e.value("path", "") == "marker" && e["ret"].get<int64_t>() >= 0);
    }
    found += opened;
    with_loss += !rt::flightrec({"query", "--db", db, "--json", "--type", "lost"}).out.empty();
    paused += !rt::flightrec({"query", "--db", db, "--json", "--type", "freeze"}).out.empty();
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
  }
  MESSAGE("marker open recorded in " << found << " of " << trials << " trials; " << paused
                                     << " were paused by backpressure; " << with_loss << " lost events");
  CHECK(found == trials);
}

// Records of ~4 KB from 256 threads fill the half of the ring above the
// freeze mark before the collector's watchdog can freeze the cgroup; the
// kernel's brake stops each process that writes past three quarters. Without
// it, 84 of 512 denied opens were in a gap in one of three trials here.
TEST_CASE("backpressure's brake: 256 threads writing 4 KB records leave no gap, and every denied open is in the record") {
  REQUIRE(is_root());
  TempDir dir;
  for (int trial = 0; trial < 3; ++trial) {
    StormRecord s = big_record_storm(dir, {}, 256, 125);
    INFO("trial " << trial);
    CHECK(s.attempts == 512);
    CHECK(s.failed == s.attempts);
    CHECK(s.lost == 0);
    CHECK(s.target_opens == s.attempts);
    CHECK(s.target_violations == s.attempts);
  }
}

// A ring of 256 KiB: 8 threads of 4 KB records cross three quarters of it
// long before the freezer acts, so the brake stops them every time; each is
// continued (the run ends), and the record says so.
TEST_CASE("backpressure's brake stops the writers past three quarters, continues them once drained, and says so") {
  REQUIRE(is_root());
  TempDir dir;
  StormRecord s = big_record_storm(dir, {"--ring-size", "256K"}, 8, 500);
  CHECK(s.attempts == 80);
  CHECK(s.lost == 0);
  CHECK(s.target_violations == s.attempts);
  CHECK(s.braked_thaws > 0);
  // With --on-loss continue there is no brake (and no freezer): the same
  // storm loses events, and says so.
  StormRecord c = big_record_storm(dir, {"--ring-size", "256K", "--on-loss", "continue"}, 8, 500);
  CHECK(c.braked_thaws == 0);
  CHECK(c.lost > 0);
}
