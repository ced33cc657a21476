#pragma once
// One record entry and its canonical byte form: JSON, keys sorted by their
// bytes, no insignificant whitespace, UTF-8, integers only (the RFC 8785
// subset without floats). The entry's hash covers exactly these bytes; see
// docs/FORMAT.md.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace flightrec::events {

using Value = std::variant<int64_t, uint64_t, std::string, std::vector<int64_t>,
                           std::vector<std::string>>;

class Entry {
 public:
  void set(std::string key, int64_t v) { fields_.emplace_back(std::move(key), v); }
  void set(std::string key, uint64_t v) { fields_.emplace_back(std::move(key), v); }
  void set(std::string key, uint32_t v) { set(std::move(key), uint64_t(v)); }
  void set(std::string key, int v) { set(std::move(key), int64_t(v)); }
  // Text must be valid UTF-8; use set_bytes for data from the kernel.
  void set(std::string key, std::string v) { fields_.emplace_back(std::move(key), std::move(v)); }
  void set(std::string key, const char* v) { set(std::move(key), std::string(v)); }
  void set(std::string key, std::vector<int64_t> v) { fields_.emplace_back(std::move(key), std::move(v)); }
  void set(std::string key, std::vector<std::string> v) {
    fields_.emplace_back(std::move(key), std::move(v));
  }
  // Bytes of unknown encoding: a string under `key` when valid UTF-8,
  // otherwise base64 under `key` + "_b64".
  void set_bytes(const std::string& key, std::string_view bytes);

  const Value* get(std::string_view key) const;
  std::string type() const;  // the "type" field, or ""

  // Throws std::logic_error on a duplicate key or invalid UTF-8 (a bug).
  std::string canonical() const;

 private:
  std::vector<std::pair<std::string, Value>> fields_;
};

// Appends s as a JSON string in canonical form (RFC 8785 escaping).
void append_json_string(std::string& out, std::string_view s);

}  // namespace flightrec::events
