#include "ledger/hash.h"

#include <openssl/evp.h>

#include <stdexcept>

#include "common/text.h"

namespace flightrec::ledger {
namespace {

// One fetched SHA-256 implementation and one reusable context per thread:
// fetching per hash costs more than hashing a short entry.
struct Hasher {
  EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~Hasher() {
    EVP_MD_CTX_free(ctx);
    EVP_MD_free(md);
  }
  Hash digest(std::string_view a, std::string_view b = {}) {
    Hash out;
    unsigned len = 0;
    if (!md || !ctx || !EVP_DigestInit_ex2(ctx, md, nullptr) ||
        !EVP_DigestUpdate(ctx, a.data(), a.size()) ||
        (!b.empty() && !EVP_DigestUpdate(ctx, b.data(), b.size())) ||
        !EVP_DigestFinal_ex(ctx, out.data(), &len) || len != out.size())
      throw std::runtime_error("SHA-256 failed (OpenSSL)");
    return out;
  }
};

Hasher& hasher() {
  thread_local Hasher h;
  return h;
}

}  // namespace

std::string_view as_bytes(const Hash& h) {
  return {reinterpret_cast<const char*>(h.data()), h.size()};
}

Hash sha256(std::string_view data) { return hasher().digest(data); }

Hash leaf_hash(std::string_view canonical) {
  static const char zero = 0;
  return hasher().digest(std::string_view(&zero, 1), canonical);
}

Hash chain_next(const Hash& prev, const Hash& leaf) {
  return hasher().digest(as_bytes(prev), as_bytes(leaf));
}

std::string to_hex(const Hash& h) { return hex_encode(as_bytes(h)); }

}  // namespace flightrec::ledger
