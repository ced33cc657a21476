#pragma once
// How a fuzz target reads its input: a few leading bytes choose the mode,
// the rest is the bytes under test. Targets never trust the input's size.
#include <cstddef>
#include <cstdint>
#include <string_view>

struct FuzzInput {
  std::string_view rest;
  FuzzInput(const uint8_t* data, size_t size) : rest(reinterpret_cast<const char*>(data), size) {}
  // The next byte (0 when none are left).
  uint8_t byte() {
    if (rest.empty()) return 0;
    uint8_t b = uint8_t(rest[0]);
    rest.remove_prefix(1);
    return b;
  }
};

// The bytes cut in chunks of `step` (0: one chunk), each handed to
// feed(offset, chunk, index) as a traced program's writes would come;
// with gaps, every 5th chunk is left out (bytes the record lacks).
template <class Feed>
void feed_chunks(std::string_view bytes, uint8_t step, bool gaps, Feed feed) {
  size_t chunk = step ? step : bytes.size() + 1, at = 0, n = 0;
  for (; !bytes.empty(); ++n) {
    std::string_view part = bytes.substr(0, chunk);
    if (!(gaps && n % 5 == 4)) feed(at, part, n);
    at += part.size();
    bytes.remove_prefix(part.size());
  }
}
