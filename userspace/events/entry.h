#pragma once
// One record entry and its canonical byte form: JSON, keys sorted by their
// bytes, no insignificant whitespace, UTF-8, integers only (the RFC 8785
// subset without floats). The entry's hash covers exactly these bytes; see
// docs/FORMAT.md.
#include <cstdint>
#include <forward_list>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace flightrec::events {

using Value = std::variant<int64_t, uint64_t, std::string, std::vector<int64_t>,
                           std::vector<std::string>>;

// Keys are string literals (or made by key()), so an entry is built
// without allocating per key: it is built once per kernel event.
class Entry {
 public:
  Entry() { fields_.reserve(32); }
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;
  Entry(Entry&&) = default;
  Entry& operator=(Entry&&) = default;
  // No fields, the room for them kept.
  void clear() {
    fields_.clear();
    keys_.clear();
    payload_.clear();
  }

  void set(std::string_view key, int64_t v) { fields_.emplace_back(key, v); }
  void set(std::string_view key, uint64_t v) { fields_.emplace_back(key, v); }
  void set(std::string_view key, uint32_t v) { set(key, uint64_t(v)); }
  void set(std::string_view key, int v) { set(key, int64_t(v)); }
  // Text must be valid UTF-8; use set_bytes for data from the kernel.
  void set(std::string_view key, std::string v) { fields_.emplace_back(key, std::move(v)); }
  void set(std::string_view key, const char* v) { set(key, std::string(v)); }
  void set(std::string_view key, std::vector<int64_t> v) { fields_.emplace_back(key, std::move(v)); }
  void set(std::string_view key, std::vector<std::string> v) { fields_.emplace_back(key, std::move(v)); }
  // Bytes of unknown encoding: a string under `key` when valid UTF-8,
  // otherwise base64 under `key` + "_b64".
  void set_bytes(std::string_view key, std::string_view bytes);
  // A key that is not a literal (e.g. "path" + "_truncated"), owned here.
  std::string_view key(std::string_view a, std::string_view b) {
    return keys_.emplace_front(std::string(a) + std::string(b));
  }

  const Value* get(std::string_view key) const;
  // Every field, in the order set.
  const std::vector<std::pair<std::string_view, Value>>& fields() const { return fields_; }
  // Typed reads of a field; the fallback when it is absent or of another type.
  int64_t int_or(std::string_view key, int64_t fallback = 0) const;
  std::string string_or(std::string_view key, std::string fallback = "") const;
  std::string type() const { return string_or("type"); }

  // The bytes a tls entry's data_b64 holds, kept beside it for the
  // observers that read them (the agent's turns), so they are not decoded
  // again. Never part of the entry's form.
  void set_payload(std::string bytes) { payload_ = std::move(bytes); }
  const std::string& payload() const { return payload_; }

  // Throws std::logic_error on a duplicate key or invalid UTF-8 (a bug).
  std::string canonical() const;
  // The same, appended to out (left as it was after a throw).
  void append_canonical(std::string& out) const;

 private:
  std::vector<std::pair<std::string_view, Value>> fields_;
  // Stable storage for made keys; a forward_list allocates nothing until
  // used (a deque allocates on construction, once per kernel event).
  std::forward_list<std::string> keys_;
  std::string payload_;
};


}  // namespace flightrec::events
