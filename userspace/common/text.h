#pragma once
// Byte-string helpers for data that comes from the kernel: it may be any
// bytes, and only valid UTF-8 may go into a JSON string.
#include <optional>
#include <string>
#include <string_view>

namespace flightrec {

bool is_valid_utf8(std::string_view s);
// a < b by unsigned bytes, inline: canonical keys are sorted and checked
// with it once per entry, where memcmp calls showed in profiles.
inline bool bytes_less(std::string_view a, std::string_view b) {
  size_t n = a.size() < b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[i]);
  return a.size() < b.size();
}
// s made safe for a terminal or a log line, one line of text: backslash,
// newline, CR and tab as \\ \n \r \t; other controls (C0, DEL, C1, bidi and
// invisible format characters) as \u{XXXX}; bytes that are not UTF-8 as
// \xNN. Printable text is unchanged.
std::string printable(std::string_view s);
std::string base64_encode(std::string_view bytes);
// Standard alphabet with padding; nullopt for anything else.
std::optional<std::string> base64_decode(std::string_view text);
std::optional<std::string> hex_decode(std::string_view text);
std::string hex_encode(std::string_view bytes);
// Appends s (valid UTF-8) as a JSON string escaped as RFC 8785 does.
void append_json_string(std::string& out, std::string_view s);
// The same written at out, which has room for json_string_bound(s.size())
// bytes; returns the end. For callers that reserve once for many values.
char* write_json_string(char* out, std::string_view s);
constexpr size_t json_string_bound(size_t bytes) { return 6 * bytes + 2; }  // \u00XX each, and quotes

}  // namespace flightrec
