#pragma once
// `flightrec collect`: the central end of JetStream shipping. Pulls every
// host's messages (PREFIX.HOST) from the stream with a durable consumer,
// and keeps each session's log as a JSON Lines bundle (docs/FORMAT.md
// §4.2) under OUT/HOST/, verified as it grows: canonical entries in seq
// order, the hash chain, the Merkle tree, every checkpoint's root, chain
// and signature against the key pinned for that host in the config.
// Trust on first use is refused: a host without a pinned key, or a
// session whose genesis entry names another key, is rejected. A log that
// fails stays failed (nothing more is added to it) and says why.
// Acknowledged to the server only once written: a collect that stops
// resumes where it stopped, and what comes twice is recognised.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ledger/keys.h"

namespace flightrec::ship {

struct CollectSettings {
  std::string url;  // nats://HOST:PORT
  std::string stream = "FLIGHTREC", subject_prefix = "flightrec", durable = "flightrec-collect";
  std::string ca_file;
  std::map<std::string, ledger::VerifierKey> hosts;  // subject token -> the key its checkpoints must carry
  std::string out_dir;
  uint64_t idle_ms = 2000;  // stop after this long without a message (unless follow)
  bool follow = false;
};

struct LogReport {
  std::string origin, file;
  bool ok = true;
  std::string reason;         // why not ok
  int64_t entries = 0, checkpoints = 0, gaps = 0;
  uint64_t lost = 0, duplicates = 0;
  bool terminated = false;
  int64_t entries_after_checkpoint = 0;
  int64_t missing_from = 0;   // entries from this seq on have not come (0: none missing)
};

struct HostReport {
  std::string host;
  std::vector<LogReport> logs;
  uint64_t rejected = 0;      // messages refused before any log (no pinned key, malformed)
  std::string rejected_reason;
  bool ok() const;
};

// The collector's config (YAML, strict: FILE:LINE: key: problem):
//   url: nats://HOST:PORT
//   stream: FLIGHTREC            subject_prefix: flightrec      durable: flightrec-collect
//   tls: {ca: /path/ca.pem}
//   hosts:                       # subject token -> that host's verifier key file (flightrec.pub)
//     node-17: /etc/flightrec/fleet/node-17.pub
// Throws Error.
CollectSettings load_collect_config(const std::string& path);
CollectSettings parse_collect_config(const std::string& text, const std::string& source, const std::string& base_dir);

class Collector {
 public:
  explicit Collector(CollectSettings settings);
  ~Collector();
  // Pulls until `stop`, or (without follow) until idle_ms pass without a message. Throws Error.
  void run(const std::atomic<bool>& stop);
  // One message, as the stream holds it (headers by name). Public for the
  // tests of hostile messages; run() calls it.
  void take(const std::string& subject, const std::map<std::string, std::string>& headers, std::string_view payload);
  std::vector<HostReport> report();

 private:
  struct Log;
  struct Held;
  // The log a message of (host, origin) goes to; nullptr with `why` for a
  // refused message, nullptr alone for a log that has failed already.
  Log* log_for(const std::string& host, const std::string& origin, int64_t session, int64_t first, std::string& why);
  bool let_one_go();  // the least recently used log that holds nothing ahead leaves memory
  void settle_failed(Log& log);
  void refuse(const std::string& key, const std::string& why);
  LogReport report_of(Log& log, bool finish);

  CollectSettings settings_;
  std::unique_ptr<Held> held_;  // bytes held ahead of gaps, by host and in all
  std::map<std::string, std::map<std::string, std::unique_ptr<Log>>> logs_;  // host -> origin -> log in memory
  struct LetGo {
    int64_t session;
    uint64_t duplicates;
  };
  std::map<std::string, std::map<std::string, LetGo>> let_go_;               // host -> origin -> a log left in its file
  std::map<std::string, std::map<std::string, LogReport>> failed_;           // host -> origin -> how it failed
  std::map<std::string, HostReport> rejected_;                                // host (or subject) -> its refusals
  std::map<std::string, size_t> logs_by_host_;
  size_t logs_total_ = 0, resident_ = 0;
  uint64_t messages_ = 0;
};

}  // namespace flightrec::ship
