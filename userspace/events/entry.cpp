#include "events/entry.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <stdexcept>

#include "common/text.h"

namespace flightrec::events {

void Entry::set_bytes(std::string_view k, std::string_view bytes) {
  if (is_valid_utf8(bytes))
    set(k, std::string(bytes));
  else
    set(key(k, "_b64"), base64_encode(bytes));
}

const Value* Entry::get(std::string_view key) const {
  for (const auto& [k, v] : fields_)
    if (k == key) return &v;
  return nullptr;
}

int64_t Entry::int_or(std::string_view key, int64_t fallback) const {
  const Value* v = get(key);
  if (!v) return fallback;
  if (auto* i = std::get_if<int64_t>(v)) return *i;
  if (auto* u = std::get_if<uint64_t>(v)) return int64_t(*u);
  return fallback;
}

std::string Entry::string_or(std::string_view key, std::string fallback) const {
  const Value* v = get(key);
  if (v)
    if (auto* s = std::get_if<std::string>(v)) return *s;
  return fallback;
}

namespace {

// The canonical form is written through a raw cursor into space reserved
// from a bound that no value can exceed: this runs once per kernel event.
size_t string_bound(std::string_view s) { return json_string_bound(s.size()); }

size_t size_bound(const Value& v) {
  if (std::holds_alternative<int64_t>(v) || std::holds_alternative<uint64_t>(v)) return 20;
  if (auto* s = std::get_if<std::string>(&v)) return string_bound(*s);
  if (auto* ints = std::get_if<std::vector<int64_t>>(&v)) return 2 + ints->size() * 21;
  size_t n = 2;
  for (const auto& s : std::get<std::vector<std::string>>(v)) n += string_bound(s) + 1;
  return n;
}

template <typename T>
char* put_int(char* w, T v) {
  return std::to_chars(w, w + 20, v).ptr;
}

char* put_string(char* w, std::string_view s) {
  if (!is_valid_utf8(s)) throw std::logic_error("entry text is not UTF-8");
  return write_json_string(w, s);
}

// Keys are ours (literals or made from them); one that would need escaping is a bug.
// (A table and no branch per byte: this runs for every key of every entry.)
constexpr auto kPlainKeyByte = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x80; ++c) plain[size_t(c)] = c != '"' && c != '\\';
  return plain;
}();

char* put_key(char* w, std::string_view k) {
  bool plain = true;
  for (char ch : k) plain &= kPlainKeyByte[static_cast<unsigned char>(ch)];
  if (!plain) throw std::logic_error("entry key needs escaping");
  *w++ = '"';
  std::memcpy(w, k.data(), k.size());
  w += k.size();
  *w++ = '"';
  *w++ = ':';
  return w;
}

char* put_value(char* w, const Value& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return put_int(w, *i);
  if (auto* u = std::get_if<uint64_t>(&v)) return put_int(w, *u);
  if (auto* s = std::get_if<std::string>(&v)) return put_string(w, *s);
  *w++ = '[';
  if (auto* ints = std::get_if<std::vector<int64_t>>(&v)) {
    for (size_t i = 0; i < ints->size(); ++i) {
      if (i) *w++ = ',';
      w = put_int(w, (*ints)[i]);
    }
  } else {
    const auto& strs = std::get<std::vector<std::string>>(v);
    for (size_t i = 0; i < strs.size(); ++i) {
      if (i) *w++ = ',';
      w = put_string(w, strs[i]);
    }
  }
  *w++ = ']';
  return w;
}

// The keys' byte order for this entry, as indices into fields. Entries of
// one kind repeat their keys in the same order, so the order found for the
// last entry with as many fields is tried first and kept only if its keys
// are strictly increasing (which also rules out duplicates); otherwise the
// keys are sorted. The check makes the guess safe whatever the keys are.
const std::vector<uint16_t>& key_order(const std::vector<std::pair<std::string_view, Value>>& fields) {
  thread_local std::array<std::vector<uint16_t>, 64> last;
  thread_local std::vector<uint16_t> scratch;
  size_t n = fields.size();
  std::vector<uint16_t>& order = n < last.size() ? last[n] : scratch;
  auto key = [&](size_t i) { return fields[order[i]].first; };
  if (order.size() == n) {
    size_t i = 1;
    while (i < n && bytes_less(key(i - 1), key(i))) ++i;
    if (i >= n) return order;
  }
  order.resize(n);
  for (size_t i = 0; i < n; ++i) order[i] = uint16_t(i);
  // Keys are ASCII, so byte order equals RFC 8785's UTF-16 code unit order.
  std::sort(order.begin(), order.end(), [&](uint16_t a, uint16_t b) { return bytes_less(fields[a].first, fields[b].first); });
  for (size_t i = 1; i < n; ++i)
    if (key(i - 1) == key(i)) {
      std::string dup(key(i));
      order.clear();
      throw std::logic_error("duplicate entry key: " + dup);
    }
  return order;
}

}  // namespace

std::string Entry::canonical() const {
  std::string out;
  append_canonical(out);
  return out;
}

void Entry::append_canonical(std::string& out) const {
  if (fields_.size() > UINT16_MAX) throw std::logic_error("entry has too many fields");
  size_t bound = 2;
  for (const auto& f : fields_) bound += f.first.size() + 4 + size_bound(f.second);
  const std::vector<uint16_t>& order = key_order(fields_);
  size_t start = out.size();
  out.resize(start + bound);
  char* w = out.data() + start;
  try {
    *w++ = '{';
    for (size_t i = 0; i < order.size(); ++i) {
      if (i) *w++ = ',';
      w = put_key(w, fields_[order[i]].first);
      w = put_value(w, fields_[order[i]].second);
    }
    *w++ = '}';
  } catch (...) {
    out.resize(start);
    throw;
  }
  out.resize(size_t(w - out.data()));
}

}  // namespace flightrec::events
