#pragma once
// Ring-buffer records in the kernel's exact layout (flightrec/abi/events.h),
// made by hand, for tests that feed the decoder or a whole pipeline.
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "flightrec/abi/events.h"
}

namespace unit {

inline fr_header header(uint32_t type, uint32_t size, uint64_t ts_mono_ns = 1000) {
  fr_header h{};
  h.type = type;
  h.size = size;
  h.ts_mono_ns = ts_mono_ns;
  h.pid = 10;
  h.tid = 11;
  h.ppid = 1;
  h.uid = 1000;
  h.gid = 100;
  std::memcpy(h.comm, "tool", 4);
  return h;
}

// A syscall record; with strings (or a socket address) it carries the data part.
inline std::vector<uint8_t> syscall_record(uint32_t nr, int64_t ret, const std::vector<std::string>& strs,
                                           const void* sa = nullptr, uint16_t salen = 0, uint64_t ts_mono_ns = 1000) {
  bool data = !strs.empty() || sa;
  size_t total = sizeof(fr_syscall) + (data ? sizeof(fr_syscall_data) : 0);
  for (auto& s : strs) total += s.size();
  std::vector<uint8_t> buf(total, 0);
  fr_syscall r{};
  r.h = header(FR_REC_SYSCALL, uint32_t(total), ts_mono_ns);
  r.nr = nr;
  r.ret = ret;
  r.flags = data ? FR_SC_HAS_DATA : 0;
  r.sockaddr_len = salen;
  for (size_t i = 0; i < strs.size(); ++i) r.str_len[i] = uint16_t(strs[i].size());
  std::memcpy(buf.data(), &r, sizeof(r));
  if (sa) std::memcpy(buf.data() + sizeof(r), sa, salen);
  size_t off = sizeof(r) + sizeof(fr_syscall_data);
  for (auto& s : strs) {
    std::memcpy(buf.data() + off, s.data(), s.size());
    off += s.size();
  }
  return buf;
}

}  // namespace unit
