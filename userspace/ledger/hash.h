#pragma once
// The hashes of the record (docs/FORMAT.md):
//   leaf_i  = SHA-256(0x00 || canonical_i)          (RFC 9162 leaf hash)
//   chain_i = SHA-256(chain_{i-1} || leaf_i), chain_0's predecessor = 32 zero bytes
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace flightrec::ledger {

using Hash = std::array<uint8_t, 32>;

// The domain byte before a leaf's and before a node's data (RFC 9162 2.1.1).
inline constexpr std::string_view kLeafPrefix{"\0", 1}, kNodePrefix{"\1", 1};

Hash sha256(std::string_view data);
// SHA-256(a || b), without joining them first.
Hash sha256_parts(std::string_view a, std::string_view b);
Hash leaf_hash(std::string_view canonical);
Hash chain_next(const Hash& prev, const Hash& leaf);
constexpr Hash kChainStart{};  // all zeros

std::string to_hex(const Hash& h);
std::string_view as_bytes(const Hash& h);

}  // namespace flightrec::ledger
