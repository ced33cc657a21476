// Signed checkpoints (C2SP signed notes), files of saved checkpoints, and
// verifier key lines, as an auditor may be handed them (ledger/checkpoint.h,
// ledger/keys.h). Input: [which][text...].
#include "fuzz_input.h"
#include "ledger/checkpoint.h"
#include "ledger/keys.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  uint8_t which = in.byte();
  std::string why;
  switch (which % 4) {
    case 0:
      flightrec::ledger::parse_checkpoint(in.rest, &why);
      break;
    case 1:
      flightrec::ledger::split_saved_checkpoints(in.rest, &why);
      break;
    case 2:
      flightrec::ledger::VerifierKey::parse(in.rest);
      break;
    default:
      if (auto note = flightrec::ledger::parse_note(in.rest, &why)) {
        static const auto key = flightrec::ledger::VerifierKey::parse(
            "flightrec-vm+2d5eaf94+ASL5yrK/fwHmfnhJEZlMbzHbKDaf7N79bTUzvkMu9cER");  // the key of the seeds' signed notes
        if (key) flightrec::ledger::check_signature(*note, *key);
      }
  }
  return 0;
}
