#include <doctest/doctest.h>

#include <span>
#include <string>
#include <vector>

#include "ledger/hash.h"
#include "ledger/sha256_many.h"

using namespace flightrec::ledger;

TEST_CASE("SHA-256 matches FIPS 180-2 vectors") {
  CHECK(to_hex(sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(to_hex(sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("leaf hash is SHA-256(0x00 || entry) as RFC 9162") {
  // RFC 6962/9162: the hash of an empty leaf is SHA-256 of the single byte 0x00.
  CHECK(to_hex(leaf_hash("")) == "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d");
  CHECK(leaf_hash("{}") == sha256(std::string("\0{}", 3)));
}

TEST_CASE("chain links each leaf to the one before") {
  Hash l1 = leaf_hash(R"({"seq":1})"), l2 = leaf_hash(R"({"seq":2})");
  Hash c1 = chain_next(kChainStart, l1);
  Hash c2 = chain_next(c1, l2);
  std::string buf(64, '\0');
  std::copy(l1.begin(), l1.end(), buf.begin() + 32);
  CHECK(c1 == sha256(buf));
  std::copy(c1.begin(), c1.end(), buf.begin());
  std::copy(l2.begin(), l2.end(), buf.begin() + 32);
  CHECK(c2 == sha256(buf));
  CHECK(chain_next(c1, l1) != c2);
}

TEST_CASE("sha256_many gives each message's own SHA-256, whatever the lengths and the count") {
  // Lengths across every block edge (55/56/63/64 bytes of message, where the
  // padding spills into another block), prefixes of 0, 1 and 70 bytes, and
  // counts that leave one to four lanes busy at the end.
  std::string data(400, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = char(i * 131 + 7);
  const std::string long_prefix(70, '\x01');
  for (std::string_view prefix : {std::string_view(), std::string_view("\0", 1), std::string_view(long_prefix)}) {
    std::vector<HashInput> in;
    for (size_t len = 0; len <= 300; ++len) in.push_back({prefix, std::string_view(data).substr(len % 7, len)});
    for (size_t count : {size_t(0), size_t(1), size_t(2), size_t(3), size_t(4), size_t(5), size_t(9), in.size()}) {
      std::vector<Hash> out(count);
      sha256_many(std::span(in).first(count), out.data());
      for (size_t i = 0; i < count; ++i) {
        INFO("prefix ", prefix.size(), " bytes, message ", i, " of ", count);
        CHECK(out[i] == sha256(std::string(prefix) + std::string(in[i].body)));
      }
    }
  }
  MESSAGE("interleaved on this CPU: ", sha256_many_interleaves());
}
