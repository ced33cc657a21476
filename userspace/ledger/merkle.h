#pragma once
// The Merkle tree of RFC 9162 section 2.1 over a session's leaf hashes:
// node = SHA-256(0x01 || left || right), the empty tree hashes to
// SHA-256(""), and inclusion and consistency proofs as in 2.1.3 and 2.1.4.
#include <cstdint>
#include <span>
#include <vector>

#include "ledger/hash.h"

namespace flightrec::ledger {

Hash node_hash(const Hash& left, const Hash& right);
Hash empty_root();

// MTH(D[n]) of leaf hashes.
Hash root_of(std::span<const Hash> leaves);
// PATH(index, D[n]) and PROOF(m, D[n]) (RFC 9162 2.1.3.1, 2.1.4.1).
std::vector<Hash> inclusion_proof(uint64_t index, std::span<const Hash> leaves);
std::vector<Hash> consistency_proof(uint64_t m, std::span<const Hash> leaves);

// RFC 9162 2.1.3.2 and 2.1.4.2.
bool verify_inclusion(uint64_t index, uint64_t size, const Hash& leaf, std::span<const Hash> proof,
                      const Hash& root);
bool verify_consistency(uint64_t size1, uint64_t size2, std::span<const Hash> proof,
                        const Hash& root1, const Hash& root2);

// A tree that grows by appending leaves and knows its root at any time
// from the roots of its perfect subtrees (O(log n) memory).
class CompactTree {
 public:
  void append(const Hash& leaf);
  // The same as appending each in turn; the nodes of each level are
  // hashed together (sha256_many), which is faster for a batch.
  void append_all(std::span<const Hash> leaves);
  uint64_t size() const { return size_; }
  Hash root() const;

 private:
  uint64_t size_ = 0;
  std::vector<Hash> peaks_;  // perfect subtrees, largest first
};

}  // namespace flightrec::ledger
