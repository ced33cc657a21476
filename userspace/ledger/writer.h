#pragma once
// Appends one session's entries: assigns nothing (the caller put seq and
// session into the canonical bytes), hashes, chains, and stores them in
// batched transactions.
#include <cstdint>
#include <string>

#include "ledger/hash.h"
#include "ledger/store.h"

namespace flightrec::ledger {

class SessionWriter {
 public:
  SessionWriter(Store& store, int64_t session) : store_(store), session_(session) {}
  ~SessionWriter();

  int64_t session() const { return session_; }
  int64_t next_seq() const { return count_ + 1; }
  int64_t count() const { return count_; }
  const Hash& head() const { return head_; }
  size_t pending() const { return pending_; }

  // `canonical` must carry "seq": next_seq() and "session": session().
  void append(const std::string& canonical, const std::string& type, int64_t pid, int64_t tid,
              int64_t ts_mono_ns);
  void flush();  // commit the open batch

 private:
  Store& store_;
  int64_t session_;
  int64_t count_ = 0;
  Hash head_ = kChainStart;
  size_t pending_ = 0;
  EntryRow row_;
};

}  // namespace flightrec::ledger
