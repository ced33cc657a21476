// The lines a handed run forwards to flightrecd's outputs (ship/forward.h),
// one connection's stream: the daemon checks each as it would a record
// before anything is sent on.
#include "common/error.h"
#include "fuzz_input.h"
#include "ship/forward.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  flightrec::ship::ForwardedStream stream(std::make_shared<flightrec::ship::Hub>());
  std::string_view rest = in.rest;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    try {
      stream.take(line);
    } catch (const flightrec::Error&) {
      return 0;  // the daemon closes the stream here
    }
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  return 0;
}
