#pragma once
// A session as one self-contained file an auditor can verify elsewhere:
//   JSON:  {"checkpoints":[notes...],"entries":[canonical entries as strings...],
//           "format":"flightrec-bundle","format_version":1,"public_key":"...","session":N}
//   JSON Lines (streams): a header line {"format":"flightrec-bundle-lines",...},
//           then each entry's canonical form on its own line, each checkpoint as
//           {"checkpoint":"<note>"} right after the entry that completes it.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "ledger/keys.h"
#include "ledger/store.h"
#include "ledger/verify.h"

namespace flightrec {
class Progress;
}

namespace flightrec::ledger {

enum class BundleFormat { Json, Lines };

// Returns the number of entries written; progress (may be null) is told
// the entries written so far. Throws Error.
int64_t export_bundle(Store& store, int64_t session, std::ostream& out, BundleFormat format,
                      Progress* progress = nullptr);

struct BundleVerdict {
  int64_t session = 0;
  SessionVerdict verdict;
};
// Throws Error when the file cannot be read or is not a bundle at all.
BundleVerdict verify_bundle(const std::string& path, const VerifierKey* pinned,
                            std::optional<std::string> external);

}  // namespace flightrec::ledger
