#pragma once
// Options run and watch share: where the record goes, how it is sealed,
// and what to do when the kernel loses events.
#include <string>

#include "cli/options.h"
#include "session/plan.h"

namespace flightrec::cli {

struct SessionOptions {
  std::string db;
  std::string ring = "8M";               // watch: 16M (no backpressure: the ring is all the headroom)
  std::string key_dir;
  uint64_t checkpoint_entries = 1000;
  uint64_t checkpoint_ms = 1000;
  std::string on_loss = "backpressure";  // watch: continue
  std::vector<std::string> deny_paths, allow_exec;
  std::string redact = "on";
  std::string agent_turns = "on";
  std::string tls = "on", tls_redact = "on", tls_chunk = "16K", tls_cap = "256K";
  std::string entry_times = "on";        // watch: off
  std::vector<std::string> tls_redact_more;  // --tls-redact-header
  bool verbose = false;

  void add_to(po::options_description& desc);
  // The parsed values for the plan compiler (session/plan.h), which checks
  // them; throws UsageError for a size or count that does not parse.
  session::Settings settings() const;
};

}  // namespace flightrec::cli
