#pragma once
// Appends one session's entries. The caller's thread hashes and chains
// (the chain is sequential by nature); a writer thread of its own stores
// full batches in one transaction each, so a slow disk (a WAL checkpoint's
// fsync) never stalls the thread that drains the kernel's ring buffer.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ledger/checkpoint.h"
#include "ledger/hash.h"
#include "ledger/merkle.h"
#include "ledger/store.h"

namespace flightrec::ledger {

class SessionWriter {
 public:
  // At most this many entries per transaction, and this many full batches
  // waiting; past that append() waits for the disk (the ring buffer then
  // fills and the kernel's drop counters say so).
  static constexpr size_t kBatch = 4096;
  static constexpr size_t kMaxQueued = 8;

  SessionWriter(Store& store, int64_t session);
  ~SessionWriter();
  SessionWriter(const SessionWriter&) = delete;
  SessionWriter& operator=(const SessionWriter&) = delete;

  int64_t session() const { return session_; }
  int64_t next_seq() const { return count_ + 1; }
  int64_t count() const { return count_; }
  const Hash& head() const { return head_; }

  uint64_t checkpointed() const { return checkpointed_; }  // tree size of the last checkpoint

  // `canonical` must carry "seq": next_seq() and "session": session().
  void append(std::string canonical, const std::string& type, int64_t pid);
  // Signs (if key) a checkpoint of everything appended so far; it is stored
  // in the same transaction as the entries it covers.
  void checkpoint(const std::string& origin, const SigningKey* key);
  void submit();  // hand the open batch to the writer thread
  void flush();   // submit and wait until everything is committed; rethrows its errors

 private:
  void run();
  void rethrow_failure();

  Store& store_;
  int64_t session_;
  int64_t count_ = 0;
  Hash head_ = kChainStart;
  CompactTree tree_;
  uint64_t checkpointed_ = 0;
  struct Batch {
    std::vector<EntryRow> entries;
    std::vector<CheckpointRow> checkpoints;
  };
  Batch batch_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  bool busy_ = false;
  bool closing_ = false;
  std::exception_ptr failure_;
  std::thread thread_;
};

}  // namespace flightrec::ledger
