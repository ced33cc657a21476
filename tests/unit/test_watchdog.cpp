// The watchdog acts while the recording thread is busy: its checks run on
// their own thread, and what they post waits for the recording thread.
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

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

TEST_CASE("a wake-up on the watched fd runs the checks at once, not at the next period") {
  // An hour's period: only the wake-ups can run the checks here (the
  // ring buffer's forced wake-up at the high-water mark, in a session).
  Watchdog w(std::chrono::hours(1), [](const std::string&) {});
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  REQUIRE(fd >= 0);
  w.wake_on(fd);
  std::atomic<int> runs = 0;
  std::promise<void> first, second;
  w.add([&] {
    int n = ++runs;
    if (n == 1) first.set_value();
    if (n == 2) second.set_value();
  });
  w.start();
  uint64_t one = 1;
  REQUIRE(write(fd, &one, sizeof(one)) == sizeof(one));
  REQUIRE(first.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  // Edge-triggered: still readable, but only a new wake-up runs them again.
  REQUIRE(write(fd, &one, sizeof(one)) == sizeof(one));
  REQUIRE(second.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  w.stop();  // returns at once, an hour before the period would have ended
  CHECK(runs == 2);
  close(fd);
}
