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
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ledger/writer.h"

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
// "INFO", "ALERT", "CRITICAL" (any case) -> Level; -1 if none of them.
int level_of(std::string_view name);

struct OutputStats {
  std::string kind, name;
  uint64_t sent = 0;       // handed to the remote (syslog) or acknowledged by it
  uint64_t dropped = 0;    // left out: the queue was full
  uint64_t queued = 0, queued_bytes = 0;
  uint64_t connects = 0;   // connections made (the first one and every reconnect)
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
  // Sends what is queued for at most `grace`, then stops.
  virtual void close(std::chrono::milliseconds grace) = 0;
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
  bool empty() const;
  // The entry types some output may send ({"*"}: every type), for a
  // recorder elsewhere that forwards its entries here.
  std::vector<std::string> wanted_types() const;

 private:
  mutable std::shared_mutex mu_;
  std::vector<std::unique_ptr<Output>> outputs_;
};

}  // namespace flightrec::ship
