#pragma once
// Byte-string helpers for data that comes from the kernel: it may be any
// bytes, and only valid UTF-8 may go into a JSON string.
#include <string>
#include <string_view>

namespace flightrec {

bool is_valid_utf8(std::string_view s);
std::string base64_encode(std::string_view bytes);
std::string hex_encode(std::string_view bytes);

}  // namespace flightrec
