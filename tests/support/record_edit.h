#pragma once
// What an attacker with write access to a record file can do to its entries:
// read them as stored, change the list (bodies, positions, leaves), and
// store it back as blocks, through the same block encoding flightrec uses.
// Tests use it to tamper with real records and check that verify notices.
#include <cstdint>
#include <string>
#include <vector>

namespace testsupport {

struct StoredEntry {
  int64_t session = 0, seq = 0;
  std::string type;
  int64_t pid = 0;
  std::string body;
  std::string leaf;  // the stored start of its leaf hash; empty: computed from the body when stored
};

// Every entry of the record, in (session, seq) order.
std::vector<StoredEntry> stored_entries(const std::string& db);

// Replaces every entry of the record by `entries`, one block each, at the
// positions they name. No chain value is stored (a reader then checks
// none); leaves are kept as given, or computed from the body where empty.
// The index says each entry's `type` and `pid` as given, and its block's
// time span is the body's ts_real_ns.
void store_entries(const std::string& db, const std::vector<StoredEntry>& entries);

}  // namespace testsupport
