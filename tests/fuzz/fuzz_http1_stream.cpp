// One direction of an HTTP/1.x connection (agent/http1.h), cut in chunks of
// a chosen size, with gaps; then each message's body decoded as its
// Content-Encoding says (agent/content_coding.h, bombs bounded).
// Input: [flags][chunk size][bytes...]; flags bit 1: leave out every 5th chunk.
#include "agent/content_coding.h"
#include "agent/http1.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  uint8_t flags = in.byte(), step = in.byte();
  flightrec::agent::Http1Stream s;
  std::vector<flightrec::agent::HttpMessage> out;
  feed_chunks(in.rest, step, flags & 2, [&](size_t at, std::string_view part, size_t n) {
    s.feed(at, part.size(), part, int64_t(n), n, out);
  });
  flightrec::agent::HttpMessage open;
  if (s.take_open(open)) out.push_back(std::move(open));
  for (const auto& m : out) {
    std::string why;
    flightrec::agent::body_of(m, &why);
  }
  return 0;
}
