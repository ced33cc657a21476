#pragma once
// NATS JetStream output: every entry and checkpoint of every session, to
// PREFIX.HOST (HOST: this host's name, as the logs' origins name it) in a
// stream (made if absent, file storage, a 10-minute duplicate window).
//
// A message is a run of consecutive lines of one log's JSON Lines bundle
// (docs/FORMAT.md 4.2: each entry's E, each checkpoint as
// {"checkpoint":"<note>"} right after the entry that completes it), at
// most 256 KiB, from one commit of its writer. Its id is its place in
// the log ("<origin>#<first>-<last>", or "<origin>#c<size>" for
// checkpoints alone), so the server drops a message it holds already:
// what was published but not acknowledged before a failure is published
// again, cut at the same places (the spool keeps the messages whole).
// Headers: Flightrec-Origin, Flightrec-Session, Flightrec-First and
// Flightrec-Last (its entries' seqs; 0 and 0 for checkpoints alone).
//
//   offer (writer threads) -> spool on disk -> this output's thread -> JetStream
//
// The spool is the queue: a remote that is away for a while, or a daemon
// restart, loses nothing the spool could hold (its bound is spool_max; past
// it, messages are dropped, counted, and said in every session's record).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ship/hub.h"
#include "ship/spool.h"

namespace flightrec::ship {

struct JetStreamSettings {
  std::string name;
  std::string url;                  // nats://HOST:PORT (tls://... for TLS); several, comma-separated
  std::string stream = "FLIGHTREC";
  std::string subject_prefix = "flightrec";
  bool create_stream = true;        // make the stream if the server lacks it
  std::string ca_file;              // TLS: the CAs the server's certificate must chain to
  std::string spool_dir;            // "" -> the daemon's storage.dir/spool/NAME
  uint64_t spool_max = 1ull << 30;
  bool operator==(const JetStreamSettings&) const = default;
};

// The tree size of the checkpoint on the first line of a message's lines (0: none).
uint64_t checkpoint_size(std::string_view lines);
// PREFIX.HOST with every byte of host outside [A-Za-z0-9_-] as '_' (a
// subject token holds no '.', '*', '>' or space).
std::string jetstream_subject(const std::string& prefix, const std::string& host);

class JetStreamOutput : public ThreadedOutput {
 public:
  explicit JetStreamOutput(JetStreamSettings settings);  // opens the spool; throws Error
  ~JetStreamOutput() override { close(std::chrono::milliseconds(0)); }

  void offer(const std::string& origin, int64_t session, std::span<const ledger::SealedEntry> entries,
             std::span<const ledger::SealedCheckpoint> checkpoints) override;
  const EntryFilter& filter() const override { return filter_; }
  std::string take_notice() override;

 private:
  struct Connection;
  void run() override;
  void fill(OutputStats& s) const override {
    s.queued = spool_.pending();
    s.spool_bytes = spool_.bytes();
    s.spool_max = settings_.spool_max;
  }
  bool publish_batch(Connection& c);  // false: failed (read again from the last acknowledged)

  JetStreamSettings settings_;
  std::string subject_;
  EntryFilter filter_;  // every type: a log verifies only whole
  Spool spool_;
  bool full_ = false;  // under mu_: the spool refused messages since it last had room
  std::string notice_;
  std::string said_;
};

}  // namespace flightrec::ship
