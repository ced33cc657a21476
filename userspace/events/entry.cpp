#include "events/entry.h"

#include <algorithm>
#include <charconv>
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

template <typename T>
void append_int(std::string& out, T v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, end);
}

void append_value(std::string& out, const Value& v) {
  if (auto* i = std::get_if<int64_t>(&v)) {
    append_int(out, *i);
  } else if (auto* u = std::get_if<uint64_t>(&v)) {
    append_int(out, *u);
  } else if (auto* s = std::get_if<std::string>(&v)) {
    if (!is_valid_utf8(*s)) throw std::logic_error("entry text is not UTF-8");
    append_json_string(out, *s);
  } else if (auto* ints = std::get_if<std::vector<int64_t>>(&v)) {
    out += '[';
    for (size_t i = 0; i < ints->size(); ++i) {
      if (i) out += ',';
      append_int(out, (*ints)[i]);
    }
    out += ']';
  } else {
    const auto& strs = std::get<std::vector<std::string>>(v);
    out += '[';
    for (size_t i = 0; i < strs.size(); ++i) {
      if (i) out += ',';
      if (!is_valid_utf8(strs[i])) throw std::logic_error("entry text is not UTF-8");
      append_json_string(out, strs[i]);
    }
    out += ']';
  }
}

// An upper bound of a value's canonical size, so the output is allocated once.
size_t size_bound(const Value& v) {
  if (std::holds_alternative<int64_t>(v) || std::holds_alternative<uint64_t>(v)) return 20;
  if (auto* s = std::get_if<std::string>(&v)) return s->size() + 16;
  if (auto* ints = std::get_if<std::vector<int64_t>>(&v)) return 2 + ints->size() * 21;
  size_t n = 2;
  for (const auto& s : std::get<std::vector<std::string>>(v)) n += s.size() + 17;
  return n;
}

}  // namespace

std::string Entry::canonical() const {
  std::string out;
  append_canonical(out);
  return out;
}

void Entry::append_canonical(std::string& out) const {
  using Field = std::pair<std::string_view, Value>;
  std::vector<const Field*> sorted;
  sorted.reserve(fields_.size());
  size_t bound = 2;
  for (const auto& f : fields_) {
    sorted.push_back(&f);
    bound += f.first.size() + 4 + size_bound(f.second);
  }
  // Keys are ASCII, so byte order equals RFC 8785's UTF-16 code unit order.
  std::sort(sorted.begin(), sorted.end(), [](const Field* a, const Field* b) { return bytes_less(a->first, b->first); });
  out.reserve(out.size() + bound);  // escapes may still grow it
  out += '{';
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i && sorted[i - 1]->first == sorted[i]->first)
      throw std::logic_error("duplicate entry key: " + std::string(sorted[i]->first));
    if (i) out += ',';
    append_json_string(out, sorted[i]->first);
    out += ':';
    append_value(out, sorted[i]->second);
  }
  out += '}';
}

}  // namespace flightrec::events
