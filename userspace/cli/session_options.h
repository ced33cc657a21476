#pragma once
// Options run and watch share: where the record goes, how it is sealed,
// and what to do when the kernel loses events.
#include <memory>
#include <optional>
#include <string>

#include "cli/options.h"
#include "ledger/keys.h"
#include "probe/capture.h"
#include "recorder/recorder.h"

namespace flightrec::cli {

struct SessionOptions {
  std::string db;
  std::string ring = "16M";
  std::string key_dir;
  uint64_t checkpoint_entries = 1000;
  uint64_t checkpoint_ms = 1000;
  std::string on_loss = "backpressure";  // watch: continue
  std::vector<std::string> deny_paths, allow_exec;
  std::string tls = "on", tls_redact = "on", tls_chunk = "16K", tls_cap = "256K";
  std::vector<std::string> tls_redact_more;  // --tls-redact-header
  bool verbose = false;

  void add_to(po::options_description& desc);
  // Checks values after parsing; throws UsageError.
  void validate(const po::variables_map& vm);
  size_t ring_bytes() const;
  // Loads the signing key (nullptr without --key). Throws Error.
  std::unique_ptr<ledger::SigningKey> load_key() const;
  void fill(recorder::SessionMeta& meta) const;
  void fill(probe::CaptureOptions& copts) const;
  bool tls_enabled() const { return tls == "on"; }
  size_t tls_chunk_bytes() const { return parse_size(tls_chunk, "--tls-chunk"); }
  size_t tls_cap_bytes() const { return parse_size(tls_cap, "--tls-cap"); }
};

}  // namespace flightrec::cli
