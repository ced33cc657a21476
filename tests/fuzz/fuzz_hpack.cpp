// HPACK header blocks (events/http2.h HpackDecoder) one after another on
// one decoder, its dynamic table kept between them. Input: blocks
// separated by the byte 0xA5 0x5A.
#include "events/http2.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  flightrec::events::HpackDecoder d;
  std::string_view b = in.rest;
  while (true) {
    size_t end = b.find("\xA5\x5A");
    std::vector<std::pair<std::string, std::string>> fields;
    bool cut = false;
    d.decode(b.substr(0, end), fields, &cut);
    if (end == std::string_view::npos) break;
    b.remove_prefix(end + 2);
  }
  flightrec::events::huffman_decode(in.rest, false);
  flightrec::events::huffman_decoded_length(in.rest);
  return 0;
}
