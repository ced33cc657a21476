#include "ledger/canonical.h"

#include <algorithm>

#include <charconv>
#include <cstring>

#include "common/text.h"

namespace flightrec::ledger {
namespace {

constexpr int kMaxDepth = 16;

// Whether any of the 8 bytes in w needs a look of its own inside a string:
// '"', '\\', a control character or a byte of a multi-byte sequence. Most
// of a record's strings are ASCII paths and names, skipped 8 bytes a time.
bool needs_look(uint64_t w) {
  constexpr uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  auto has_zero = [&](uint64_t v) { return (v - ones) & ~v & highs; };
  uint64_t below_space = (w - ones * 0x20) & ~w & highs;
  return (w & highs) || below_space || has_zero(w ^ (ones * '"')) || has_zero(w ^ (ones * '\\'));
}


struct Parser {
  explicit Parser(std::string_view text) : s(text) {}
  std::string_view s;
  size_t i = 0;
  std::string error;
  bool escaped = false;  // the last string had an escape (its raw text is not its bytes)

  bool fail(const char* why) {
    if (error.empty()) error = why;
    return false;
  }
  bool eat(char c) {
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }

  // A canonical string; its decoded bytes go to *out when out is given.
  bool string(std::string* out) {
    if (!eat('"')) return fail("expected a string");
    escaped = false;
    size_t run = i;
    bool multibyte = false;  // in this run: else it is ASCII, and UTF-8 by itself
    while (i < s.size()) {
      uint64_t word;
      if (i + 8 <= s.size() && (std::memcpy(&word, s.data() + i, 8), !needs_look(word))) {
        i += 8;
        continue;
      }
      auto c = static_cast<unsigned char>(s[i]);
      if (c == '"') {
        if (multibyte && !is_valid_utf8(s.substr(run, i - run))) return fail("string is not UTF-8");
        if (out) out->append(s.substr(run, i - run));
        ++i;
        return true;
      }
      if (c < 0x20) return fail("unescaped control character in a string");
      if (c != '\\') {
        multibyte = multibyte || c >= 0x80;
        ++i;
        continue;
      }
      if (multibyte && !is_valid_utf8(s.substr(run, i - run))) return fail("string is not UTF-8");
      if (out) out->append(s.substr(run, i - run));
      escaped = true;
      if (i + 1 >= s.size()) return fail("unterminated escape");
      char e = s[i + 1];
      char decoded;
      switch (e) {
        case '"': decoded = '"'; break;
        case '\\': decoded = '\\'; break;
        case 'b': decoded = '\b'; break;
        case 'f': decoded = '\f'; break;
        case 'n': decoded = '\n'; break;
        case 'r': decoded = '\r'; break;
        case 't': decoded = '\t'; break;
        case 'u': {
          // Only \u00xx (lowercase) for controls that have no short form.
          if (i + 6 > s.size() || s.substr(i + 2, 2) != "00") return fail("non-canonical \\u escape");
          auto hex = s.substr(i + 4, 2);
          auto h = hex_decode(hex);
          if (!h) return fail("non-canonical \\u escape");
          unsigned char v = static_cast<unsigned char>((*h)[0]);
          if (v >= 0x20 || v == '\b' || v == '\t' || v == '\n' || v == '\f' || v == '\r')
            return fail("non-canonical \\u escape");
          if (out) out->push_back(char(v));
          i += 6;
          run = i;
          continue;
        }
        default: return fail("non-canonical escape");
      }
      if (out) out->push_back(decoded);
      i += 2;
      run = i;
    }
    return fail("unterminated string");
  }

  bool number() {
    size_t start = i;
    eat('-');
    if (i >= s.size() || s[i] < '0' || s[i] > '9') return fail("expected a number");
    if (s[i] == '0' && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9')
      return fail("number with a leading zero");
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i < s.size() && (s[i] == '.' || s[i] == 'e' || s[i] == 'E'))
      return fail("entry holds a non-integer number");
    std::string_view text = s.substr(start, i - start);
    if (text == "-0") return fail("negative zero");
    if (text.size() < 19) return true;  // 18 digits and a sign fit in 64 bits
    if (text[0] == '-') {
      int64_t v;
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc()) return fail("integer out of 64-bit range");
    } else {
      uint64_t v;
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc()) return fail("integer out of 64-bit range");
    }
    return true;
  }

  bool value(int depth) {
    if (depth > kMaxDepth) return fail("nested too deeply");
    if (i >= s.size()) return fail("unexpected end");
    char c = s[i];
    if (c == '"') return string(nullptr);
    if (c == '{') return object(depth + 1, nullptr);
    if (c == '[') {
      ++i;
      if (eat(']')) return true;
      do {
        if (!value(depth + 1)) return false;
      } while (eat(','));
      return eat(']') || fail("expected ',' or ']'");
    }
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    return fail("only integers, strings, arrays and objects may appear");
  }

  bool object(int depth, TopLevel* top) {
    if (!eat('{')) return fail("expected an object");
    if (eat('}')) return true;
    // Keys compare by their decoded bytes; most have no escapes, so the
    // raw text is the decoded text and nothing is copied.
    std::string prev_buf, key_buf;
    std::string_view prev, key;
    bool first = true;
    do {
      size_t key_start = i + 1;
      key_buf.clear();
      if (!string(&key_buf)) return false;
      size_t key_end = i - 1;
      key = s.substr(key_start, key_end - key_start);
      bool key_escaped = escaped;  // `escaped` is the value's once the value is read
      if (key_escaped) key = key_buf;
      if (!first && !bytes_less(prev, key)) return fail(prev == key ? "duplicate key" : "keys are not sorted");
      first = false;
      if (!eat(':')) return fail("expected ':'");
      size_t vstart = i;
      if (!value(depth)) return false;
      if (top) {
        top->members.emplace_back(s.substr(key_start, key_end - key_start), s.substr(vstart, i - vstart));
        top->escaped_keys = top->escaped_keys || key_escaped;
      }
      if (key.data() == key_buf.data()) {
        prev_buf.swap(key_buf);
        prev = prev_buf;
      } else {
        prev = key;
      }
    } while (eat(','));
    return eat('}') || fail("expected ',' or '}'");
  }
};

}  // namespace

std::optional<std::string_view> TopLevel::raw(std::string_view key) const {
  if (escaped_keys) {  // raw key text then sorts otherwise than the keys it encodes
    for (const auto& [k, v] : members)
      if (k == key) return v;
    return std::nullopt;
  }
  // A canonical body's keys are in strictly increasing byte order.
  auto it = std::lower_bound(members.begin(), members.end(), key,
                             [](const auto& m, std::string_view k) { return bytes_less(m.first, k); });
  if (it == members.end() || it->first != key) return std::nullopt;
  return it->second;
}

std::optional<int64_t> TopLevel::integer(std::string_view key) const {
  auto v = raw(key);
  int64_t out;
  if (!v || v->empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || p != v->data() + v->size()) return std::nullopt;
  return out;
}

std::optional<uint64_t> TopLevel::unsigned_integer(std::string_view key) const {
  auto v = raw(key);
  uint64_t out;
  if (!v || v->empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || p != v->data() + v->size()) return std::nullopt;
  return out;
}

std::optional<std::string> TopLevel::string(std::string_view key) const {
  auto v = raw(key);
  if (!v || v->empty() || (*v)[0] != '"') return std::nullopt;
  Parser p(*v);
  std::string out;
  if (!p.string(&out)) return std::nullopt;
  return out;
}

std::string check_canonical(std::string_view body, TopLevel* top) {
  Parser p(body);
  if (top) {
    top->members.clear();
    top->escaped_keys = false;
  }
  if (!p.object(1, top)) return p.error.empty() ? "entry is not canonical JSON" : p.error;
  if (p.i != body.size()) return "trailing bytes after the entry";
  return "";
}

}  // namespace flightrec::ledger
