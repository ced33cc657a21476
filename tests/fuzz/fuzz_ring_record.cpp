// Ring-buffer records as the kernel hands them to the collector
// (events/decode.h), checked as if hostile: every record type, TLS chunks
// through the connection state (redaction, HTTP/1 and HTTP/2 summaries),
// argv through the credential scrubber. Input: records, each preceded by
// a 2-byte little-endian length.
#include "events/decode.h"
#include "events/entry.h"
#include "events/secrets.h"
#include "events/tls.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  static const flightrec::events::SecretScrubber secrets;
  flightrec::events::TlsStreams tls;
  flightrec::events::DecodeContext ctx{0, &tls, &secrets};
  flightrec::events::Entry e;
  while (in.rest.size() >= 2) {
    size_t n = size_t(in.byte()) | size_t(in.byte()) << 8;
    std::string_view record = in.rest.substr(0, n);
    std::string copy(record);  // its own allocation: a read past it is caught
    flightrec::events::decode_record(copy.data(), copy.size(), ctx, e);
    (void)e.canonical();
    in.rest.remove_prefix(record.size());
  }
  return 0;
}
