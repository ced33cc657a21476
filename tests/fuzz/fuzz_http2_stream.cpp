// One direction of an HTTP/2 connection, as the agent's turns put it back
// together from a traced program's TLS plaintext (agent/http2.h): cut in
// chunks of a chosen size, with bytes left out now and then (gaps).
// Input: [flags][chunk size][bytes...]; flags bit 0: the client's side,
// bit 1: leave out every 5th chunk.
#include "agent/http2.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  uint8_t flags = in.byte(), step = in.byte();
  flightrec::agent::Http2Stream s(flags & 1);
  std::vector<flightrec::agent::HttpMessage> out;
  feed_chunks(in.rest, step, flags & 2, [&](size_t at, std::string_view part, size_t n) {
    s.feed(at, part.size(), part, int64_t(n), n, out);
  });
  s.take_open(out);
  for (const auto& m : out) (void)m.header("host");
  return 0;
}
