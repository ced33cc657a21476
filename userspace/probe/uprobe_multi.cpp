#include "probe/uprobe_multi.h"

#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace flightrec::probe {
namespace {

// The BPF_LINK_CREATE member of union bpf_attr with its uprobe_multi
// arm (Linux 6.6), which the headers we build against do not have yet.
struct LinkCreateUprobeMulti {
  uint32_t prog_fd;
  uint32_t target_fd;
  uint32_t attach_type;
  uint32_t flags;
  uint64_t path;
  uint64_t offsets;
  uint64_t ref_ctr_offsets;
  uint64_t cookies;
  uint32_t cnt;
  uint32_t multi_flags;  // BPF_F_UPROBE_MULTI_RETURN
  uint32_t pid;
  uint32_t pad;
};
static_assert(sizeof(LinkCreateUprobeMulti) == 64);
constexpr uint32_t kMultiReturn = 1;  // BPF_F_UPROBE_MULTI_RETURN

int link_create(int prog_fd, const char* path, const uint64_t* offsets, const uint64_t* cookies, uint32_t cnt,
                bool ret) {
  LinkCreateUprobeMulti attr{};
  attr.prog_fd = uint32_t(prog_fd);
  attr.attach_type = kTraceUprobeMulti;
  attr.path = reinterpret_cast<uint64_t>(path);
  attr.offsets = reinterpret_cast<uint64_t>(offsets);
  attr.cookies = reinterpret_cast<uint64_t>(cookies);
  attr.cnt = cnt;
  attr.multi_flags = ret ? kMultiReturn : 0;
  long fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
  return fd < 0 ? -errno : int(fd);
}

}  // namespace

int attach_uprobe_multi(int prog_fd, const std::string& path, const std::vector<uint64_t>& offsets,
                        const std::vector<uint64_t>& cookies, bool ret) {
  if (offsets.empty() || cookies.size() != offsets.size()) return -EINVAL;
  return link_create(prog_fd, path.c_str(), offsets.data(), cookies.data(), uint32_t(offsets.size()), ret);
}

}  // namespace flightrec::probe
