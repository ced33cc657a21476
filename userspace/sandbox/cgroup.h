#pragma once
// A cgroup v2 directory: the session's own (created and removed by us) or
// an existing one being watched. On hybrid hosts the v2 tree is found
// wherever cgroup2 is mounted (e.g. /sys/fs/cgroup/unified).
#include <sys/types.h>

#include <cstdint>
#include <string>

namespace flightrec::sandbox {

class Cgroup {
 public:
  // Creates <v2 root>/flightrec/<name>. Throws Error.
  static Cgroup create(const std::string& name);
  // Opens an existing cgroup v2 directory. Throws Error naming the problem.
  static Cgroup open(const std::string& path);

  Cgroup(Cgroup&& other) noexcept;
  Cgroup& operator=(Cgroup&&) = delete;
  ~Cgroup();

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  uint64_t id() const { return id_; }

  void add_process(pid_t pid);   // throws Error
  // Like fork() (0 in the child, -1 and errno on failure), with these
  // CLONE_NEW* flags, the child born in this cgroup (clone3's
  // CLONE_INTO_CGROUP, Linux 5.7+): no move, whose cgroup.procs write
  // waits for an RCU grace period. Where the kernel lacks it, the child is
  // moved here before this returns. A raw clone: the child may call only
  // what is safe after fork() in a multithreaded process, or own the
  // process (flightrec is single-threaded). Throws Error if the move fails
  // (the child is killed).
  pid_t fork_into(unsigned long namespace_flags);
  bool exists() const;           // false once the directory is removed
  bool populated() const;        // any process in it or below
  uint64_t cpu_usec() const;     // CPU time used in it and below (cpu.stat, in every v2 cgroup)
  // Kills every process in it and below (cgroup.kill, or SIGKILL each
  // member until it is empty on kernels without cgroup.kill).
  void kill_all();
  // Pauses (true) or resumes every process in it and below (cgroup.freeze).
  void freeze(bool frozen);
  // Removes the directory if we created it (and it is empty).
  void remove_if_owned();

 private:
  Cgroup(std::string path, int fd, uint64_t id, bool owned);
  std::string path_;
  int fd_ = -1;
  uint64_t id_ = 0;
  bool owned_ = false;
};

// The cgroup v2 mount point, or throws Error saying it is missing.
std::string cgroup2_root();

}  // namespace flightrec::sandbox
