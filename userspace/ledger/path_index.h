#pragma once
// A block's path index (docs/FORMAT.md §7): a Bloom filter of every path
// its entries name and every directory above it, so `query --path` skips
// blocks that cannot hold a match without decompressing them (a storm of
// getppid() names no path at all). Which members name paths, and what
// "under" means, are query --path's own rules: the index and the filter
// cannot disagree. Like the rest of the index it is trusted by nothing but
// queries; verify checks that it covers every entry.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flightrec::ledger {

class TopLevel;

// The top-level members that name a path (a string, or bytes as
// MEMBER_b64 when not UTF-8; docs/FORMAT.md).
std::span<const std::string_view> path_members();

// Whether key names a path: kPlain for "path" and the like, kBase64 for
// "path_b64" and the like, kNone otherwise. Cheap: runs on every member of
// every entry the recorder stores.
enum class PathKey { kNone, kPlain, kBase64 };
PathKey path_key(std::string_view key);

// Appends the FNV-1a-64 hashes of what a query for path matches by: path
// itself and each leading part that ends before a '/' (for "/a/b": "/a"
// and "/a/b"; policy::path_under, whole components). More than `limit`:
// returns false and appends nothing (the recorder's block then matches
// every path: PathFilter::set_all).
constexpr size_t kMaxPathHashes = 64;
bool path_prefix_hashes(std::string_view path, std::vector<uint64_t>& out, size_t limit = kMaxPathHashes);

// The hash of a --path query, as path_prefix_hashes hashes its parts.
uint64_t path_hash(std::string_view path);

// The paths an entry names, as query --path reads them: for each member, its
// string, else the bytes its _b64 twin holds. Appends their prefix hashes;
// false where one path has more than limit parts (see above).
bool entry_path_hashes(const TopLevel& top, std::vector<uint64_t>& out, size_t limit = SIZE_MAX);

// A block's filter while it fills: every hash sets two bits of 4096, in
// constant time (a path an agent makes deep costs no sort at the seal);
// stored folded to the smallest size that keeps it sparse.
class PathFilter {
 public:
  void add(uint64_t h);
  void set_all() { all_ = true; }
  // "" when nothing was added, else 2^k bytes (8 to 512); all bits set after set_all().
  std::string stored() const;
  void clear();

 private:
  uint64_t words_[64] = {};
  bool any_ = false, all_ = false;
};

constexpr size_t kPathBitsMaxBytes = 512;
// Whether stored filter bits may hold hash h (false: no entry of its block
// names a path it matches). A length flightrec never writes hides nothing.
bool path_bits_may_hold(std::string_view bits, uint64_t h);

}  // namespace flightrec::ledger
