#include "ledger/path_index.h"

#include <algorithm>
#include <array>
#include <bit>

#include "common/text.h"
#include "ledger/canonical.h"

namespace flightrec::ledger {
namespace {

// syscall strings, the kernel's resolved path, exec's file, LSM,
// file_change and grant paths (docs/FORMAT.md §1).
constexpr std::array<std::string_view, 17> kMembers = {
    "path",     "kernel_path", "oldpath",      "newpath",  "target",  "linkpath", "filename",  "new_path", "from_path",
    "to_path",  "mount_source", "new_root",    "put_old",  "cgroup",  "to_cgroup", "exe",      "path2"};

// The index of key in kMembers, or -1: one switch and a compare or two
// (it runs on every member of every entry the recorder stores).
constexpr int member_index(std::string_view key) {
  auto is = [&](int i) { return key == kMembers[size_t(i)] ? i : -1; };
  auto first = [](int a, int b) { return a >= 0 ? a : b; };
  switch (key.size()) {
    case 3: return is(15);
    case 4: return is(0);
    case 5: return is(16);
    case 6: return first(is(4), is(13));
    case 7: return first(first(is(2), is(3)), first(is(9), is(12)));
    case 8: return first(first(is(5), is(6)), first(is(7), is(11)));
    case 9: return first(is(8), is(14));
    case 11: return is(1);
    case 12: return is(10);
    default: return -1;
  }
}

// A member added to kMembers without its case above would be matched by
// query but hashed by nobody: query would skip blocks that hold it.
constexpr bool every_member_found() {
  for (size_t i = 0; i < kMembers.size(); ++i)
    if (member_index(kMembers[i]) != int(i)) return false;
  return true;
}
static_assert(every_member_found());

// FNV-1a-64 (the standard offset basis and prime; docs/FORMAT.md §7).
constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;
constexpr size_t kMinBytes = 8;
constexpr size_t kFullBits = kPathBitsMaxBytes * 8;

// The two bits of h in a filter of m bits (a power of two, at most 4096).
std::pair<size_t, size_t> bits_of(uint64_t h, size_t m) { return {size_t(h >> 20) & (m - 1), size_t(h >> 40) & (m - 1)}; }

bool well_formed(std::string_view bits) {
  return bits.size() >= kMinBytes && bits.size() <= kPathBitsMaxBytes && std::has_single_bit(bits.size());
}

}  // namespace

std::span<const std::string_view> path_members() { return kMembers; }

PathKey path_key(std::string_view key) {
  if (member_index(key) >= 0) return PathKey::kPlain;
  if (key.size() > 4 && key.ends_with("_b64") && member_index(key.substr(0, key.size() - 4)) >= 0)
    return PathKey::kBase64;
  return PathKey::kNone;
}

bool path_prefix_hashes(std::string_view path, std::vector<uint64_t>& out, size_t limit) {
  size_t parts = 1 + size_t(std::count(path.begin() + (path.empty() ? 0 : 1), path.end(), '/'));
  if (parts > limit) return false;
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

bool entry_path_hashes(const TopLevel& top, std::vector<uint64_t>& out, size_t limit) {
  // One pass over the members (not a search per member name): verify runs
  // this for every entry. A member's own string wins over its _b64 twin,
  // as in query's reading of it.
  // The member's string: its raw text between the quotes when that has no
  // escape (most paths; no copy), else unescaped.
  std::string unescaped;
  auto text_of = [&](std::string_view key, std::string_view raw) -> std::optional<std::string_view> {
    if (raw.find('\\') == std::string_view::npos) return raw.substr(1, raw.size() - 2);
    auto s = top.string(key);
    if (!s) return std::nullopt;
    unescaped = std::move(*s);
    return std::string_view(unescaped);
  };
  uint32_t has_string = 0;
  std::array<std::pair<std::string_view, std::string_view>, kMembers.size()> b64{};  // key, raw value
  bool ok = true;
  for (const auto& [key, value] : top.members) {
    bool base64 = key.size() > 4 && key.ends_with("_b64");
    int i = member_index(base64 ? key.substr(0, key.size() - 4) : key);
    if (i < 0 || value.size() < 2 || value[0] != '"') continue;  // not a string
    if (base64) {
      b64[size_t(i)] = {key, value};
      continue;
    }
    if (auto s = text_of(key, value)) {
      has_string |= 1u << i;
      ok = path_prefix_hashes(*s, out, limit) && ok;
    }
  }
  for (size_t i = 0; i < kMembers.size(); ++i) {
    if (b64[i].first.empty() || (has_string >> i & 1)) continue;
    auto text = text_of(b64[i].first, b64[i].second);
    auto bytes = text ? base64_decode(*text) : std::nullopt;
    if (bytes) ok = path_prefix_hashes(*bytes, out, limit) && ok;
  }
  return ok;
}

void PathFilter::add(uint64_t h) {
  auto [a, b] = bits_of(h, kFullBits);
  words_[a / 64] |= 1ull << (a % 64);
  words_[b / 64] |= 1ull << (b % 64);
  any_ = true;
}

std::string PathFilter::stored() const {
  if (all_) return std::string(kMinBytes, '\xff');
  if (!any_) return "";
  // About four bits per bit set (two per hash): sparse enough that most
  // other paths miss. Bit i of the full filter is bit i mod m of the
  // stored one, as (h >> k) mod m is ((h >> k) mod 4096) mod m.
  size_t set = 0;
  for (uint64_t w : words_) set += size_t(std::popcount(w));
  size_t m = kMinBytes * 8;
  while (m < kFullBits && m < 4 * set) m *= 2;
  uint64_t folded[64] = {};
  for (size_t w = 0; w < 64; ++w) folded[w & (m / 64 - 1)] |= words_[w];
  std::string bits(m / 8, '\0');
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = char(uint8_t(folded[i / 8] >> (8 * (i % 8))));
  return bits;
}

void PathFilter::clear() {
  std::fill(std::begin(words_), std::end(words_), 0);
  any_ = all_ = false;
}

bool path_bits_may_hold(std::string_view bits, uint64_t h) {
  if (bits.empty()) return false;
  if (!well_formed(bits)) return true;  // not one flightrec writes: it hides nothing
  auto [a, b] = bits_of(h, bits.size() * 8);
  return (uint8_t(bits[a / 8]) >> (a % 8) & 1) && (uint8_t(bits[b / 8]) >> (b % 8) & 1);
}

}  // namespace flightrec::ledger
