#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "events/decode.h"
#include "events/host_names.h"
#include "events/secrets.h"
#include "events/entry.h"
#include "events/tls.h"
#include "ledger/keys.h"
#include "ledger/store.h"
#include "ledger/writer.h"
#include "recorder/rate_limit.h"

namespace flightrec::recorder {

struct SessionMeta {
  std::string mode;                    // "run" | "watch"
  std::vector<std::string> command;    // run: argv; watch: empty
  std::vector<std::string> cgroups;    // observed cgroup paths
  std::optional<uint64_t> tasks_at_start;  // watch: tasks already in them, recorded from the start
  size_t ring_bytes = 0;
  std::vector<std::string> capture;    // hooks actually attached
  bool lite = false;                   // a lite session (docs/LITE.md): only some syscalls, counted
  uint64_t counts_interval_ms = 0;     // lite: syscall_counts entries this often
  std::vector<std::string> capture_absent;  // lite: calls with no tracepoint on this kernel (nor the call)
  std::vector<std::string> capture_refused;  // LSM hooks this kernel refused (tracepoints see those calls)
  std::string policy_name = "none";
  std::string policy_text;             // bound into the genesis entry with its SHA-256
  std::vector<std::string> policy_base_sources, policy_base_texts;  // its `extends:` chain, nearest first
  std::string work_dir;                // the policy's work directory (what replay judges paths by)
  std::string on_loss = "continue";
  const ledger::SigningKey* key = nullptr;  // signs checkpoints; nullptr: unsigned
  uint64_t checkpoint_entries = 1000;  // a checkpoint every this many entries...
  uint64_t checkpoint_ms = 1000;       // ...or this often, whichever comes first
  bool tls = false;                    // TLS plaintext capture (for the genesis entry)
  bool tls_redact = true;
  std::vector<std::string> tls_redact_headers = events::default_redacted_headers();
  // Path rules BPF-LSM enforces: a file_open entry's rule N is lsm_hidden[N-1].
  std::vector<std::string> lsm_hidden, lsm_exec;
  std::string policy_mode;             // "enforce" | "shadow" | "" (observe)
  std::vector<std::string> sandbox;    // what confinement was in force, for the genesis entry
  std::vector<std::string> env_passed, env_set;  // the names of the command's environment (never the values)
  bool redact = true;                  // credentials redacted from argv (events/secrets.h)
  bool agent_turns = false;            // llm_call and tool_call entries are derived (session/llm_calls.h)
  std::vector<std::string> redact_prefixes;  // the policy's own credential prefixes
  uint64_t tls_chunk = 16384, tls_cap = 262144;
  uint64_t record_rate = 0;            // limits.record_rate: plain syscall entries per second (0: all)
  // flightrecd: the watch rule that chose the cgroup, and what the
  // kubelet's cgroup names say of it ("" when they say nothing).
  std::string watch_rule, pod_uid, container_id, qos_class, container_runtime;
  // flightrecd, after a rotation: the record this one continues.
  std::string previous_record, previous_origin, previous_head;
  // Told of every entry and checkpoint once committed (fleet shipping); may be null.
  std::shared_ptr<ledger::SealedSink> sink;
};

// The paths e names, for its block's path index: what query --path and
// verify read from its canonical form (ledger::entry_path_hashes), taken
// from its fields without a parse. scratch holds the hashes.
ledger::SessionWriter::Paths entry_paths(const events::Entry& e, std::vector<uint64_t>& scratch);

class Recorder {
 public:
  // Creates the session and writes its session_start entry.
  Recorder(ledger::Store& store, const SessionMeta& meta);

  int64_t session() const { return writer_.session(); }
  int64_t entries() const { return writer_.count(); }
  uint64_t lost_total() const { return lost_total_; }
  uint64_t last_checkpoint_mono_ns() const { return last_checkpoint_ns_; }
  uint64_t entries_after_checkpoint() const { return uint64_t(writer_.count()) - writer_.checkpointed(); }
  const std::string& origin() const { return origin_; }
  // Connects and sends to an address a name was answered with get the name
  // ("host"): from the DNS answers the session's processes received (its
  // own), or from `names` (the session's resolver's, which outlives the
  // recorder's use of it; nullptr: its own again).
  void set_host_names(events::HostNames* names) { ctx_.names = names ? names : &answered_; }
  // A command line (NUL-separated) into e as exec entries carry theirs:
  // credentials redacted as the session redacts them.
  void set_argv(events::Entry& e, std::string_view block) const { events::set_argv(e, block, ctx_); }
  // The chain value of the last entry, hex (after finish()).
  std::string head_hex() { return ledger::to_hex(writer_.head()); }

  // Decodes one ring-buffer record and writes its entry. Returns the entry
  // (valid until the next call), or nullptr when it was left out (the
  // rate limit) or could not be encoded (a malformed entry says so).
  const events::Entry* on_record(const void* data, size_t size);
  // Compares the kernel's per-CPU drop counters with the last look and
  // records a "lost" entry when any grew.
  void note_drops(const std::vector<uint64_t>& per_cpu, uint64_t program_misses);
  // For a session that starts on programs already running: what the
  // counters say now was lost before it, not in it.
  void count_drops_from(const std::vector<uint64_t>& per_cpu, uint64_t program_misses);
  void note_cgroup_gone(const std::string& path);
  // An entry flightrec writes about the session itself (freeze, thaw, ...).
  void note(const char* type, const std::string& detail);
  // Entries flightrec writes with fields of their own (violations, file
  // changes): make one, set its fields, record it.
  events::Entry own_entry(const char* type) const;
  // The same for an entry about what a process did (a violation): its ids
  // and comm are that process's, taken from the kernel entry judged.
  events::Entry entry_about(const char* type, const events::Entry& subject) const;
  void record_own(events::Entry& e);
  // Checkpoint now if entries or time since the last one call for it.
  void checkpoint_if_due();
  void flush_if_due();
  void flush() { writer_.flush(); }
  // Writes session_end and closes the session row.
  void finish(int64_t exit_status, const std::string& reason);

 private:
  // Adds seq and session, seals and queues e. An entry that cannot be
  // encoded is replaced by a "malformed" one (returns false).
  bool append(events::Entry& e, int64_t pid, std::optional<size_t> record_size = std::nullopt);
  // The summary of the plain entries the rate limit left out, if any.
  void write_summary();

  ledger::Store& store_;
  ledger::SessionWriter writer_;
  const ledger::SigningKey* key_;
  std::string origin_;
  uint64_t checkpoint_entries_, checkpoint_ns_;
  uint64_t last_checkpoint_ns_ = 0;
  events::DecodeContext ctx_;
  events::HostNames answered_;  // what the session's DNS answers said
  events::TlsStreams tls_;
  std::optional<events::SecretScrubber> secrets_;
  std::vector<uint64_t> drops_seen_;
  uint64_t misses_seen_ = 0;
  uint64_t drops_checked_ns_ = 0;
  uint64_t lost_total_ = 0;
  uint64_t last_flush_ns_ = 0;
  std::optional<RateLimiter> rate_;
  events::Entry last_;     // what on_record returned
  std::string canonical_;  // the entry being appended, reused
  std::vector<uint64_t> path_hashes_;  // the paths it names, for the block's index; reused
};

}  // namespace flightrec::recorder
