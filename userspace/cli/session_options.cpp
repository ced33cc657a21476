#include "cli/session_options.h"

#include "probe/capture.h"

namespace flightrec::cli {

void SessionOptions::add_to(po::options_description& desc) {
  desc.add_options()("db", po::value(&db)->required(), "SQLite record to write (created if missing)")(
      "key", po::value(&key_dir),
      "directory with flightrec.key and flightrec.pub (flightrec keygen) to sign checkpoints; "
      "without it checkpoints are unsigned")(
      "checkpoint-entries", po::value(&checkpoint_entries)->default_value(checkpoint_entries),
      "a checkpoint every this many entries")(
      "checkpoint-ms", po::value(&checkpoint_ms)->default_value(checkpoint_ms),
      "and at least this often, in milliseconds (0: by entries only)")(
      "on-loss", po::value(&on_loss)->default_value(on_loss),
      "when the kernel loses events: continue (record the gap), freeze (pause the session's "
      "cgroup until the collector catches up), kill (end the session)")(
      "ring-size", po::value(&ring)->default_value(ring),
      "BPF ring buffer size: a power of two from 64K to 1G")(
      "verbose,v", po::bool_switch(&verbose), "print libbpf's messages (verifier log on failure)");
}

void SessionOptions::validate(const po::variables_map&) {
  if (!probe::valid_ring_size(ring_bytes()))
    throw UsageError("--ring-size must be a power of two from 64K to 1G");
  if (on_loss != "continue" && on_loss != "freeze" && on_loss != "kill")
    throw UsageError("--on-loss must be continue, freeze or kill");
  if (checkpoint_entries == 0) throw UsageError("--checkpoint-entries must be at least 1");
}

size_t SessionOptions::ring_bytes() const { return parse_size(ring, "--ring-size"); }

std::unique_ptr<ledger::SigningKey> SessionOptions::load_key() const {
  if (key_dir.empty()) return nullptr;
  return std::make_unique<ledger::SigningKey>(ledger::SigningKey::load_dir(key_dir));
}

void SessionOptions::fill(recorder::SessionMeta& meta) const {
  meta.ring_bytes = ring_bytes();
  meta.on_loss = on_loss;
  meta.checkpoint_entries = checkpoint_entries;
  meta.checkpoint_ms = checkpoint_ms;
}

}  // namespace flightrec::cli
