#pragma once
// Byte-string helpers for data that comes from the kernel: it may be any
// bytes, and only valid UTF-8 may go into a JSON string.
#include <optional>
#include <string>
#include <string_view>

namespace flightrec {

bool is_valid_utf8(std::string_view s);
std::string base64_encode(std::string_view bytes);
// Standard alphabet with padding; nullopt for anything else.
std::optional<std::string> base64_decode(std::string_view text);
std::optional<std::string> hex_decode(std::string_view text);
std::string hex_encode(std::string_view bytes);
// Appends s (valid UTF-8) as a JSON string escaped as RFC 8785 does.
void append_json_string(std::string& out, std::string_view s);

}  // namespace flightrec
