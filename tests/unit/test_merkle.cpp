// RFC 6962/9162 Merkle trees against the published reference vectors: the
// eight leaves, roots, inclusion and consistency proofs of Certificate
// Transparency's reference implementation (google/certificate-transparency,
// cpp/merkletree/merkle_tree_test.cc; the same data is in
// transparency-dev/merkle's testonly package).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common/text.h"
#include "ledger/merkle.h"

using namespace flightrec;
using namespace flightrec::ledger;

namespace {

Hash h(const std::string& hex) {
  auto bytes = hex_decode(hex);
  REQUIRE(bytes);
  REQUIRE(bytes->size() == 32);
  Hash out;
  std::copy(bytes->begin(), bytes->end(), out.begin());
  return out;
}

std::vector<Hash> hs(const std::vector<std::string>& hexes) {
  std::vector<Hash> out;
  for (const auto& x : hexes) out.push_back(h(x));
  return out;
}

std::vector<Hash> reference_leaves() {
  const char* data[] = {"", "00", "10", "2021", "3031", "40414243", "5051525354555657",
                        "606162636465666768696a6b6c6d6e6f"};
  std::vector<Hash> out;
  for (const char* d : data) out.push_back(leaf_hash(*hex_decode(d)));
  return out;
}

const char* kRoots[] = {
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
};

}  // namespace

TEST_CASE("tree heads match the reference roots for sizes 0 to 8, batch and incremental") {
  auto leaves = reference_leaves();
  CompactTree tree;
  CHECK(tree.root() == h(kRoots[0]));
  for (size_t n = 0; n <= leaves.size(); ++n) {
    CHECK(to_hex(root_of(std::span(leaves).subspan(0, n))) == kRoots[n]);
    if (n > 0) {
      tree.append(leaves[n - 1]);
      CHECK(to_hex(tree.root()) == kRoots[n]);
    }
  }
}

TEST_CASE("appending leaves as a batch builds the same tree as appending them one by one") {
  // Every old size up to 40 (each pattern of old peaks) with batches of
  // 1 to 40 leaves: the roots and every later append agree.
  std::vector<Hash> leaves;
  for (int i = 0; i < 81; ++i) leaves.push_back(leaf_hash("entry " + std::to_string(i)));
  for (size_t old_size = 0; old_size <= 40; ++old_size)
    for (size_t batch = 1; batch <= 40; ++batch) {
      CompactTree one_by_one, batched;
      for (size_t i = 0; i < old_size; ++i) {
        one_by_one.append(leaves[i]);
        batched.append(leaves[i]);
      }
      for (size_t i = old_size; i < old_size + batch; ++i) one_by_one.append(leaves[i]);
      batched.append_all(std::span(leaves).subspan(old_size, batch));
      INFO("old size ", old_size, ", batch ", batch);
      REQUIRE(batched.size() == one_by_one.size());
      REQUIRE(batched.root() == one_by_one.root());
      CHECK(batched.root() == root_of(std::span(leaves).first(old_size + batch)));
      one_by_one.append(leaves[80]);
      batched.append(leaves[80]);
      CHECK(batched.root() == one_by_one.root());
    }
  CompactTree tree;
  tree.append_all({});
  CHECK(tree.size() == 0);
  CHECK(tree.root() == empty_root());
}

TEST_CASE("inclusion proofs match the reference paths and verify") {
  auto leaves = reference_leaves();
  struct Case {
    uint64_t index, size;
    std::vector<std::string> path;
  } cases[] = {
      {0, 8, {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
              "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
              "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
      {5, 8, {"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
              "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
              "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
      {2, 3, {"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"}},
      {1, 5, {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
              "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
              "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
  };
  for (const auto& c : cases) {
    auto tree = std::span(leaves).subspan(0, c.size);
    auto proof = inclusion_proof(c.index, tree);
    CHECK(proof == hs(c.path));
    CHECK(verify_inclusion(c.index, c.size, leaves[c.index], proof, h(kRoots[c.size])));
    CHECK_FALSE(verify_inclusion(c.index, c.size, leaves[c.index], proof, h(kRoots[0])));
    CHECK_FALSE(verify_inclusion(c.index + 1 < c.size ? c.index + 1 : 0, c.size, leaves[c.index], proof,
                                 h(kRoots[c.size])));
  }
}

TEST_CASE("consistency proofs match the reference and verify") {
  auto leaves = reference_leaves();
  struct Case {
    uint64_t m, n;
    std::vector<std::string> proof;
  } cases[] = {
      {1, 1, {}},
      {1, 8, {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
              "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
              "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
      {6, 8, {"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
              "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
              "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
      {2, 5, {"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
              "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
  };
  for (const auto& c : cases) {
    auto proof = consistency_proof(c.m, std::span(leaves).subspan(0, c.n));
    CHECK(proof == hs(c.proof));
    CHECK(verify_consistency(c.m, c.n, proof, h(kRoots[c.m]), h(kRoots[c.n])));
    if (c.m != c.n) CHECK_FALSE(verify_consistency(c.m, c.n, proof, h(kRoots[c.m + 1]), h(kRoots[c.n])));
  }
}

TEST_CASE("every proof in every tree up to 70 leaves verifies, and a changed leaf does not") {
  std::vector<Hash> leaves;
  for (int i = 0; i < 70; ++i) leaves.push_back(leaf_hash(std::to_string(i * 7919)));
  for (uint64_t n = 1; n <= leaves.size(); ++n) {
    auto tree = std::span(leaves).subspan(0, n);
    Hash root = root_of(tree);
    for (uint64_t i = 0; i < n; ++i) {
      auto proof = inclusion_proof(i, tree);
      REQUIRE(verify_inclusion(i, n, leaves[i], proof, root));
      REQUIRE_FALSE(verify_inclusion(i, n, leaf_hash("forged"), proof, root));
    }
    for (uint64_t m = 1; m <= n; ++m) {
      auto proof = consistency_proof(m, tree);
      REQUIRE(verify_consistency(m, n, proof, root_of(tree.subspan(0, m)), root));
      if (m < n) REQUIRE_FALSE(verify_consistency(m, n, proof, leaf_hash("x"), root));
    }
  }
}
