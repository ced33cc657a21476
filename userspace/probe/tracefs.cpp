#include "probe/tracefs.h"

#include <sys/mount.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "common/error.h"
#include "common/system.h"

namespace flightrec::probe {
namespace {

std::vector<int64_t> read_ids(const std::string& root, const std::string& category,
                              const std::vector<std::string>& names) {
  std::vector<int64_t> ids;
  for (const auto& name : names) {
    auto text = try_read_file(root + "/events/" + category + "/" + name + "/id");
    char* end = nullptr;
    long long id = text ? std::strtoll(text->c_str(), &end, 10) : -1;
    ids.push_back(text && end != text->c_str() && id >= 0 ? int64_t(id) : -1);
  }
  return ids;
}

constexpr long kTracefsMagic = 0x74726163;  // TRACEFS_MAGIC

bool is_tracefs(const std::string& dir) {
  struct statfs fs {};
  return statfs(dir.c_str(), &fs) == 0 && fs.f_type == kTracefsMagic && access((dir + "/events").c_str(), R_OK) == 0;
}

}  // namespace

std::vector<int64_t> tracepoint_ids(const std::string& category, const std::vector<std::string>& names) {
  // Where the kernel's own tracefs is, checked by its file system magic
  // (a mount table entry names a place, not what is there now).
  for (std::string dir : {std::string("/sys/kernel/tracing"), find_mount("tracefs").value_or("")})
    if (!dir.empty() && is_tracefs(dir)) return read_ids(dir, category, names);
  char dir[] = "/tmp/flightrec-tracefs-XXXXXX";
  if (!mkdtemp(dir)) throw Error(errno_message("cannot make a directory to mount tracefs on", errno));
  // No options and no MS_RDONLY: on kernels where every tracefs mount is
  // one superblock, those would change the host's tracefs too.
  if (mount("tracefs", dir, "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    int err = errno;
    rmdir(dir);
    throw Error(errno_message("tracefs is not mounted and cannot be (lite mode reads tracepoint ids there)", err));
  }
  std::vector<int64_t> ids;
  try {
    ids = read_ids(dir, category, names);
  } catch (...) {
    umount2(dir, MNT_DETACH);
    rmdir(dir);
    throw;
  }
  umount2(dir, MNT_DETACH);
  rmdir(dir);
  return ids;
}

}  // namespace flightrec::probe
