#include "common/huge_heap.h"

#include <malloc.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace flightrec {
namespace {

constexpr size_t kReserve = 32u << 20;
constexpr uintptr_t kHugePage = 2u << 20;
// glibc's defaults (DEFAULT_MMAP_THRESHOLD_MIN, DEFAULT_TRIM_THRESHOLD).
constexpr int kDefaultMmapThreshold = 128 * 1024;
constexpr int kDefaultTrimThreshold = 128 * 1024;

}  // namespace

HugeHeap::HugeHeap() {
  // Blocks below 64 MiB from the heap, and the heap not shrunk under 64
  // MiB of free space, so the reserve below stays mapped for them.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  advise_arena();
}

void HugeHeap::advise_arena() {
  // Grows the heap (brk reserves, touches nothing) and gives it back to
  // malloc's free top; the advice stays on the range.
  void* block = malloc(kReserve);
  if (!block) return;
  uintptr_t begin = (uintptr_t(block) + kHugePage - 1) & ~(kHugePage - 1);
  uintptr_t end = (uintptr_t(block) + kReserve) & ~(kHugePage - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  free(block);
}

HugeHeap::~HugeHeap() {
  mallopt(M_MMAP_THRESHOLD, kDefaultMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kDefaultTrimThreshold);
  malloc_trim(0);
}

}  // namespace flightrec
