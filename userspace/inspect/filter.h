#pragma once
// Which entries a reader asked for (query's filters, summary's and
// report's too), matched against each entry's own canonical body: the
// store's index only skips blocks, and verify checks the index against the
// bodies, so a skip can never hide a match in a record that verifies.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "events/exe_table.h"
#include "ledger/canonical.h"
#include "ledger/store.h"

namespace flightrec::inspect {

// Violation levels, least severe first (docs/FORMAT.md: violation).
enum class Level { Info = 0, Alert = 1, Critical = 2 };
std::optional<Level> parse_level(const std::string& text);  // CRITICAL|ALERT|INFO, any case

// Wall time as nanoseconds since the epoch, from "YYYY-MM-DD", "YYYY-MM-DD
// HH:MM[:SS[.frac]]" or the same with 'T' (local time unless it ends in 'Z'
// or +HH:MM / -HH:MM), "@SECONDS" (Unix time), or "-N" with s, m, h or d
// (that long before now: -10m). nullopt when not one.
std::optional<int64_t> parse_wall_time(const std::string& text);

struct Criteria {
  std::vector<std::string> types;  // any of (syscall also means file_open, connect)
  std::optional<int64_t> pid;
  std::optional<int64_t> since_ns, until_ns;  // ts_real_ns within [since, until]
  std::vector<std::string> rules;  // rule_id equal to one, or under one ("network" covers "network.allow")
  std::optional<Level> min_level;  // entries with a level at or above it
  std::optional<std::string> path;  // a path member equal to it or under it, by whole components (policy::path_under)
  std::optional<std::string> comm;
  // Entries of processes running this executable (the latest exec's
  // filename, inherited through fork); a name without '/' matches the
  // file name alone, as ausearch -x does.
  std::optional<std::string> exec;

  bool empty() const;
};

// Every entry type a record holds (docs/FORMAT.md).
const std::vector<std::string>& entry_types();

class Matcher {
 public:
  explicit Matcher(Criteria c);
  // What the store may skip by its index without missing a match.
  ledger::EntryFilter store_filter(std::optional<int64_t> session) const;
  // Whether this entry (of `session`) is wanted. Call it for every entry
  // the store gives, in order: --exec follows exec and fork entries that
  // are not wanted, within each session.
  bool matches(int64_t session, const ledger::TopLevel& top);

 private:
  Criteria c_;
  events::ExeTable exe_;  // for --exec
  int64_t session_ = 0;   // whose processes exe_ describes
};

// The members that name a file, in the entry types that have them (each
// also as `<member>_b64` when its bytes are not UTF-8).
const std::vector<std::string>& path_members();
// A member that holds bytes: the string, or the decoded `<key>_b64`.
std::optional<std::string> bytes_member(const ledger::TopLevel& top, const std::string& key);

}  // namespace flightrec::inspect
