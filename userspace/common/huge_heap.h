#pragma once
// Page faults are dear where flightrec runs: ~10 us each in our VMs (PVM
// guests), against well under 1 us on bare metal. libbpf's load of the
// skeleton parses the kernel's BTF into ~12 MB of fresh heap: ~3000 faults,
// ~20-30 ms of every session's start. While a HugeHeap lives, large blocks
// come from the main heap, whose next 32 MiB are advised into 2 MiB pages
// (transparent huge pages, "madvise" mode, Debian's default; elsewhere
// nothing changes); when it goes, the defaults are back and the freed heap
// is returned to the kernel, so the recorder's RSS does not keep it.
namespace flightrec {

class HugeHeap {
 public:
  HugeHeap();
  ~HugeHeap();
  // The same advice for the calling thread's own malloc arena (a thread
  // other than the main one allocates from another heap), while a
  // HugeHeap lives.
  static void advise_arena();
  HugeHeap(const HugeHeap&) = delete;
  HugeHeap& operator=(const HugeHeap&) = delete;
};

}  // namespace flightrec
