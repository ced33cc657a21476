#include "ledger/merkle.h"

#include <array>
#include <bit>
#include <string>

#include "ledger/sha256_many.h"

namespace flightrec::ledger {
namespace {

// The largest power of two smaller than n (n >= 2).
uint64_t split_point(uint64_t n) { return std::bit_floor(n - 1); }

void path(uint64_t m, std::span<const Hash> d, std::vector<Hash>& out) {
  if (d.size() <= 1) return;
  uint64_t k = split_point(d.size());
  if (m < k) {
    path(m, d.subspan(0, k), out);
    out.push_back(root_of(d.subspan(k)));
  } else {
    path(m - k, d.subspan(k), out);
    out.push_back(root_of(d.subspan(0, k)));
  }
}

void subproof(uint64_t m, std::span<const Hash> d, bool complete, std::vector<Hash>& out) {
  uint64_t n = d.size();
  if (m == n) {
    if (!complete) out.push_back(root_of(d));
    return;
  }
  uint64_t k = split_point(n);
  if (m <= k) {
    subproof(m, d.subspan(0, k), complete, out);
    out.push_back(root_of(d.subspan(k)));
  } else {
    subproof(m - k, d.subspan(k), false, out);
    out.push_back(root_of(d.subspan(0, k)));
  }
}

}  // namespace

Hash node_hash(const Hash& left, const Hash& right) {
  std::array<char, 65> buf;
  buf[0] = '\x01';
  std::copy(left.begin(), left.end(), buf.begin() + 1);
  std::copy(right.begin(), right.end(), buf.begin() + 33);
  return sha256(std::string_view(buf.data(), buf.size()));
}

Hash empty_root() { return sha256(""); }

Hash root_of(std::span<const Hash> d) {
  if (d.empty()) return empty_root();
  if (d.size() == 1) return d[0];
  uint64_t k = split_point(d.size());
  return node_hash(root_of(d.subspan(0, k)), root_of(d.subspan(k)));
}

std::vector<Hash> inclusion_proof(uint64_t index, std::span<const Hash> leaves) {
  std::vector<Hash> out;
  if (index < leaves.size()) path(index, leaves, out);
  return out;
}

std::vector<Hash> consistency_proof(uint64_t m, std::span<const Hash> leaves) {
  std::vector<Hash> out;
  if (m > 0 && m < leaves.size()) subproof(m, leaves, true, out);
  return out;
}

bool verify_inclusion(uint64_t index, uint64_t size, const Hash& leaf, std::span<const Hash> proof,
                      const Hash& root) {
  if (index >= size) return false;
  uint64_t fn = index, sn = size - 1;
  Hash r = leaf;
  for (const Hash& p : proof) {
    if (sn == 0) return false;
    if ((fn & 1) || fn == sn) {
      r = node_hash(p, r);
      if (!(fn & 1))
        while (!(fn & 1) && fn != 0) {
          fn >>= 1;
          sn >>= 1;
        }
    } else {
      r = node_hash(r, p);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn == 0 && r == root;
}

bool verify_consistency(uint64_t size1, uint64_t size2, std::span<const Hash> proof,
                        const Hash& root1, const Hash& root2) {
  if (size1 > size2) return false;
  if (size1 == size2) return proof.empty() && root1 == root2;
  if (size1 == 0) return proof.empty();  // the empty tree is a prefix of every tree
  if (proof.empty()) return false;
  std::vector<Hash> path;
  if (std::has_single_bit(size1)) path.push_back(root1);
  path.insert(path.end(), proof.begin(), proof.end());
  uint64_t fn = size1 - 1, sn = size2 - 1;
  while (fn & 1) {
    fn >>= 1;
    sn >>= 1;
  }
  Hash fr = path[0], sr = path[0];
  for (size_t i = 1; i < path.size(); ++i) {
    const Hash& c = path[i];
    if (sn == 0) return false;
    if ((fn & 1) || fn == sn) {
      fr = node_hash(c, fr);
      sr = node_hash(c, sr);
      if (!(fn & 1))
        while (!(fn & 1) && fn != 0) {
          fn >>= 1;
          sn >>= 1;
        }
    } else {
      sr = node_hash(sr, c);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn == 0 && fr == root1 && sr == root2;
}

void CompactTree::append(const Hash& leaf) {
  // Merge equal-sized perfect subtrees like a binary counter's carries:
  // the number of merges is the number of trailing one bits of size_.
  Hash h = leaf;
  for (uint64_t s = size_; s & 1; s >>= 1) {
    h = node_hash(peaks_.back(), h);
    peaks_.pop_back();
  }
  peaks_.push_back(h);
  ++size_;
}

void CompactTree::append_all(std::span<const Hash> leaves) {
  // Level by level: a level's complete nodes from the first one not yet
  // merged (the old peak of that level, when the old size has that bit)
  // pair up into the next level; an odd one left at the end is the new
  // peak of its level. Each level's pairs are hashed together.
  if (leaves.empty()) return;
  const uint64_t old_size = size_, new_size = size_ + leaves.size();
  std::vector<Hash> old_peaks = std::move(peaks_);  // largest first: the highest set bit of old_size
  std::vector<Hash> level(leaves.begin(), leaves.end()), next, new_peaks;
  for (int bit = 0; bit < 64 && (level.size() > 0 || (old_size >> bit) != 0); ++bit) {
    if ((old_size >> bit) & 1) {
      level.insert(level.begin(), old_peaks.back());
      old_peaks.pop_back();
    }
    next.resize(level.size() / 2);
    sha256_pairs(kNodePrefix[0], level, next.data());
    if (level.size() % 2) new_peaks.push_back(level.back());
    level.swap(next);
  }
  peaks_.assign(new_peaks.rbegin(), new_peaks.rend());
  size_ = new_size;
}

Hash CompactTree::root() const {
  if (peaks_.empty()) return empty_root();
  Hash h = peaks_.back();
  for (size_t i = peaks_.size() - 1; i-- > 0;) h = node_hash(peaks_[i], h);
  return h;
}

}  // namespace flightrec::ledger
