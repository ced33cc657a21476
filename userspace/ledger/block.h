#pragma once
// A block: consecutive entries of one session stored as one row, zstd
// compressed (docs/FORMAT.md §7). One row and one compression per ~1000
// entries instead of one row per entry is what lets the store keep pace
// with the kernel. A block also carries a small index (which types, which
// pids, what time span) so a filtered query skips blocks it cannot match
// without decompressing them. Nothing here is trusted by verification: it
// recomputes every hash from the entries' canonical bytes.
#include <zstd.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ledger/hash.h"
#include "ledger/path_index.h"

namespace flightrec::ledger {

// A block is sealed once it holds this many entries or raw bytes...
constexpr size_t kBlockMaxEntries = 1024;
constexpr size_t kBlockTargetBytes = 1 << 20;
// ...so one is never much larger; readers refuse a block that says it
// decompresses to more than this (a hostile record must not exhaust memory).
constexpr size_t kBlockMaxRawBytes = 64 << 20;
// Bytes of each entry's leaf hash kept in its block: enough to name the
// entry that was altered; the full chain value is kept once per block.
constexpr size_t kStoredLeafBytes = 4;

// One bit of a 64-bit Bloom-style set of pids.
uint64_t index_bit(int64_t pid);
// Whether a block's `types` (its distinct types, sorted, space-separated) holds type.
bool has_type(std::string_view types, std::string_view type);

struct BlockRow {
  int64_t session = 0;
  int64_t first_seq = 0;
  int64_t count = 0;
  std::string types;                // its distinct types, sorted, space-separated
  uint64_t pid_bits = 0;
  int64_t ts_min = 0, ts_max = 0;  // ts_real_ns of its entries (0 where an entry has none)
  std::string path_bits;           // the paths its entries name (ledger/path_index.h)
  std::string chain;               // 32 raw bytes: the chain value after its last entry
  std::string data;                // zstd frame of the entries (layout in FORMAT.md §7)
};

// Collects entries and seals them into a BlockRow.
class BlockBuilder {
 public:
  BlockBuilder();
  ~BlockBuilder();
  BlockBuilder(const BlockBuilder&) = delete;
  BlockBuilder& operator=(const BlockBuilder&) = delete;

  // path_hashes: the entry's paths as path_prefix_hashes gives them;
  // paths_all: one had too many parts, so the block's path index matches
  // every path. They must describe body: verify checks.
  void add(std::string_view type, int64_t pid, int64_t ts, const Hash& leaf, std::string_view body,
           std::span<const uint64_t> path_hashes, bool paths_all);
  bool empty() const { return count_ == 0; }
  bool full() const { return size_t(count_) >= kBlockMaxEntries || heads_.size() + bodies_.size() >= kBlockTargetBytes; }
  // Compresses what was added into a row and starts a new block.
  BlockRow seal(int64_t session, int64_t first_seq, const Hash& chain);

 private:
  ZSTD_CCtx* cctx_;
  std::string heads_, bodies_;  // the two halves of the layout
  std::vector<char> frame_;     // compressed into here, then copied to its row's size
  int64_t count_ = 0;
  std::vector<std::string> types_;  // distinct, few: a short vector beats a set
  uint64_t pid_bits_ = 0;
  int64_t ts_min_ = 0, ts_max_ = 0;
  PathFilter paths_;
};

// One entry as a block holds it. The views are valid during the callback.
struct BlockEntry {
  std::string_view type;
  int64_t pid = 0;
  std::string_view leaf_prefix;  // kStoredLeafBytes
  std::string_view body;
};

// Decompresses `data` (a block that says it holds `count` entries) and calls
// fn for each entry in order until it returns false. Throws Error saying
// what is wrong with a corrupt or hostile block. `scratch` is reused.
void read_block(std::string_view data, int64_t count, std::string& scratch,
                const std::function<bool(const BlockEntry&)>& fn);

}  // namespace flightrec::ledger
