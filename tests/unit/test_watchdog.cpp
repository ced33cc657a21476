// The watchdog acts while the recording thread is busy: its checks run on
// their own thread, and what they post waits for the recording thread.
#include <doctest/doctest.h>

#include <poll.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <string>

#include "recorder/watchdog.h"

using flightrec::recorder::Watchdog;

TEST_CASE("watchdog checks act without the recording thread; what they post runs on it") {
  std::string error;
  Watchdog w(std::chrono::milliseconds(1), [&](const std::string& e) { error = e; });
  std::promise<void> acted;
  std::atomic<int> runs = 0;
  bool recorded = false;
  w.add([&] {
    if (++runs == 3) {
      acted.set_value();  // e.g. the kill, done here
      w.post([&] { recorded = true; });
      throw std::runtime_error("a check that fails");
    }
  });
  w.start();
  // This thread stands for a recording thread that is blocked: it does
  // nothing until the check has acted on its own.
  acted.get_future().wait();
  CHECK_FALSE(recorded);
  pollfd p{w.fd(), POLLIN, 0};
  REQUIRE(poll(&p, 1, 10000) == 1);  // readable: work was posted
  w.stop();
  int after_stop = runs;
  w.run_posted();
  CHECK(recorded);
  CHECK(error == "a check that fails");
  CHECK(runs == after_stop);  // stopped means no check runs any more
}
