#pragma once
// A recorder in another process (`flightrec run` whose session flightrecd
// serves) forwards what its writer committed to the daemon's outputs, one
// JSON line per commit on a connection of its own:
//
//   {"checkpoints":[[size,"note"],...],"entries":[[seq,"type","E","leaf hex"],...],
//    "origin":"flightrec/...","session":N}
//
// The daemon checks every line as it would a record (canonical entries,
// leaf hashes, seq in order, one origin and session per connection) before
// its outputs send anything: a client can put in its stream only what its
// own record could hold.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ledger/writer.h"
#include "ship/hub.h"

namespace flightrec::ship {

// The entries of types `types` ({"*"}: all) and every checkpoint, as lines
// ending in '\n' of about max_line bytes at most (a line holds at least
// one entry; a checkpoint goes on the line of the entry that completes
// it, or the first one after); none when there is nothing to forward.
std::vector<std::string> encode_forwarded(const std::string& origin, int64_t session,
                                          std::span<const ledger::SealedEntry> entries,
                                          std::span<const ledger::SealedCheckpoint> checkpoints,
                                          const std::vector<std::string>& types, size_t max_line = 1u << 20);

// One connection's lines, checked and handed to a hub.
class ForwardedStream {
 public:
  static constexpr size_t kMaxLine = 16u << 20;
  explicit ForwardedStream(std::shared_ptr<Hub> hub) : hub_(std::move(hub)) {}
  // One line (without '\n'); throws Error saying what is wrong with it (the caller closes the stream).
  void take(std::string_view line);

 private:
  std::shared_ptr<Hub> hub_;
  std::string origin_;
  int64_t session_ = -1, last_seq_ = 0;
  uint64_t last_checkpoint_ = 0;
};

// The sink a handed run's writer tells: encodes and writes each commit on
// fd (blocking, with a timeout). A daemon that stops reading is given up
// on (said once on stderr): the run's own record never waits for it.
class ForwardingSink : public ledger::SealedSink {
 public:
  ForwardingSink(int fd, std::vector<std::string> types) : fd_(fd), types_(std::move(types)) {}
  ~ForwardingSink() override;
  void sealed(const std::string& origin, int64_t session, std::span<const ledger::SealedEntry> entries,
              std::span<const ledger::SealedCheckpoint> checkpoints) override;

 private:
  int fd_;
  std::vector<std::string> types_;
};

}  // namespace flightrec::ship
