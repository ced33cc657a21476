#include "ledger/hash.h"

// OpenSSL's one-algorithm SHA-256 calls, deprecated in 3.0 in favour of
// EVP but kept and just as fast per block: EVP's per-digest set-up cost
// ~0.1 us, a third of hashing a typical entry, three times per entry.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include "common/text.h"
#include "ledger/sha256_many.h"

namespace flightrec::ledger {
namespace {

Hash digest(std::string_view a, std::string_view b = {}) {
  SHA256_CTX ctx;
  Hash out;
  SHA256_Init(&ctx);
  SHA256_Update(&ctx, a.data(), a.size());
  if (!b.empty()) SHA256_Update(&ctx, b.data(), b.size());
  SHA256_Final(out.data(), &ctx);
  return out;
}

}  // namespace

std::string_view as_bytes(const Hash& h) {
  return {reinterpret_cast<const char*>(h.data()), h.size()};
}

Hash sha256(std::string_view data) { return digest(data); }

Hash sha256_parts(std::string_view a, std::string_view b) { return digest(a, b); }

Hash leaf_hash(std::string_view canonical) { return digest(kLeafPrefix, canonical); }

Hash chain_next(const Hash& prev, const Hash& leaf) { return sha256_of_two(prev, leaf); }

std::string to_hex(const Hash& h) { return hex_encode(as_bytes(h)); }

}  // namespace flightrec::ledger
