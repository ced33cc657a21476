#pragma once
// Recomputes a record from its stored bytes: canonical form, leaf hashes,
// the hash chain, sequence numbers and each session's closing summary.
#include <cstdint>
#include <optional>
#include <string>

#include "ledger/store.h"

namespace flightrec::ledger {

struct VerifyResult {
  bool ok = true;
  int64_t sessions = 0;
  int64_t entries = 0;
  int64_t unterminated = 0;     // sessions without a clean end
  // The first failure: which entry (seq 0 for the session as a whole) and why.
  int64_t bad_session = 0;
  int64_t bad_seq = 0;
  std::string reason;
};

VerifyResult verify_store(Store& store, std::optional<int64_t> only_session = std::nullopt);

// Checks that `body` is canonical JSON per docs/FORMAT.md; returns the
// problem, or "" when it is.
std::string canonical_problem(const std::string& body);

}  // namespace flightrec::ledger
