#pragma once
// Appends one session's entries. The caller's thread only queues canonical
// entries; a writer thread of its own hashes and chains them (the chain is
// sequential by nature, and one thread keeps it so), updates the Merkle
// tree, signs checkpoints, packs the entries into compressed blocks and
// stores full batches in one transaction each. So neither hashing nor a
// slow disk (a WAL checkpoint's fsync) stalls the thread that drains the
// kernel's ring buffer, and the second core does the sealing.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ledger/block.h"
#include "ledger/checkpoint.h"
#include "ledger/hash.h"
#include "ledger/keys.h"
#include "ledger/merkle.h"
#include "ledger/sha256_many.h"
#include "ledger/store.h"

namespace flightrec::ledger {

// What one commit sealed, as the sink sees it: entries in seq order, and
// the checkpoints taken among them (a checkpoint of tree size s covers the
// entries up to seq s). Views into the writer's batch: valid during the call.
struct SealedEntry {
  int64_t seq;
  std::string_view type, body;  // body: the canonical form E (docs/FORMAT.md)
  Hash leaf;
};
struct SealedCheckpoint {
  uint64_t tree_size;
  std::string_view note;
};
// Told of everything a session writer commits, once it is committed: what
// leaves the host (fleet shipping) is never ahead of the record.
class SealedSink {
 public:
  virtual ~SealedSink() = default;
  // On the writer's thread, one call per commit, in order; must not block
  // for long (the session's sealing waits) and must not throw.
  virtual void sealed(const std::string& origin, int64_t session, std::span<const SealedEntry> entries,
                      std::span<const SealedCheckpoint> checkpoints) = 0;
};

class SessionWriter {
 public:
  // At most this many entries per hand-over to the writer thread, and this
  // many batches waiting; past that append() waits for the writer (the
  // ring buffer then fills, and backpressure or the drop counters act).
  static constexpr size_t kBatch = 4096;
  static constexpr size_t kMaxQueued = 8;
  static constexpr size_t kBatchBytes = kBatch * 384;  // at most this much room kept for the next batch

  SessionWriter(Store& store, int64_t session);
  ~SessionWriter();
  SessionWriter(const SessionWriter&) = delete;
  SessionWriter& operator=(const SessionWriter&) = delete;

  int64_t session() const { return session_; }
  // Before the first append: everything committed from then on is told to
  // sink, under the session's origin.
  void set_sink(std::shared_ptr<SealedSink> sink, std::string origin) {
    sink_ = std::move(sink);
    sink_origin_ = std::move(origin);
  }
  int64_t next_seq() const { return count_ + 1; }
  int64_t count() const { return count_; }
  uint64_t checkpointed() const { return checkpointed_; }  // tree size of the last checkpoint

  // `canonical` must carry "seq": next_seq() and "session": session(); type,
  // pid and ts feed the store's index and must be the body's own "type",
  // "pid" (0 if none) and "ts_real_ns" (0 if none): verify checks them, as
  // queries that skip by the index would miss an entry it misdescribes.
  // So must paths (the hashes of the paths it names, ledger/path_index.h);
  // without them they are read from canonical, which costs a parse.
  struct Paths {
    std::span<const uint64_t> hashes;
    bool all = false;  // a path with too many parts: its block matches every path
  };
  void append(std::string_view canonical, std::string_view type, int64_t pid, int64_t ts,
              std::optional<Paths> paths = std::nullopt);
  // A checkpoint of everything appended so far, signed if key (which must
  // outlive the writer); stored in the same transaction as the entries it covers.
  void checkpoint(const std::string& origin, const SigningKey* key);
  void submit();  // hand the open batch to the writer thread
  void flush();   // submit and wait until everything is committed; rethrows its errors
  Hash head();    // the chain value of the last entry stored (after flush())

 private:
  struct Pending {
    size_t offset, size;  // of the body in Batch::bodies
    std::string type;
    int64_t pid, ts;
    uint32_t paths_at, paths_count;  // its path hashes in Batch::path_hashes
    bool paths_all;
  };
  struct CheckpointRequest {
    size_t after;  // entries of the batch before it
    std::string origin;
    const SigningKey* key;
  };
  // The bodies side by side in one buffer: no allocation per entry on the
  // recording thread, and no free of it on the writer thread.
  struct Batch {
    std::string bodies;
    std::vector<Pending> entries;
    std::vector<uint64_t> path_hashes;
    std::vector<CheckpointRequest> checkpoints;
  };
  void run();
  void seal(Batch& batch, std::vector<BlockRow>& blocks, std::vector<CheckpointRow>& checkpoints,
            std::vector<SealedEntry>& sealed);
  void rethrow_failure();

  Store& store_;
  int64_t session_;
  // The caller's side.
  int64_t count_ = 0;
  uint64_t checkpointed_ = 0;
  Batch batch_;
  // The writer thread's side.
  Hash head_ = kChainStart;
  CompactTree tree_;
  int64_t sealed_ = 0;  // entries hashed so far
  BlockBuilder builder_;
  std::shared_ptr<SealedSink> sink_;  // set before the thread sees a batch
  std::string sink_origin_;

  // Its scratch for a batch's leaves, kept while batches are large.
  std::vector<HashInput> leaf_inputs_;
  std::vector<Hash> leaves_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  // Large batches' room, emptied by the writer thread for the next ones:
  // a busy session reuses its buffers instead of mapping fresh memory
  // (and faulting it in page by page) for every batch.
  static constexpr size_t kMaxSpare = 4;
  std::vector<Batch> spare_;
  bool busy_ = false;
  bool closing_ = false;
  std::exception_ptr failure_;
  std::thread thread_;
};

}  // namespace flightrec::ledger
