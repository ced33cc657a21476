// A TLS ClientHello record as a traced program sends it (events/tls.h
// parse_client_hello), and request targets whose query the redactor reads.
#include "events/tls.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  flightrec::events::parse_client_hello(in.rest);
  std::vector<std::string> names;
  flightrec::events::redact_query(in.rest, &names);
  return 0;
}
