// The lite call table (probe/lite_calls.cpp) against the syscall table the
// decoder names calls by: every entry a real x86-64 call, none twice, and
// the kinds the BPF side acts on where they belong.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "events/syscall_table.h"
#include "probe/lite_calls.h"

using namespace flightrec;

TEST_CASE("lite calls: real syscalls, each once, opens and execs of their own kind") {
  std::set<uint32_t> seen;
  for (const auto& c : probe::lite_calls()) {
    INFO(c.tracepoint);
    const auto* info = events::syscall_info(c.nr);
    REQUIRE(info);
    REQUIRE(info->name);
    // The tracepoint is named after the call but for umount2 (the kernel
    // defines it as umount).
    CHECK(std::string(c.tracepoint) == (c.nr == 166 ? std::string("umount") : std::string(info->name)));
    CHECK(seen.insert(c.nr).second);
    CHECK(c.nr < FR_SYSCALL_TABLE_SIZE);
    std::string name = info->name;
    bool open = name == "open" || name == "openat";
    bool exec = name == "execve" || name == "execveat";
    CHECK((c.kind == FR_LITE_OPEN) == open);
    CHECK((c.kind == FR_LITE_EXEC) == exec);
    CHECK((c.kind == FR_LITE_PRCTL) == (name == "prctl"));
  }
  // The hot data-path calls stay out: every task would pay for them.
  for (const char* hot : {"read", "write", "sendto", "recvfrom", "mmap", "newfstatat", "getppid", "clone", "ioctl"})
    CHECK(seen.count(*events::syscall_number(hot)) == 0);
}
