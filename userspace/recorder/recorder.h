#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "events/decode.h"
#include "events/entry.h"
#include "ledger/store.h"
#include "ledger/writer.h"

namespace flightrec::recorder {

struct SessionMeta {
  std::string mode;                    // "run" | "watch"
  std::vector<std::string> command;    // run: argv; watch: empty
  std::vector<std::string> cgroups;    // observed cgroup paths
  size_t ring_bytes = 0;
};

class Recorder {
 public:
  // Creates the session and writes its session_start entry.
  Recorder(ledger::Store& store, const SessionMeta& meta);

  int64_t session() const { return writer_.session(); }
  int64_t entries() const { return writer_.count(); }
  uint64_t lost_total() const { return lost_total_; }

  void on_record(const void* data, size_t size);   // one ring-buffer record
  // Compares the kernel's per-CPU drop counters with the last look and
  // records a "lost" entry when any grew.
  void note_drops(const std::vector<uint64_t>& per_cpu, uint64_t program_misses);
  void note_cgroup_gone(const std::string& path);
  void flush_if_due();
  void flush() { writer_.flush(); }
  // Writes session_end and closes the session row.
  void finish(int64_t exit_status, const std::string& reason);

 private:
  void append(events::Entry& e, int64_t pid);
  events::Entry own_entry(const char* type);  // an entry flightrec itself writes

  ledger::Store& store_;
  ledger::SessionWriter writer_;
  events::DecodeContext ctx_;
  std::vector<uint64_t> drops_seen_;
  uint64_t misses_seen_ = 0;
  uint64_t drops_checked_ns_ = 0;
  uint64_t lost_total_ = 0;
  uint64_t last_flush_ns_ = 0;
};

}  // namespace flightrec::recorder
