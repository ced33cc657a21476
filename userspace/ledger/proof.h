#pragma once
// Proofs a third party can check without the record (docs/FORMAT.md §6):
// that one entry is in a signed checkpoint's tree (inclusion), or that a
// smaller tree is a prefix of a larger one (consistency), RFC 9162 §2.1.3
// and §2.1.4. Checking needs the proof, the public key and nothing else.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ledger/keys.h"
#include "ledger/store.h"

namespace flightrec::ledger {

// The proof as JSON text (one object). Leaves are hashed from the entries
// themselves. Throws Error when the record cannot give it.
std::string make_inclusion_proof(Store& store, int64_t session, int64_t entry);
std::string make_consistency_proof(Store& store, int64_t session, int64_t from, std::optional<int64_t> to);

struct ProofVerdict {
  bool ok = false;
  std::string reason;  // why not, when !ok
  std::string what;    // what was proven, for people, when ok
  std::string entry;   // inclusion: the entry's canonical JSON
};
// Checks every member of the proof: the entry's canonical form and leaf
// hash, the path to the root, and that the root and size are those of a
// checkpoint signed by `key`. For a consistency proof, `saved` (notes
// kept elsewhere, as `flightrec checkpoint >> FILE` appends them) must
// hold one of this log at the smaller size, with the proof's root: it
// also stands for a checkpoint the proof lacks.
ProofVerdict check_proof(const std::string& proof_json, const VerifierKey& key,
                         const std::vector<std::string>& saved = {});

}  // namespace flightrec::ledger
