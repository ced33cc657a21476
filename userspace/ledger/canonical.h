#pragma once
// A one-pass checker for the canonical entry form (docs/FORMAT.md §1) that
// also hands back the top-level members, without building a document:
// verification reads every entry, so this is on its hot path.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flightrec::ledger {

class TopLevel {
 public:
  // Raw JSON text of a member's value, or nullopt. Members are those of a
  // body check_canonical accepted: sorted, so this is a binary search.
  std::optional<std::string_view> raw(std::string_view key) const;
  std::optional<int64_t> integer(std::string_view key) const;
  std::optional<uint64_t> unsigned_integer(std::string_view key) const;
  std::optional<std::string> string(std::string_view key) const;  // unescaped

  std::vector<std::pair<std::string_view, std::string_view>> members;  // raw key text, raw value
  bool escaped_keys = false;  // some key is written with an escape
};

// "" when `body` is canonical (then *top holds its members), else what is wrong.
std::string check_canonical(std::string_view body, TopLevel* top);

}  // namespace flightrec::ledger
