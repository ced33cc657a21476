// HugeHeap: while it lives, large blocks come from heap memory advised into
// huge pages; what they held is given back to the kernel when it goes.
#include <doctest/doctest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "common/huge_heap.h"
#include "files.h"

namespace {

// The VmFlags of the mapping that holds addr, from /proc/self/smaps.
std::string vm_flags_at(const void* addr) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  auto a = uintptr_t(addr);
  while (std::getline(smaps, line)) {
    uintptr_t lo, hi;
    char dash;
    std::istringstream range(line);
    if (line.find("VmFlags:") == 0) {
      if (inside) return line;
    } else if ((range >> std::hex >> lo >> dash >> hi) && dash == '-') {
      inside = a >= lo && a < hi;
    }
  }
  return "";
}

bool advised_huge(const void* addr) { return vm_flags_at(addr).find(" hg") != std::string::npos; }

// Whether the page at addr is in memory (an unmapped one is not).
bool resident(uintptr_t page) {
  unsigned char in = 0;
  return mincore(reinterpret_cast<void*>(page), 4096, &in) == 0 && (in & 1);
}

}  // namespace

TEST_CASE("huge heap: large blocks on huge-page-advised heap, returned to the kernel after" * doctest::skip(unit::kAsan)) {
  constexpr size_t kBlock = 8u << 20;
  uintptr_t middle;
  {
    flightrec::HugeHeap heap;
    char* block = static_cast<char*>(malloc(kBlock));
    REQUIRE(block);
    memset(block, 1, kBlock);
    middle = (uintptr_t(block) + kBlock / 2) & ~uintptr_t(4095);
    CHECK(advised_huge(block + kBlock / 2));
    CHECK(resident(middle));
    free(block);
  }
  // Freed and trimmed: the recorder's RSS does not keep start-up's memory.
  CHECK_FALSE(resident(middle));
}
