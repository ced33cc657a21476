#include "ledger/block.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "common/error.h"

namespace flightrec::ledger {
namespace {

// zstd's fastest standard level: the JSON of a block of similar entries
// still shrinks ~8x, at several hundred MB/s on the writer thread.
constexpr int kLevel = 1;

uint64_t fnv1a(const void* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(data)[i]) * 1099511628211ull;
  return h;
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char(v >> (8 * i)));
}

uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return v;
}

}  // namespace

bool has_type(std::string_view types, std::string_view type) {
  while (!types.empty()) {
    size_t sp = types.find(' ');
    if (types.substr(0, sp) == type) return true;
    if (sp == std::string_view::npos) break;
    types.remove_prefix(sp + 1);
  }
  return false;
}

uint64_t index_bit(int64_t pid) {
  uint64_t p = uint64_t(pid);
  return 1ull << (fnv1a(&p, sizeof(p)) % 64);
}

namespace {

constexpr size_t kSmallBlockBytes = 64 * 1024;

ZSTD_CCtx* new_cctx() {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  if (!c || ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, kLevel)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1))) {
    ZSTD_freeCCtx(c);
    throw std::bad_alloc();
  }
  return c;
}

}  // namespace

BlockBuilder::BlockBuilder() : cctx_(new_cctx()) {}

BlockBuilder::~BlockBuilder() { ZSTD_freeCCtx(cctx_); }

void BlockBuilder::add(std::string_view type, int64_t pid, int64_t ts, const Hash& leaf, std::string_view body,
                       std::span<const uint64_t> path_hashes, bool paths_all) {
  if (type.empty() || type.size() > 255 || type.find(' ') != std::string_view::npos || body.size() > std::numeric_limits<uint32_t>::max())
    throw Error("entry cannot be stored: type or size out of range");
  // Heads first, then the bodies: the bodies of similar entries lie side
  // by side, which is what the compressor finds.
  heads_.push_back(char(type.size()));
  heads_.append(type);
  put_le(heads_, uint64_t(pid), 8);
  heads_.append(reinterpret_cast<const char*>(leaf.data()), kStoredLeafBytes);
  put_le(heads_, body.size(), 4);
  bodies_.append(body);
  if (std::find(types_.begin(), types_.end(), type) == types_.end()) types_.emplace_back(type);
  pid_bits_ |= index_bit(pid);
  if (paths_all) paths_.set_all();
  for (uint64_t h : path_hashes) paths_.add(h);
  if (ts) {
    ts_min_ = ts_min_ && ts_min_ < ts ? ts_min_ : ts;
    ts_max_ = ts_max_ > ts ? ts_max_ : ts;
  }
  ++count_;
}

BlockRow BlockBuilder::seal(int64_t session, int64_t first_seq, const Hash& chain) {
  BlockRow row;
  row.session = session;
  row.first_seq = first_seq;
  row.count = count_;
  std::sort(types_.begin(), types_.end());
  for (const auto& t : types_) row.types += (row.types.empty() ? "" : " ") + t;
  row.pid_bits = pid_bits_;
  row.ts_min = ts_min_;
  row.ts_max = ts_max_;
  row.path_bits = paths_.stored();
  row.chain.assign(as_bytes(chain));
  heads_ += bodies_;
  // (frame_ only grows: sized afresh per block, it would be zeroed, and
  // mapped and faulted in, every time.)
  if (frame_.size() < ZSTD_compressBound(heads_.size())) frame_.resize(ZSTD_compressBound(heads_.size()));
  size_t n = ZSTD_compress2(cctx_, frame_.data(), frame_.size(), heads_.data(), heads_.size());
  if (ZSTD_isError(n)) throw Error(std::string("compressing a block failed: ") + ZSTD_getErrorName(n));
  row.data.assign(frame_.data(), n);
  bool small = heads_.size() < kSmallBlockBytes;
  heads_.clear();
  bodies_.clear();
  if (small) {
    // A quiet session's block: what compressing it took (zstd's tables, the
    // two halves' room) is given back; a daemon keeps hundreds of these.
    // A busy session's full blocks keep theirs for the next one.
    ZSTD_freeCCtx(cctx_);
    cctx_ = new_cctx();
    heads_.shrink_to_fit();  // (assigning an empty string would keep the room)
    bodies_.shrink_to_fit();
    frame_ = {};
  }
  count_ = 0;
  types_.clear();
  pid_bits_ = 0;
  ts_min_ = ts_max_ = 0;
  paths_.clear();
  return row;
}

void read_block(std::string_view data, int64_t count, std::string& scratch,
                const std::function<bool(const BlockEntry&)>& fn) {
  // One zstd frame, as written: its magic number, its content size and its
  // checksum (the descriptor's bit 2), and nothing after it (zstd would
  // decode a skippable or second frame too).
  unsigned long long size = ZSTD_getFrameContentSize(data.data(), data.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || data.size() < 5 ||
      data.substr(0, 4) != std::string_view("\x28\xb5\x2f\xfd", 4) || !(uint8_t(data[4]) & 0x04))
    throw Error("a block is not a zstd frame with its size and checksum (the record is corrupt)");
  size_t framed = ZSTD_findFrameCompressedSize(data.data(), data.size());
  if (ZSTD_isError(framed))
    throw Error(std::string("a block does not decompress (the record is corrupt): ") + ZSTD_getErrorName(framed));
  if (framed != data.size()) throw Error("a block holds more than its one zstd frame (the record is corrupt)");
  if (size > kBlockMaxRawBytes)
    throw Error("a block says it holds " + std::to_string(size) + " bytes, more than any block flightrec writes (" +
                std::to_string(kBlockMaxRawBytes) + "): the record is corrupt");
  scratch.resize(size);
  size_t n = ZSTD_decompress(scratch.data(), scratch.size(), data.data(), data.size());
  if (ZSTD_isError(n) || n != size)
    throw Error(std::string("a block does not decompress (the record is corrupt): ") +
                (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short"));
  const char* p = scratch.data();
  const char* end = p + n;
  auto corrupt = [](const std::string& what) { return Error("a block is malformed (" + what + "): the record is corrupt"); };
  // The heads, checked all before any entry is handed out.
  struct Head {
    std::string_view type, leaf;
    int64_t pid;
    size_t body_len;
  };
  if (count < 0 || uint64_t(count) > kBlockMaxEntries) throw corrupt("it claims " + std::to_string(count) + " entries");
  std::vector<Head> heads;
  heads.reserve(size_t(count));
  size_t bodies = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (end - p < 1) throw corrupt("it ends before its entry " + std::to_string(i + 1));
    size_t type_len = uint8_t(*p++);
    if (type_len == 0 || size_t(end - p) < type_len + 8 + kStoredLeafBytes + 4)
      throw corrupt("entry " + std::to_string(i + 1) + " is cut");
    Head h;
    h.type = std::string_view(p, type_len);
    p += type_len;
    h.pid = int64_t(get_le(p, 8));
    p += 8;
    h.leaf = std::string_view(p, kStoredLeafBytes);
    p += kStoredLeafBytes;
    h.body_len = get_le(p, 4);
    p += 4;
    bodies += h.body_len;
    heads.push_back(h);
  }
  if (size_t(end - p) < bodies) throw corrupt("its bodies are cut");
  if (size_t(end - p) > bodies) throw corrupt("it holds more than its " + std::to_string(count) + " entries");
  for (const Head& h : heads) {
    if (!fn(BlockEntry{h.type, h.pid, h.leaf, std::string_view(p, h.body_len)})) return;
    p += h.body_len;
  }
}

}  // namespace flightrec::ledger
