#include "ledger/path_index.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "common/text.h"
#include "ledger/canonical.h"

namespace flightrec::ledger {
namespace {

// syscall strings, the kernel's resolved path, exec's file, LSM and
// file_change paths (docs/FORMAT.md §1).
constexpr std::array<std::string_view, 16> kMembers = {
    "path",     "kernel_path", "oldpath",      "newpath", "target",    "linkpath", "filename", "new_path",
    "from_path", "to_path",    "mount_source", "new_root", "put_old", "cgroup",   "to_cgroup", "exe"};

// The index of key in kMembers, or -1: one switch and a compare or two.
int member_index(std::string_view key) {
  auto is = [&](int i) { return key == kMembers[size_t(i)] ? i : -1; };
  auto first = [](int a, int b) { return a >= 0 ? a : b; };
  switch (key.size()) {
    case 3: return is(15);
    case 4: return is(0);
    case 6: return first(is(4), is(13));
    case 7: return first(first(is(2), is(3)), first(is(9), is(12)));
    case 8: return first(first(is(5), is(6)), first(is(7), is(11)));
    case 9: return first(is(8), is(14));
    case 11: return is(1);
    case 12: return is(10);
    default: return -1;
  }
}

constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;
constexpr size_t kMinBytes = 8, kMaxBytes = 512;

// The two bits of h in a filter of `bytes` bytes (a power of two).
std::pair<size_t, size_t> bits_of(uint64_t h, size_t bytes) {
  size_t mask = bytes * 8 - 1;
  return {size_t(h >> 20) & mask, size_t(h >> 40) & mask};
}

bool well_formed(std::string_view bits) {
  return bits.size() >= kMinBytes && bits.size() <= kMaxBytes && (bits.size() & (bits.size() - 1)) == 0;
}

}  // namespace

std::span<const std::string_view> path_members() { return kMembers; }

PathKey path_key(std::string_view key) {
  if (member_index(key) >= 0) return PathKey::kPlain;
  if (key.size() > 4 && key.ends_with("_b64") && member_index(key.substr(0, key.size() - 4)) >= 0)
    return PathKey::kBase64;
  return PathKey::kNone;
}

bool path_prefix_hashes(std::string_view path, std::vector<uint64_t>& out) {
  size_t parts = 1 + size_t(std::count(path.begin() + (path.empty() ? 0 : 1), path.end(), '/'));
  if (parts > kMaxPathHashes) return false;
  uint64_t h = kFnvOffset;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '/' && i > 0) out.push_back(h);  // the part before this '/'
    h = (h ^ uint8_t(path[i])) * kFnvPrime;
  }
  out.push_back(h);
  return true;
}

uint64_t path_hash(std::string_view path) {
  uint64_t h = kFnvOffset;
  for (char c : path) h = (h ^ uint8_t(c)) * kFnvPrime;
  return h;
}

bool entry_path_hashes(const TopLevel& top, std::vector<uint64_t>& out) {
  // One pass over the members (not a search per member name): verify runs
  // this for every entry. A member's own string wins over its _b64 twin,
  // as in query's reading of it.
  uint32_t has_string = 0;
  std::array<std::string_view, kMembers.size()> b64{};
  bool ok = true;
  for (const auto& [key, value] : top.members) {
    bool base64 = key.size() > 4 && key.ends_with("_b64");
    int i = member_index(base64 ? key.substr(0, key.size() - 4) : key);
    if (i < 0 || value.empty() || value[0] != '"') continue;
    if (base64) {
      b64[size_t(i)] = key;
      continue;
    }
    if (auto s = top.string(key)) {
      has_string |= 1u << i;
      ok = path_prefix_hashes(*s, out) && ok;
    }
  }
  for (size_t i = 0; i < kMembers.size(); ++i) {
    if (b64[i].empty() || (has_string >> i & 1)) continue;
    auto text = top.string(b64[i]);
    auto bytes = text ? base64_decode(*text) : std::nullopt;
    if (bytes) ok = path_prefix_hashes(*bytes, out) && ok;
  }
  return ok;
}

std::string path_bits_of(std::vector<uint64_t>& hashes) {
  if (hashes.empty()) return "";
  std::sort(hashes.begin(), hashes.end());
  hashes.erase(std::unique(hashes.begin(), hashes.end()), hashes.end());
  size_t bytes = kMinBytes;
  while (bytes < kMaxBytes && bytes < hashes.size()) bytes *= 2;
  std::string bits(bytes, '\0');
  for (uint64_t h : hashes) {
    auto [a, b] = bits_of(h, bytes);
    bits[a / 8] = char(uint8_t(bits[a / 8]) | 1u << (a % 8));
    bits[b / 8] = char(uint8_t(bits[b / 8]) | 1u << (b % 8));
  }
  return bits;
}

std::string path_bits_all() { return std::string(kMinBytes, '\xff'); }

bool path_bits_may_hold(std::string_view bits, uint64_t h) {
  if (bits.empty()) return false;
  if (!well_formed(bits)) return true;  // not one flightrec writes: it hides nothing
  auto [a, b] = bits_of(h, bits.size());
  return (uint8_t(bits[a / 8]) >> (a % 8) & 1) && (uint8_t(bits[b / 8]) >> (b % 8) & 1);
}

bool path_bits_hold_all(std::string_view bits) {
  if (!well_formed(bits)) return !bits.empty();
  return std::all_of(bits.begin(), bits.end(), [](char c) { return uint8_t(c) == 0xff; });
}

}  // namespace flightrec::ledger
