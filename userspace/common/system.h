#pragma once
// Small facts about the host and thin, checked wrappers over files.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"

namespace flightrec {

// A descriptor owned: closed when it goes (an object whose constructor
// throws after opening one leaks nothing).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

std::string read_file(const std::string& path);            // throws Error
std::optional<std::string> try_read_file(const std::string& path);
// The fields of /proc/PID/stat from the third on (state, ppid, ... : field
// N is at N - 3), read after the name's last ')' since a name may hold
// anything; nullopt once the task is gone.
std::optional<std::vector<std::string>> proc_stat_fields(int pid);
void write_file(const std::string& path, const std::string& data);  // throws Error
// mkdir -p, each new directory 0700; throws Error when a part cannot be
// made or path is not a directory.
void make_private_dirs(const std::string& path);

std::string host_name();
std::string kernel_release();
std::string boot_id();

// One descriptor over a Unix socket (SCM_RIGHTS), with one byte of data.
int send_fd(int sock, int fd);  // 0 or an errno; async-signal-safe (used after fork)
int receive_fd(int sock);       // the descriptor (close-on-exec), or -1
// Bytes with up to kMaxPassedFds descriptors beside them (SCM_RIGHTS), on a
// Unix stream socket: returns what send() would (MSG_NOSIGNAL is added).
constexpr size_t kMaxPassedFds = 4;
long send_with_fds(int sock, const std::string& bytes, const std::vector<int>& fds, int flags = 0);
// Reads up to `max` bytes into buf, as recv() would; the descriptors that
// came with them are appended to `fds` (close-on-exec), the caller's to close.
long receive_with_fds(int sock, char* buf, size_t max, std::vector<int>& fds, int flags = 0);

// Runs fn on a thread of its own, joined when the returned thread goes
// out of scope (or by join()); where no thread can be had, runs it here
// first and returns an empty one. fn must not throw.
std::jthread beside(std::function<void()> fn);

uint64_t mono_ns();   // CLOCK_MONOTONIC, the clock bpf_ktime_get_ns() reads
uint64_t real_ns();   // CLOCK_REALTIME

// Process `pid`'s working directory as it sees it (the kernel names it from
// the process's own root when ours cannot reach it); nullopt if gone.
std::optional<std::string> cwd_of(int pid);

// Opens `path` for reading as process `pid` names it, from the host:
// resolved inside the process's own root (a relative path from its working
// directory), so its symlinks (absolute ones too) and ".." never lead
// outside what it sees; magic links refused; never blocks (a FIFO, a
// device); regular files only. flightrec runs as host root: a path a
// recorded process supplied is opened this way or not at all.
// Returns the fd, or -1 with errno set.
int open_as_seen_by(int pid, const std::string& path);

// Reads exactly len bytes at off, across short reads (9p and FUSE files
// return them for large reads); false on an error or end of file first.
bool pread_full(int fd, void* buf, size_t len, uint64_t off);
// Writes all len bytes (again after EINTR and short writes); false on an error.
bool write_full(int fd, const void* buf, size_t len);

// Mount point of the first filesystem of this type in /proc/self/mountinfo.
std::optional<std::string> find_mount(const std::string& fstype);

// Where `name` would be executed from (PATH search as execvp does), or
// nullopt if nothing executable is there.
std::optional<std::string> find_executable(const std::string& name);
// The same, searching the directories of `dirs` ("a:b:c").
std::optional<std::string> find_executable(const std::string& name, const std::string& dirs);
// The same searches for a file that exists, executable or not (so a caller
// can tell "not found" from "not executable", as a shell's 127 and 126 do).
std::optional<std::string> find_file(const std::string& name);
std::optional<std::string> find_file(const std::string& name, const std::string& dirs);

}  // namespace flightrec
