#include "daemon/discovery.h"

#include <dirent.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <iostream>

#include "common/error.h"
#include "common/system.h"
#include "common/text.h"

namespace flightrec::daemon {
namespace {

std::string join(const std::string& rel, const std::string& name) { return rel.empty() ? name : rel + "/" + name; }

bool under(const std::string& path, const std::string& rel) {
  return path == rel || rel.empty() || (path.size() > rel.size() && path.compare(0, rel.size(), rel) == 0 && path[rel.size()] == '/');
}

constexpr uint32_t kWatchMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_ONLYDIR |
                                IN_DONT_FOLLOW | IN_EXCL_UNLINK;

}  // namespace

Discovery::Discovery(std::string root, Rules rules) : root_(std::move(root)), rules_(std::move(rules)) {
  inotify_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_ < 0) throw Error(errno_message("inotify_init1", errno));
}

Discovery::~Discovery() { close(inotify_); }

void Discovery::visit(const std::string& rel, Changes& out) {
  if (rules_.matches(rel) && reported_.insert(rel).second) out.appeared.push_back(rel);
  if (!rel.empty() && !rules_.may_descend(rel)) return;
  std::string path = rel.empty() ? root_ : root_ + "/" + rel;
  // Watched before it is listed: a cgroup made in between is listed, or
  // its event comes (reported_ keeps it from being handed out twice).
  if (!watch_of_.count(rel)) {
    int wd = inotify_add_watch(inotify_, path.c_str(), kWatchMask);
    if (wd >= 0) {
      watched_[wd] = rel;
      watch_of_[rel] = wd;
    } else if (errno == ENOENT || errno == ENOTDIR) {
      return;  // gone meanwhile
    } else if (!unwatched_) {
      // Out of inotify watches (fs.inotify.max_user_watches): what is
      // below is still listed now, and by the periodic rescan later.
      unwatched_ = true;
      std::cerr << "flightrecd: " << errno_message("cannot watch " + printable(path) + " for new cgroups", errno)
                << "; new cgroups there are found by the rescan every few seconds\n";
    }
  }
  DIR* d = opendir(path.c_str());
  if (!d) return;
  std::vector<std::string> children;
  while (dirent* e = readdir(d))
    if (e->d_type == DT_DIR && std::string_view(e->d_name) != "." && std::string_view(e->d_name) != "..")
      children.push_back(e->d_name);
  closedir(d);
  for (const auto& child : children) visit(join(rel, child), out);
}

void Discovery::forget(const std::string& rel, Changes& out) {
  for (auto it = reported_.begin(); it != reported_.end();) {
    if (under(*it, rel)) {
      out.vanished.push_back(*it);
      it = reported_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = watch_of_.begin(); it != watch_of_.end();) {
    if (!rel.empty() && under(it->first, rel)) {
      inotify_rm_watch(inotify_, it->second);  // EINVAL when the kernel dropped it already
      watched_.erase(it->second);
      it = watch_of_.erase(it);
    } else {
      ++it;
    }
  }
}

Discovery::Changes Discovery::rescan(Rules rules) {
  rules_ = std::move(rules);
  Changes out;
  std::vector<std::string> gone;
  for (const auto& rel : reported_) {
    struct stat st {};
    if (!rules_.matches(rel) || stat((root_ + "/" + rel).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) gone.push_back(rel);
  }
  for (const auto& rel : gone)
    if (reported_.erase(rel)) out.vanished.push_back(rel);
  visit("", out);
  return out;
}

Discovery::Changes Discovery::read() {
  Changes out;
  alignas(inotify_event) char buf[64 * 1024];
  bool overflow = false;
  // Bounded, like the ring: a mkdir storm must not hold the daemon here.
  for (int reads = 0; reads < 16; ++reads) {
    ssize_t n = ::read(inotify_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EAGAIN: all read
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<inotify_event*>(p);
      p += sizeof(inotify_event) + ev->len;
      if (ev->mask & IN_Q_OVERFLOW) {
        overflow = true;
        continue;
      }
      auto it = watched_.find(ev->wd);
      if (it == watched_.end()) continue;
      std::string rel = it->second;
      if (ev->mask & IN_IGNORED) {  // the directory is gone: its watch with it
        watch_of_.erase(rel);
        watched_.erase(it);
        continue;
      }
      if (!(ev->mask & IN_ISDIR) || ev->len == 0) continue;
      std::string child = join(rel, ev->name);
      if (ev->mask & (IN_CREATE | IN_MOVED_TO)) visit(child, out);
      if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) forget(child, out);
    }
  }
  if (overflow) {
    // Events were lost: what the tree holds now is the truth.
    Changes again = rescan();
    out.appeared.insert(out.appeared.end(), again.appeared.begin(), again.appeared.end());
    out.vanished.insert(out.vanished.end(), again.vanished.begin(), again.vanished.end());
  }
  return out;
}

}  // namespace flightrec::daemon
