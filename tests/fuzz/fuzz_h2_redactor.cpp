// The HTTP/2 credential redactor (events/http2.h Http2Redactor), which
// rewrites a traced program's header blocks in place: cut in chunks, with
// gaps. Input: [flags][chunk size][bytes...]; flags bit 0: the client's
// side, bit 1: leave out every 5th chunk. A rewrite never changes a length.
#include <cstdlib>

#include "events/http2.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  uint8_t flags = in.byte(), step = in.byte();
  flightrec::events::Http2Redactor r(flags & 1);
  const std::vector<std::string> secret = {"authorization", "x-api-key", "cookie"};
  std::vector<std::string> names;
  std::vector<flightrec::events::Http2Headers> blocks;
  feed_chunks(in.rest, step, flags & 2, [&](size_t at, std::string_view chunk, size_t) {
    std::string part(chunk);
    r.feed(at, part, secret, names, blocks);
    if (part.size() != chunk.size()) abort();
  });
  return 0;
}
