#pragma once
// A block's path index (docs/FORMAT.md §7): a Bloom filter of every path
// its entries name and every directory above it, so `query --path` skips
// blocks that cannot hold a match without decompressing them (a storm of
// getppid() names no path at all). Which members name paths, and what
// "under" means, are query --path's own rules: the index and the filter
// cannot disagree. Like the rest of the index it is trusted by nothing but
// queries; verify checks that it covers every entry.
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

// Appends the hashes of what a query for path matches by: path itself and
// each leading part that ends before a '/' (for "/a/b": "/a" and "/a/b";
// the same as policy::path_under, whole components). At most
// kMaxPathHashes per call; returns false (and appends nothing) past that:
// the block's index must then match every path (path_bits_all()).
constexpr size_t kMaxPathHashes = 64;
bool path_prefix_hashes(std::string_view path, std::vector<uint64_t>& out);

// The hash of a --path query, as path_prefix_hashes hashes its parts.
uint64_t path_hash(std::string_view path);

// The paths an entry names, as query --path reads them: for each member, its
// string, else the bytes its _b64 twin holds. Appends their prefix hashes;
// false where one path has too many parts (see above).
bool entry_path_hashes(const TopLevel& top, std::vector<uint64_t>& out);

// The stored Bloom filter of the hashes (sorted and made unique here): ""
// when there are none, else 2^k bytes (8 to 512), 8 bits per hash or more.
std::string path_bits_of(std::vector<uint64_t>& hashes);
// What a block stores when some entry's path had too many parts: all bits set.
std::string path_bits_all();
// Whether bits may hold hash h (false: no entry of its block names a path it matches).
bool path_bits_may_hold(std::string_view bits, uint64_t h);
// Whether bits may hold every hash (all set, or not a filter flightrec writes).
bool path_bits_hold_all(std::string_view bits);

}  // namespace flightrec::ledger
