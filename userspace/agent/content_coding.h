#pragma once
// HTTP bodies as sent with Content-Encoding gzip, deflate, br or zstd (the
// codings model API clients ask for: node's fetch and Python's httpx send
// Accept-Encoding), decoded for reading. The body is the traced program's
// or its server's: a decompression bomb stops at `max` bytes, said.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "agent/http1.h"

namespace flightrec::agent {

// The body with every coding of `encoding` ("gzip", "br", "gzip, br", ...;
// "" or "identity": as is) undone, last applied first. nullopt with *why
// for an unknown coding, damaged data, or more than max bytes.
std::optional<std::string> decode_content(std::string_view encoding, std::string_view body, size_t max, std::string* why);

// A message's body as its Content-Encoding says (16 MiB at most); "" and
// *why when it cannot be read.
std::string body_of(const HttpMessage& m, std::string* why);

}  // namespace flightrec::agent
