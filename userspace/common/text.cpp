#include "common/text.h"

#include <array>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace flightrec {

namespace {

// The length of the valid UTF-8 sequence at s[i] and its code point, or 0
// (overlong forms, surrogates and code points past U+10FFFF are invalid).
size_t utf8_at(std::string_view s, size_t i, uint32_t* cp_out) {
  uint8_t c = uint8_t(s[i]);
  size_t len;
  uint32_t cp;
  if (c < 0x80) { len = 1; cp = c; }
  else if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
  else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
  else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
  else return 0;
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    uint8_t cc = uint8_t(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
      (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
    return 0;
  *cp_out = cp;
  return len;
}

// Code points a terminal acts on rather than shows, or that a reader
// cannot see: C0 and C1 controls, DEL, and the invisible format and
// bidirectional controls that can make text read differently from what it
// is (the soft hyphen, the Arabic letter mark, the Mongolian vowel
// separator, zero-width and directional marks, line and paragraph
// separators, embeddings, overrides and isolates, word joiners, the byte
// order mark, interlinear annotations, and the tag characters that spell
// hidden ASCII, as in prompts smuggled to a model).
bool acts_on_terminal(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0xAD || cp == 0x61C || cp == 0x180E ||
         (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x206F) ||
         cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB) || (cp >= 0xE0000 && cp <= 0xE007F);
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  uint32_t cp;
  for (size_t i = 0, len; i < s.size(); i += len) {
    // Paths, names and comms are ASCII: eight bytes at a time until one is not.
    while (i + 8 <= s.size()) {
      uint64_t word;
      std::memcpy(&word, s.data() + i, sizeof(word));
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i == s.size()) break;
    if (uint8_t(s[i]) < 0x80) {  // the short tail of an ASCII string
      len = 1;
      continue;
    }
    if ((len = utf8_at(s, i, &cp)) == 0) return false;
  }
  return true;
}

std::string printable(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t len = utf8_at(s, i, &cp);
    if (len == 0) {  // not UTF-8: the byte
      uint8_t b = uint8_t(s[i++]);
      out += "\\x";
      out += hex[b >> 4];
      out += hex[b & 15];
      continue;
    }
    if (cp == '\\') out += "\\\\";
    else if (cp == '\n') out += "\\n";
    else if (cp == '\r') out += "\\r";
    else if (cp == '\t') out += "\\t";
    else if (acts_on_terminal(cp)) {
      char buf[16];
      snprintf(buf, sizeof(buf), "\\u{%04x}", unsigned(cp));
      out += buf;
    } else {
      out.append(s.substr(i, len));
    }
    i += len;
  }
  return out;
}

std::string base64_encode(std::string_view bytes) {
  static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 |
                 uint8_t(bytes[i + 2]);
    out += tbl[v >> 18];
    out += tbl[(v >> 12) & 63];
    out += tbl[(v >> 6) & 63];
    out += tbl[v & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (rest == 2) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += tbl[v >> 18];
    out += tbl[(v >> 12) & 63];
    out += rest == 2 ? tbl[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  // A table of the 64 digits (-1: none), and four digits to three bytes at a
  // time: TLS entries are decoded by every reader of plaintext.
  static const auto digits = [] {
    std::array<int8_t, 256> t;
    t.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[uint8_t(alphabet[i])] = int8_t(i);
    return t;
  }();
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out(text.size() / 4 * 3, '\0');
  char* o = out.data();
  const auto* in = reinterpret_cast<const uint8_t*>(text.data());
  size_t whole = text.empty() ? 0 : text.size() - 4;  // the last group may be padded
  for (size_t i = 0; i < whole; i += 4) {
    int a = digits[in[i]], b = digits[in[i + 1]], c = digits[in[i + 2]], d = digits[in[i + 3]];
    if ((a | b | c | d) < 0) return std::nullopt;
    uint32_t v = uint32_t(a) << 18 | uint32_t(b) << 12 | uint32_t(c) << 6 | uint32_t(d);
    *o++ = char(v >> 16);
    *o++ = char(v >> 8);
    *o++ = char(v);
  }
  if (!text.empty()) {
    size_t i = whole;
    int pad = (text[i + 3] == '=') + (text[i + 2] == '=');
    if (pad == 1 && text[i + 2] == '=') return std::nullopt;  // "x=x=" is not padding
    uint32_t v = 0;
    for (int k = 0; k < 4 - pad; ++k) {
      int d = digits[in[i + k]];
      if (d < 0) return std::nullopt;
      v |= uint32_t(d) << (18 - 6 * k);
    }
    // Canonical encodings only: the bits the padding drops must be zero.
    if ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff))) return std::nullopt;
    *o++ = char(v >> 16);
    if (pad < 2) *o++ = char(v >> 8);
    if (pad < 1) *o++ = char(v);
  }
  out.resize(size_t(o - out.data()));
  return out;
}

std::optional<std::string> hex_decode(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (text.size() % 2) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < text.size(); i += 2) {
    int hi = value(text[i]), lo = value(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += char(hi << 4 | lo);
  }
  return out;
}

std::string hex_encode(std::string_view bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    out += digits[uint8_t(c) >> 4];
    out += digits[uint8_t(c) & 15];
  }
  return out;
}

namespace {

uint64_t load8(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Whether any of eight bytes is a control character, '"' or '\\' (exact, by
// the bit tricks of "Bit Twiddling Hacks": has-zero-byte and has-less-than).
constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;
bool needs_escape(uint64_t v) {
  auto zero_byte = [](uint64_t x) { return (x - kOnes) & ~x & kHighs; };
  return (zero_byte(v ^ (kOnes * '"')) | zero_byte(v ^ (kOnes * '\\')) | ((v - kOnes * 0x20) & ~v & kHighs)) != 0;
}

}  // namespace

char* write_json_string(char* w, std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  *w++ = '"';
  size_t i = 0;
  while (i < s.size()) {
    size_t run = i;  // most strings need no escape: copy runs in one go
    while (run + 8 <= s.size() && !needs_escape(load8(s.data() + run))) run += 8;
    while (run < s.size()) {
      auto c = static_cast<unsigned char>(s[run]);
      if (c < 0x20 || c == '"' || c == '\\') break;
      ++run;
    }
    std::memcpy(w, s.data() + i, run - i);
    w += run - i;
    if (run == s.size()) break;
    auto c = static_cast<unsigned char>(s[run]);
    *w++ = '\\';
    switch (c) {
      case '"': *w++ = '"'; break;
      case '\\': *w++ = '\\'; break;
      case '\b': *w++ = 'b'; break;
      case '\f': *w++ = 'f'; break;
      case '\n': *w++ = 'n'; break;
      case '\r': *w++ = 'r'; break;
      case '\t': *w++ = 't'; break;
      default:
        std::memcpy(w, "u00", 3);
        w[3] = hex[c >> 4];
        w[4] = hex[c & 15];
        w += 5;
    }
    i = run + 1;
  }
  *w++ = '"';
  return w;
}

void append_json_string(std::string& out, std::string_view s) {
  size_t start = out.size();
  out.resize(start + json_string_bound(s.size()));
  out.resize(size_t(write_json_string(out.data() + start, s) - out.data()));
}

}  // namespace flightrec
