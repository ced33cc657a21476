#include "support/record_edit.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "ledger/block.h"
#include "ledger/canonical.h"
#include "ledger/path_index.h"
#include "ledger/store.h"

using namespace flightrec::ledger;

namespace testsupport {

std::vector<StoredEntry> stored_entries(const std::string& db) {
  Store store(db, Store::Mode::Read);
  std::vector<StoredEntry> out;
  store.for_each_entry({}, [&](const EntryRow& e) {
    out.push_back({e.session, e.seq, e.type, e.pid, e.body, e.leaf});
    return true;
  });
  return out;
}

void store_entries(const std::string& db, const std::vector<StoredEntry>& entries) {
  Store store(db, Store::Mode::Write);
  if (sqlite3_exec(store.handle(), "DELETE FROM blocks", nullptr, nullptr, nullptr) != SQLITE_OK)
    throw std::runtime_error("cannot delete blocks");
  BlockBuilder builder;
  store.begin();
  for (const auto& e : entries) {
    Hash leaf = leaf_hash(e.body);
    std::copy_n(e.leaf.begin(), std::min(e.leaf.size(), leaf.size()), leaf.begin());
    // The block's time span from the body, as the recorder's index has it:
    // an editor using flightrec's own code keeps the index consistent.
    auto body = nlohmann::json::parse(e.body, nullptr, false);
    int64_t ts = body.is_object() && body.contains("ts_real_ns") && body["ts_real_ns"].is_number_integer()
                     ? body["ts_real_ns"].get<int64_t>()
                     : 0;
    // Its paths too, read as verify reads them (all paths where the body is
    // not canonical: such an entry fails verify for its own sake).
    TopLevel top;
    std::vector<uint64_t> paths;
    bool all = !check_canonical(e.body, &top).empty() || !entry_path_hashes(top, paths, kMaxPathHashes);
    builder.add(e.type, e.pid, ts, leaf, e.body, paths, all);
    BlockRow row = builder.seal(e.session, e.seq, kChainStart);
    row.chain.clear();
    store.insert_block(row);
  }
  store.commit();
}

}  // namespace testsupport
