#pragma once
// The outputs of one recorder process, fed by every session writer's
// commits (ledger::SealedSink):
//
//   session writers (one thread each) -> Hub -> each output's own queue
//                                            -> its thread -> the remote engine
//
// An output copies what it will send and returns; a slow or unreachable
// remote fills that output's queue, never the record's path.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ledger/writer.h"
#include "ship/connection.h"

namespace flightrec::ship {

// Which entries an output sends: by type (or all), and violations from a level up.
struct EntryFilter {
  static std::vector<std::string> default_types() { return {"genesis", "lost", "session_end", "violation"}; }
  bool all_types = false;
  std::vector<std::string> types = default_types();
  enum Level { Info = 0, Alert = 1, Critical = 2 };
  int min_level = Info;  // a violation below it is left out
  bool accepts(std::string_view type, std::string_view body) const;
  bool operator==(const EntryFilter&) const = default;
};
// A log's origin, flightrec/<host>/<32 hex digits> (docs/FORMAT.md): its 32
// hex digits, or "" when it is not one (at most 512 bytes, a host named).
std::string log_id(std::string_view origin);
// "INFO", "ALERT", "CRITICAL" (any case) -> Level; -1 if none of them.
int level_of(std::string_view name);

// One commit's entries and checkpoints in log order, as the outputs send
// them: each checkpoint right after the entry that completes it.
template <class OnEntry, class OnCheckpoint>
void in_log_order(std::span<const ledger::SealedEntry> entries, std::span<const ledger::SealedCheckpoint> checkpoints,
                  OnEntry on_entry, OnCheckpoint on_checkpoint) {
  size_t next = 0;
  auto checkpoints_through = [&](int64_t seq) {
    for (; next < checkpoints.size() && int64_t(checkpoints[next].tree_size) <= seq; ++next) on_checkpoint(checkpoints[next]);
  };
  for (const auto& e : entries) {
    checkpoints_through(e.seq - 1);
    on_entry(e);
  }
  checkpoints_through(INT64_MAX);
}

struct OutputStats {
  std::string kind, name;
  uint64_t sent = 0;       // handed to the remote (syslog) or acknowledged by it
  uint64_t dropped = 0;    // left out: the queue was full
  uint64_t queued = 0;
  uint64_t connects = 0;   // connections made (the first one and every reconnect)
  uint64_t spool_bytes = 0;  // on disk, not acknowledged yet (outputs with a spool)
  uint64_t spool_max = 0;    // its bound: past it, messages are dropped
  bool connected = false;
  std::string last_error;  // the last failure to connect or send ("" if none yet)
};

class Output {
 public:
  virtual ~Output() = default;
  // From any session writer's thread: keeps a copy of what it will send; never blocks.
  virtual void offer(const std::string& origin, int64_t session, std::span<const ledger::SealedEntry> entries,
                     std::span<const ledger::SealedCheckpoint> checkpoints) = 0;
  virtual const EntryFilter& filter() const = 0;
  virtual OutputStats stats() const = 0;
  // Something every session's record should say (its spool filled, or has
  // room again), once; "" when nothing.
  virtual std::string take_notice() { return ""; }
  // Sends what is queued for at most `grace`, then stops.
  virtual void close(std::chrono::milliseconds grace) = 0;
};

// An output with a thread of its own that sends: the stop, its grace, and the join, once.
class ThreadedOutput : public Output {
 public:
  OutputStats stats() const override;
  void close(std::chrono::milliseconds grace) override;

 protected:
  ThreadedOutput(std::string kind, std::string name);
  void start() { thread_ = std::thread([this] { run(); }); }  // last in the derived constructor
  virtual void run() = 0;
  virtual void fill(OutputStats&) const {}  // queue sizes, under mu_
  // Under mu_: asked to stop and the grace is spent.
  bool due() const { return stopping_ && std::chrono::steady_clock::now() >= stop_by_; }
  // Waits (under lock, on mu_) until `until`, or until due(); never past the stop's deadline.
  void pause(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point until);
  // Without mu_: connects `conn` when it is not connected (counted in the
  // stats); "" when it is, else why not.
  std::string connect_if_needed(std::unique_ptr<Connection>& conn, const std::string& host, uint16_t port,
                                const TlsSettings& tls);
  // Under mu_: the output's last failure, said on stderr once per new one
  // ("flightrecd: KIND output NAME (WHERE): WHY (retrying)").
  void note_failure(const std::string& why, const std::string& where, bool retrying);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point stop_by_;
  OutputStats stats_;

 private:
  std::mutex join_mu_;
  std::thread thread_;
  std::string said_;  // the last failure written to stderr
};

class Hub : public ledger::SealedSink {
 public:
  ~Hub() override { close(std::chrono::milliseconds(0)); }
  // The outputs from now on; the ones before are closed with `grace` to send what they hold.
  void replace(std::vector<std::unique_ptr<Output>> outputs, std::chrono::milliseconds grace);
  void close(std::chrono::milliseconds grace) { replace({}, grace); }
  void sealed(const std::string& origin, int64_t session, std::span<const ledger::SealedEntry> entries,
              std::span<const ledger::SealedCheckpoint> checkpoints) override;
  std::vector<OutputStats> stats() const;
  std::vector<std::string> take_notices();  // each output's, prefixed with its kind and name
  bool empty() const;
  // The entry types some output may send ({"*"}: every type), for a
  // recorder elsewhere that forwards its entries here.
  std::vector<std::string> wanted_types() const;

 private:
  mutable std::shared_mutex mu_;
  std::vector<std::unique_ptr<Output>> outputs_;
};

}  // namespace flightrec::ship
