#include "probe/btf_scan.h"

#include <fcntl.h>
#include <linux/btf.h>
#include <string.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace flightrec::probe {
namespace {

// Reads a byte range of a file forward through a fixed buffer.
class RangeReader {
 public:
  RangeReader(int fd, uint64_t begin, uint64_t end) : fd_(fd), next_(begin), end_(end), buf_(64 * 1024) {}

  bool read(void* dst, size_t n) {
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      if (pos_ == len_ && !fill()) return false;
      size_t take = std::min(n, len_ - pos_);
      if (out) memcpy(out, buf_.data() + pos_, take), out += take;
      pos_ += take;
      n -= take;
    }
    return true;
  }
  bool skip(size_t n) { return read(nullptr, n); }
  bool at_end() const { return pos_ == len_ && next_ == end_; }

  // The next chunk after keeping the last `keep` bytes of this one in
  // front of it (for matches across chunk boundaries); false at the end.
  bool next_chunk(size_t keep, const uint8_t** data, size_t* size) {
    keep = std::min(keep, len_);
    memmove(buf_.data(), buf_.data() + len_ - keep, keep);
    len_ = pos_ = keep;
    if (!fill_after(keep)) return false;
    *data = buf_.data();
    *size = len_;
    pos_ = len_;
    return true;
  }

 private:
  bool fill() {
    len_ = pos_ = 0;
    return fill_after(0);
  }
  bool fill_after(size_t at) {
    if (next_ >= end_) return false;
    size_t want = std::min<uint64_t>(buf_.size() - at, end_ - next_);
    ssize_t got = pread(fd_, buf_.data() + at, want, off_t(next_));
    if (got <= 0) return false;
    next_ += uint64_t(got);
    len_ = at + size_t(got);
    return true;
  }

  int fd_;
  uint64_t next_, end_;
  std::vector<uint8_t> buf_;
  size_t pos_ = 0, len_ = 0;
};

class Fd {
 public:
  explicit Fd(const std::string& path) : fd(open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~Fd() { if (fd >= 0) close(fd); }
  int fd;
};

}  // namespace

std::optional<uint64_t> btf_trailing_bytes(uint32_t kind, uint32_t vlen) {
  switch (kind) {
    case BTF_KIND_PTR: case BTF_KIND_FWD: case BTF_KIND_TYPEDEF: case BTF_KIND_VOLATILE:
    case BTF_KIND_CONST: case BTF_KIND_RESTRICT: case BTF_KIND_FUNC: case BTF_KIND_FLOAT:
    case 18 /* BTF_KIND_TYPE_TAG */:
      return 0;
    case BTF_KIND_INT: case BTF_KIND_VAR: case 17 /* BTF_KIND_DECL_TAG */:
      return 4;
    case BTF_KIND_ARRAY:
      return 12;
    case BTF_KIND_STRUCT: case BTF_KIND_UNION: case BTF_KIND_DATASEC: case 19 /* BTF_KIND_ENUM64 */:
      return 12ull * vlen;
    case BTF_KIND_ENUM: case BTF_KIND_FUNC_PROTO:
      return 8ull * vlen;
    default:
      return std::nullopt;
  }
}

std::optional<int> scan_btf_func_id(const std::string& name, const std::string& path) {
  if (name.empty() || name.size() > 256 || name.find('\0') != std::string::npos) return std::nullopt;
  Fd file(path);
  if (file.fd < 0) return std::nullopt;
  btf_header hdr{};
  if (pread(file.fd, &hdr, sizeof(hdr), 0) != ssize_t(sizeof(hdr)) || hdr.magic != BTF_MAGIC ||
      hdr.hdr_len < sizeof(hdr) || hdr.hdr_len > 4096)
    return std::nullopt;
  uint64_t types = uint64_t(hdr.hdr_len) + hdr.type_off, strings = uint64_t(hdr.hdr_len) + hdr.str_off;

  // The name's offset in the string section: strings are NUL-terminated
  // and the section starts with one, so the name is preceded by a NUL.
  std::string needle(1, '\0');
  needle += name;
  needle.push_back('\0');
  std::optional<uint32_t> name_off;
  RangeReader str(file.fd, strings, strings + hdr.str_len);
  uint64_t chunk_start = 0;  // section offset of the chunk's first byte
  const uint8_t* data;
  size_t size;
  while (!name_off && str.next_chunk(needle.size() - 1, &data, &size)) {
    if (auto* hit = static_cast<const uint8_t*>(memmem(data, size, needle.data(), needle.size())))
      name_off = uint32_t(chunk_start + uint64_t(hit - data) + 1);
    // The next chunk begins with this one's last needle.size()-1 bytes.
    chunk_start += size - std::min(needle.size() - 1, size);
  }
  if (!name_off) return std::nullopt;

  RangeReader types_in(file.fd, types, types + hdr.type_len);
  for (int id = 1; !types_in.at_end(); ++id) {
    btf_type t{};
    if (!types_in.read(&t, sizeof(t))) return std::nullopt;
    uint32_t kind = BTF_INFO_KIND(t.info);
    if (kind == BTF_KIND_FUNC && t.name_off == *name_off) return id;
    auto extra = btf_trailing_bytes(kind, BTF_INFO_VLEN(t.info));
    if (!extra || !types_in.skip(*extra)) return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace flightrec::probe
