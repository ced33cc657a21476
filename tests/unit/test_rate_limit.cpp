// The record rate limit on synthetic entries: what is kept, what is
// counted, and the summary that says so.
#include <doctest/doctest.h>

#include "events/entry.h"
#include "recorder/rate_limit.h"

using flightrec::events::Entry;
using flightrec::recorder::RateLimiter;

namespace {

Entry syscall(int64_t pid, const char* name, int64_t nr, int64_t ret, uint64_t ts) {
  Entry e;
  e.set("type", "syscall");
  e.set("pid", pid);
  e.set("name", name);
  e.set("nr", nr);
  e.set("ret", ret);
  e.set("ts_mono_ns", ts);
  return e;
}

}  // namespace

TEST_CASE("the rate limit keeps N plain entries per second and counts the rest by process and syscall") {
  RateLimiter r(2);
  const uint64_t t0 = 5'000'000'000;
  CHECK_FALSE(r.roll(t0));
  CHECK(r.admit(syscall(10, "getppid", 110, 9, t0)));
  CHECK(r.admit(syscall(10, "getppid", 110, 9, t0 + 1)));
  CHECK_FALSE(r.admit(syscall(10, "getppid", 110, 9, t0 + 2)));
  CHECK_FALSE(r.admit(syscall(11, "read", 0, 5, t0 + 3)));
  CHECK_FALSE(r.admit(syscall(10, "getppid", 110, 9, t0 + 4)));
  // Never left out: a failure, a call with a path, a blocked call, an exec...
  CHECK(r.admit(syscall(10, "read", 0, -9, t0 + 5)));
  CHECK(r.admit(syscall(10, "openat", 257, 3, t0 + 6)));
  Entry blocked = syscall(10, "getppid", 110, 9, t0 + 7);
  blocked.set("blocked", 1);
  CHECK(r.admit(blocked));
  Entry exec;
  exec.set("type", "exec");
  CHECK(r.admit(exec));
  // Nor a call that is not noise, however plain its arguments.
  CHECK(r.admit(syscall(10, "setuid", 105, 0, t0 + 8)));
  CHECK(r.admit(syscall(10, "kill", 62, 0, t0 + 9)));
  CHECK_FALSE(r.roll(t0 + 999'999'999));  // same second
  CHECK(r.roll(t0 + 1'000'000'000));      // a new one: the summary first
  Entry s;
  REQUIRE(r.add_summary(s));
  CHECK(s.canonical() ==
        "{\"counts\":[2,1],\"first_mono_ns\":5000000002,\"last_mono_ns\":5000000004,\"limit_per_second\":2,"
        "\"names\":[\"getppid\",\"read\"],\"pids\":[10,11],\"rule_id\":\"limits.record_rate\",\"summarised\":3}");
  Entry none;
  CHECK_FALSE(r.add_summary(none));  // counted afresh
  CHECK(r.admit(syscall(10, "getppid", 110, 9, t0 + 1'000'000'001)));  // the new second's quota
}
