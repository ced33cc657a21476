#include <doctest/doctest.h>

#include "ledger/hash.h"

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
