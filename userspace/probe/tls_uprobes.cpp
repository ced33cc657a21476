#include "probe/tls_uprobes.h"

#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "common/system.h"
#include "probe/uprobe_multi.h"

namespace flightrec::probe {

std::vector<std::string> system_tls_libraries() {
  std::vector<std::string> found;
  for (const char* name : {"libssl.so.3", "libgnutls.so.30", "libnspr4.so", "libssl3.so"})
    for (const char* dir : {"/usr/lib/x86_64-linux-gnu/", "/usr/lib64/", "/usr/lib/"}) {
      std::string path = std::string(dir) + name;
      if (access(path.c_str(), R_OK) == 0) found.push_back(path);
    }
  return found;
}

TlsUprobes::TlsUprobes(bpf_program* enter, bpf_program* ret, bool multi) : enter_(enter), ret_(ret), multi_(multi) {}

TlsUprobes::~TlsUprobes() { drop(); }

void TlsUprobes::probe_system_tls() {
  for (const auto& path : system_tls_libraries()) {
    bool tls_file = false;
    std::string err = attach_tls(path, &tls_file);
    std::lock_guard lock(mu_);
    early_[path] = {err, tls_file};
  }
}

void TlsUprobes::drop() {
  {
    std::lock_guard lock(mu_);
    stop_detaching_ = true;
    detach_wanted_.notify_one();
  }
  if (detacher_.joinable()) detacher_.join();  // it detaches what was queued first
  std::lock_guard lock(mu_);
  for (auto& [id, file] : files_) {
    for (auto* link : file.links) bpf_link__destroy(link);
    for (int fd : file.link_fds) close(fd);
  }
  files_.clear();
  early_.clear();
}

uint32_t TlsUprobes::open_tenant() {
  std::lock_guard lock(mu_);
  tenants_.emplace(++last_tenant_, 0);
  return last_tenant_;
}

void TlsUprobes::destroy(std::vector<bpf_link*>& links, std::vector<int>& link_fds) noexcept {
  for (auto* link : links) bpf_link__destroy(link);
  for (int fd : link_fds) close(fd);
  links.clear();
  link_fds.clear();
}

void TlsUprobes::close_tenant(uint32_t tenant) noexcept {
  std::vector<bpf_link*> links;
  std::vector<int> link_fds;
  std::unique_lock lock(mu_);
  tenants_.erase(tenant);
  size_t files = 0;
  try {
    for (auto it = files_.begin(); it != files_.end();) {
      File& f = it->second;
      f.tenants.erase(tenant);
      if (f.charged_to == tenant) f.charged_to = 0;
      if (f.kept || !f.tenants.empty()) {
        ++it;
        continue;
      }
      links.insert(links.end(), f.links.begin(), f.links.end());
      link_fds.insert(link_fds.end(), f.link_fds.begin(), f.link_fds.end());
      ++files;
      it = files_.erase(it);
    }
    if (links.empty() && link_fds.empty()) return;
    if (!detacher_.joinable()) detacher_ = std::thread([this] { detach_worker(); });
    detach_links_.insert(detach_links_.end(), links.begin(), links.end());
    detach_fds_.insert(detach_fds_.end(), link_fds.begin(), link_fds.end());
    detaching_files_ += files;
    detach_wanted_.notify_one();
  } catch (const std::exception&) {
    // No memory or no thread: detached here, on the caller's time.
    lock.unlock();
    destroy(links, link_fds);
  }
}

void TlsUprobes::detach_worker() {
  std::unique_lock lock(mu_);
  for (;;) {
    detach_wanted_.wait(lock, [&] { return stop_detaching_ || !detach_links_.empty() || !detach_fds_.empty(); });
    if (detach_links_.empty() && detach_fds_.empty()) return;  // stopping, nothing left
    std::vector<bpf_link*> links = std::move(detach_links_);
    std::vector<int> link_fds = std::move(detach_fds_);
    size_t files = detaching_files_;  // counted until their links are gone
    detach_links_.clear();
    detach_fds_.clear();
    lock.unlock();
    destroy(links, link_fds);
    lock.lock();
    detaching_files_ -= files;
  }
}

// Removing uprobes makes the kernel wait ~0.1 s: once per probe where they
// are perf events (8 per libssl, before Linux 6.6), once per link with
// uprobe_multi (2 per libssl). Whoever drops the last reference to the
// probes pays, so a helper process shares them, waits for flightrec to exit
// and pays in the background. Until then the probes stay
// but have nothing to record: the session's cgroup is empty or gone.
static void hand_uprobes_to_background(std::vector<bpf_link*>& links, std::vector<int>& link_fds) {
  if (links.empty() && link_fds.empty()) return;
  int alive[2];
  if (pipe2(alive, O_CLOEXEC) != 0) return;  // fall back: detach here, slowly
  pid_t child = fork();
  if (child == 0) {
    if (fork() != 0) _exit(0);  // the grandchild is reparented: nobody waits for it
    close(alive[1]);
    // Keep only kernel objects (probes, links, maps: anon inodes) and the
    // pipe: a caller reading flightrec's output must see EOF when it exits.
    if (DIR* fds = opendir("/proc/self/fd")) {
      std::vector<int> to_close;
      while (dirent* d = readdir(fds)) {
        int fd = atoi(d->d_name);
        char target[64] = {};
        std::string link = std::string("/proc/self/fd/") + d->d_name;
        if (d->d_name[0] == '.' || fd == alive[0] || fd == dirfd(fds)) continue;
        if (readlink(link.c_str(), target, sizeof(target) - 1) < 0 || strncmp(target, "anon_inode:", 11) != 0)
          to_close.push_back(fd);
      }
      closedir(fds);
      for (int fd : to_close) close(fd);
    }
    char byte;
    while (read(alive[0], &byte, 1) > 0) {
    }
    _exit(0);  // flightrec is gone; closing the last references removes the probes
  }
  close(alive[0]);
  if (child < 0) {
    close(alive[1]);
    return;
  }
  waitpid(child, nullptr, 0);
  for (auto* link : links) {
    bpf_link__disconnect(link);  // keep the probes: only free libbpf's memory
    bpf_link__destroy(link);
  }
  links.clear();
  for (int fd : link_fds) close(fd);  // the helper holds them now
  link_fds.clear();
  // alive[1] stays open until flightrec exits; then the helper's read ends.
}

void TlsUprobes::detach_in_background() {
  std::lock_guard lock(mu_);
  std::vector<bpf_link*> links;
  std::vector<int> link_fds;
  for (auto& [id, file] : files_) {
    links.insert(links.end(), file.links.begin(), file.links.end());
    link_fds.insert(link_fds.end(), file.link_fds.begin(), file.link_fds.end());
    file.links.clear();
    file.link_fds.clear();
  }
  hand_uprobes_to_background(links, link_fds);
}

bool TlsUprobes::answers_quickly(int fd) const {
  struct stat st {};
  if (fstat(fd, &st) != 0) return true;  // refused at once
  {
    std::lock_guard lock(mu_);
    std::pair<uint64_t, uint64_t> id{st.st_dev, st.st_ino};
    if (files_.count(id) || refused_.count(id)) return true;
  }
  return tls_found_quickly(fd);
}

size_t TlsUprobes::files_probed() const {
  std::lock_guard lock(mu_);
  return files_.size();
}

std::vector<std::string> TlsUprobes::probed() const {
  std::lock_guard lock(mu_);
  std::vector<const File*> in_order;
  for (const auto& [id, file] : files_) in_order.push_back(&file);
  std::sort(in_order.begin(), in_order.end(), [](const File* a, const File* b) { return a->order < b->order; });
  std::vector<std::string> lines;
  for (const File* f : in_order) lines.push_back(f->line);
  return lines;
}

std::string TlsUprobes::attach_tls(const std::string& path, bool* tls_file, uint64_t* live_since_ns) {
  // Probed while the programs loaded (probe_system_tls): that answer, once
  // (asked when the probes went live, the file is looked up below).
  {
    std::lock_guard lock(mu_);
    if (auto early = early_.find(path); early != early_.end()) {
      auto [err, was_tls] = early->second;
      early_.erase(early);
      if (!live_since_ns) {
        if (tls_file) *tls_file = was_tls;
        return err;
      }
    }
  }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return errno_message(path, errno);
  std::string err = attach_tls(fd, path, tls_file, live_since_ns);
  close(fd);
  return err;
}

std::string TlsUprobes::attach_tls(int fd, const std::string& path, bool* tls_file, uint64_t* live_since_ns) {
  return attach_tls_as(0, fd, path, tls_file, live_since_ns);
}

std::string TlsUprobes::attach_tls_as(uint32_t tenant, int fd, const std::string& path, bool* tls_file,
                                      uint64_t* live_since_ns) {
  bool ignored;
  uint64_t ignored_since;
  if (!tls_file) tls_file = &ignored;
  if (!live_since_ns) live_since_ns = &ignored_since;
  *tls_file = false;
  *live_since_ns = 0;
  // Files come from what traced processes open: a FIFO named libssl.so
  // must not block us, and the number of files probed is bounded.
  struct stat st {};
  if (fstat(fd, &st) != 0) return errno_message(path, errno);
  if (!S_ISREG(st.st_mode)) return path + " is not a regular file";
  std::pair<uint64_t, uint64_t> id{st.st_dev, st.st_ino};
  // What is known of the file already.
  auto known = [&]() -> std::optional<std::string> {
    if (tenant && !tenants_.count(tenant)) return "TLS capture: the session has ended; not probing " + path;
    if (auto f = files_.find(id); f != files_.end()) {
      *tls_file = true;
      *live_since_ns = f->second.live_since_ns;
      // Already: probes are per file, not per path. Kept while this tenant is.
      if (tenant) f->second.tenants.insert(tenant);
      else f->second.kept = true;
      return "";
    }
    if (auto refused = refused_.find(id); refused != refused_.end()) {
      *tls_file = refused->second.second;
      return path + refused->second.first;
    }
    return std::nullopt;
  };
  // The caps, asked once the file is known to hold a TLS stack (*tls_file
  // set): the record then says why such a file was not probed.
  auto capped = [&]() -> std::optional<std::string> {
    if (files_.size() + detaching_files_ >= kTlsFilesMax)
      return "TLS capture: already " + std::to_string(kTlsFilesMax) + " files probed; not probing " + path;
    if (tenant && tenants_[tenant] >= kTlsFilesPerTenant)
      return "TLS capture: this session has " + std::to_string(kTlsFilesPerTenant) +
             " files probed already (each session's share); not probing " + path;
    return std::nullopt;
  };
  std::unique_lock lock(mu_);
  // Read once: another thread reading this file has its answer soon.
  reader_done_.wait(lock, [&] { return !reading_.count(id); });
  if (auto said = known()) return *said;
  // Read without the lock: a large file takes a while, and the other
  // thread may want the lock meanwhile for another file.
  reading_.insert(id);
  struct Read {  // done, however the read ends (an exception too): the waiters go on
    TlsUprobes& self;
    std::unique_lock<std::mutex>& lock;
    std::pair<uint64_t, uint64_t> id;
    ~Read() {
      if (!lock.owns_lock()) lock.lock();
      self.reading_.erase(id);
      self.reader_done_.notify_all();
    }
  } read{*this, lock, id};
  lock.unlock();
  TlsFinding found = find_tls_cached(fd);
  lock.lock();
  if (refused_.size() >= 4096) refused_.clear();
  if (found.entries.offsets.empty()) {  // remember, so the file is read once
    std::string why = found.tls ? ": " + found.stack + ": " + found.why : " " + found.why;
    refused_[id] = {why, found.tls};
    *tls_file = found.tls;
    return path + why;
  }
  const Uprobes& entries = found.entries;
  const Uprobes& rets = found.rets;
  *tls_file = true;
  // Bounded per file (and so per capture, at 64 files: 16384 uprobes, a
  // few MB of kernel memory no cgroup is charged for), whatever the file says.
  if (size_t n = entries.offsets.size() + rets.offsets.size(); n > kUprobesPerFileMax)
    return "TLS capture: " + path + " would take " + std::to_string(n) + " uprobes (at most " +
           std::to_string(kUprobesPerFileMax) + " per file): not probed";
  // Known now? (The tenant ended while the file was read.) Past a cap?
  if (auto said = known()) return *said;
  if (auto said = capped()) return *said;
  File file;
  if (std::string err = attach_uprobes(fd, path, entries, rets, found.uretprobes, file); !err.empty()) return err;
  *live_since_ns = mono_ns();  // every probe is attached: calls from now on are seen
  file.live_since_ns = *live_since_ns;
  file.line = "uprobe:" + path + ":";
  for (size_t i = 0; i < entries.names.size(); ++i) file.line += (i ? "," : "") + entries.names[i];
  file.order = ++probed_count_;
  if (tenant) {
    file.tenants.insert(tenant);
    file.charged_to = tenant;
    ++tenants_[tenant];
  } else {
    file.kept = true;
  }
  files_.emplace(id, std::move(file));
  return "";
}

bool TlsUprobes::probes_file(const std::string& path) {
  int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return false;
  bool probed = probes_file(fd);
  close(fd);
  return probed;
}

bool TlsUprobes::probes_file(int fd) const {
  struct stat st {};
  if (fstat(fd, &st) != 0) return false;
  std::lock_guard lock(mu_);
  return files_.count({st.st_dev, st.st_ino}) != 0;
}

std::string TenantTlsProbes::attach_tls(const std::string& library_path, bool* tls_file, uint64_t* live_since_ns) {
  int fd = open(library_path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return errno_message(library_path, errno);
  std::string err = attach_tls(fd, library_path, tls_file, live_since_ns);
  close(fd);
  return err;
}

std::string TlsUprobes::attach_uprobes(int fd, const std::string& path, const Uprobes& entries, const Uprobes& rets,
                                    bool uretprobes, File& file) {
  // The kernel finds the file through our descriptor, not by its name again.
  std::string by_fd = "/proc/self/fd/" + std::to_string(fd);
  if (multi_) {
    // Two links for the whole file: the entries (the cookie names the
    // function) and the returns.
    int enter = attach_uprobe_multi(bpf_program__fd(enter_), by_fd, entries.offsets, entries.cookies, false);
    if (enter < 0) return errno_message("cannot attach uprobes to " + path, -enter);
    int ret = attach_uprobe_multi(bpf_program__fd(ret_), by_fd, rets.offsets, rets.cookies, uretprobes);
    if (ret < 0) {
      close(enter);
      return errno_message("cannot attach return uprobes to " + path, -ret);
    }
    file.link_fds.push_back(enter);
    file.link_fds.push_back(ret);
    return "";
  }
  std::vector<bpf_link*> links;
  for (bool ret : {false, true}) {
    const Uprobes& probes = ret ? rets : entries;
    for (size_t i = 0; i < probes.offsets.size(); ++i) {
      LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = probes.cookies[i], .retprobe = ret && uretprobes);
      bpf_link* link =
          bpf_program__attach_uprobe_opts(ret ? ret_ : enter_, -1, by_fd.c_str(), probes.offsets[i], &uo);
      if (!link) {
        int err = errno;
        for (auto* l : links) bpf_link__destroy(l);
        return errno_message("cannot attach a uprobe to " + probes.names[i] + " in " + path, err);
      }
      links.push_back(link);
    }
  }
  file.links.insert(file.links.end(), links.begin(), links.end());
  return "";
}

}  // namespace flightrec::probe
