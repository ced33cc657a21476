#pragma once
// Many independent SHA-256 digests at once. One digest is a chain of
// dependent rounds, so a core's SHA unit mostly waits on its own results;
// with the x86 SHA extensions four messages' rounds interleave in about
// the time of two (~20 ns a block instead of ~38 on our machines). The
// writer hashes a batch's leaves and its Merkle nodes this way. Without
// the extensions (or off x86) each digest is made one at a time, by
// OpenSSL. Either way the digests are plain SHA-256 (FIPS 180-4).
#include <span>
#include <string_view>

#include "ledger/hash.h"

namespace flightrec::ledger {

// The message is prefix || body (the record's hashes put one domain byte
// before their data; a prefix saves copying the body behind it).
struct HashInput {
  std::string_view prefix, body;
};

// out[i] = SHA-256(in[i].prefix || in[i].body); out holds in.size() hashes.
void sha256_many(std::span<const HashInput> in, Hash* out);

// out[i] = SHA-256(prefix || hashes[2i] || hashes[2i+1]): a level of
// Merkle tree nodes (prefix 0x01), two blocks each, four at a time.
void sha256_pairs(char prefix, std::span<const Hash> hashes, Hash* out);

// SHA-256(a || b) of two hashes: one chain step.
Hash sha256_of_two(const Hash& a, const Hash& b);

// Whether sha256_many interleaves (the CPU has the SHA extensions).
bool sha256_many_interleaves();

}  // namespace flightrec::ledger
