#pragma once
// A session at a glance (aureport's role): counts by type, the programs it
// ran, the files it wrote, where it connected, what was denied, what was
// lost and how long it took. Built from the entries in one pass, in bounded
// memory whatever the session's size.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "ledger/canonical.h"

namespace flightrec::inspect {

class SessionSummary {
 public:
  explicit SessionSummary(int64_t session) : session_(session) {}
  void add(const ledger::TopLevel& entry);

  nlohmann::json to_json(size_t top = 20) const;
  // Several lines, each escaped (paths and names come from the session).
  std::string to_text(size_t top = 20) const;

 private:
  // At most this many distinct keys per table (paths are up to 4 KiB:
  // ~40 MiB at worst); what comes after is only counted.
  static constexpr size_t kMaxDistinct = 10000;
  // Rows by their columns (a path may hold any byte: no separator is safe).
  using Key = std::vector<std::string>;
  struct Table {
    std::map<Key, int64_t> counts;
    int64_t other = 0;  // past kMaxDistinct distinct keys
    void add(Key key, int64_t n = 1);
  };

  int64_t session_;
  int64_t entries_ = 0;
  int64_t first_ts_ = 0, last_ts_ = 0;
  bool ended_ = false;
  std::string end_reason_, host_, command_, policy_;
  std::optional<int64_t> exit_code_, exit_signal_;
  uint64_t lost_ = 0;
  int64_t gaps_ = 0;
  Table types_, executables_, written_, changed_, reached_, refused_, tls_hosts_, violations_;
  // The agent's turns (llm_call, tool_call entries): model calls by api and
  // model, their tokens, tool calls by name.
  Table models_, tools_;
  int64_t input_tokens_ = 0, output_tokens_ = 0, unanswered_tools_ = 0;
};

}  // namespace flightrec::inspect
