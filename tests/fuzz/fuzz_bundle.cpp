// Exported bundles (JSON and JSON Lines) as an auditor verifies them
// (ledger/bundle.h verify_bundle): the input is the file.
#include <sys/mman.h>
#include <unistd.h>

#include "common/error.h"
#include "fuzz_input.h"
#include "ledger/bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = memfd_create("bundle", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (write(fd, data, size) == ssize_t(size)) {
    try {
      flightrec::ledger::verify_bundle("/proc/self/fd/" + std::to_string(fd), nullptr, std::nullopt);
    } catch (const flightrec::Error&) {
      // not a bundle at all: said, not crashed
    }
  }
  close(fd);
  return 0;
}
