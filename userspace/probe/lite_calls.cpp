#include "probe/lite_calls.h"

namespace flightrec::probe {

const std::vector<LiteCall>& lite_calls() {
  // Rare calls that change files, identity, privileges, mounts, the
  // kernel or other processes, and the network calls that open
  // connections: what an audit of a production host asks about. Hot
  // data-path calls (read, write, send, recv, mmap, stat) are left out:
  // a call is only as cheap as the hooks it meets.
  static const std::vector<LiteCall> calls = {
      // Files: opens for writing (reads are counted only), and changes.
      {2, "open", FR_LITE_OPEN},
      {257, "openat", FR_LITE_OPEN},
      {437, "openat2", FR_LITE_RECORD},  // its flags are user memory another thread can rewrite: every call
      {85, "creat", FR_LITE_RECORD},
      {76, "truncate", FR_LITE_RECORD},
      {87, "unlink", FR_LITE_RECORD},
      {263, "unlinkat", FR_LITE_RECORD},
      {84, "rmdir", FR_LITE_RECORD},
      {82, "rename", FR_LITE_RECORD},
      {264, "renameat", FR_LITE_RECORD},
      {316, "renameat2", FR_LITE_RECORD},
      {86, "link", FR_LITE_RECORD},
      {265, "linkat", FR_LITE_RECORD},
      {88, "symlink", FR_LITE_RECORD},
      {266, "symlinkat", FR_LITE_RECORD},
      {133, "mknod", FR_LITE_RECORD},
      {259, "mknodat", FR_LITE_RECORD},
      {90, "chmod", FR_LITE_RECORD},
      {91, "fchmod", FR_LITE_RECORD},
      {268, "fchmodat", FR_LITE_RECORD},
      {452, "fchmodat2", FR_LITE_RECORD},
      {92, "chown", FR_LITE_RECORD},
      {93, "fchown", FR_LITE_RECORD},
      {94, "lchown", FR_LITE_RECORD},
      {260, "fchownat", FR_LITE_RECORD},
      {188, "setxattr", FR_LITE_RECORD},  // ACLs, security.capability: chmod's and setcap's equivalents
      {189, "lsetxattr", FR_LITE_RECORD},
      {190, "fsetxattr", FR_LITE_RECORD},
      {463, "setxattrat", FR_LITE_RECORD},
      {197, "removexattr", FR_LITE_RECORD},
      {198, "lremovexattr", FR_LITE_RECORD},
      {199, "fremovexattr", FR_LITE_RECORD},
      {466, "removexattrat", FR_LITE_RECORD},
      {469, "file_setattr", FR_LITE_RECORD},  // immutable and append-only flags, project ids (chattr's call, 6.17)
      {83, "mkdir", FR_LITE_RECORD},
      {258, "mkdirat", FR_LITE_RECORD},
      {132, "utime", FR_LITE_RECORD},  // timestamps set by hand (hiding when a file changed)
      {235, "utimes", FR_LITE_RECORD},
      {261, "futimesat", FR_LITE_RECORD},
      {280, "utimensat", FR_LITE_RECORD},
      {303, "name_to_handle_at", FR_LITE_RECORD},
      {304, "open_by_handle_at", FR_LITE_RECORD},  // opens by handle, past path checks: every call
      // Programs: failed execs (a successful one is the exec record).
      {59, "execve", FR_LITE_EXEC},
      {322, "execveat", FR_LITE_EXEC},
      // Network.
      {42, "connect", FR_LITE_RECORD},
      {49, "bind", FR_LITE_RECORD},
      {50, "listen", FR_LITE_RECORD},
      {43, "accept", FR_LITE_RECORD},
      {288, "accept4", FR_LITE_RECORD},
      // Identity and privileges.
      {460, "lsm_set_self_attr", FR_LITE_RECORD},  // the task's own LSM label (AppArmor, SELinux): 6.8
      {105, "setuid", FR_LITE_RECORD},
      {106, "setgid", FR_LITE_RECORD},
      {113, "setreuid", FR_LITE_RECORD},
      {114, "setregid", FR_LITE_RECORD},
      {117, "setresuid", FR_LITE_RECORD},
      {119, "setresgid", FR_LITE_RECORD},
      {122, "setfsuid", FR_LITE_RECORD},
      {123, "setfsgid", FR_LITE_RECORD},
      {116, "setgroups", FR_LITE_RECORD},
      {126, "capset", FR_LITE_RECORD},
      {157, "prctl", FR_LITE_PRCTL},  // the options that change privileges, tracing or seccomp
      {317, "seccomp", FR_LITE_RECORD},
      {248, "add_key", FR_LITE_RECORD},  // the kernel keyrings: credentials
      {249, "request_key", FR_LITE_RECORD},
      {250, "keyctl", FR_LITE_RECORD},
      // Other processes.
      {101, "ptrace", FR_LITE_RECORD},
      {310, "process_vm_readv", FR_LITE_RECORD},
      {311, "process_vm_writev", FR_LITE_RECORD},
      {438, "pidfd_getfd", FR_LITE_RECORD},
      // Mounts and namespaces.
      {165, "mount", FR_LITE_RECORD},
      {166, "umount", FR_LITE_RECORD},  // umount2's tracepoint (SYSCALL_DEFINE2(umount, ...))
      {155, "pivot_root", FR_LITE_RECORD},
      {161, "chroot", FR_LITE_RECORD},
      {428, "open_tree", FR_LITE_RECORD},
      {429, "move_mount", FR_LITE_RECORD},
      {430, "fsopen", FR_LITE_RECORD},
      {432, "fsmount", FR_LITE_RECORD},
      {442, "mount_setattr", FR_LITE_RECORD},
      {431, "fsconfig", FR_LITE_RECORD},  // with fspick: a remount without mount()
      {433, "fspick", FR_LITE_RECORD},
      {467, "open_tree_attr", FR_LITE_RECORD},
      {167, "swapon", FR_LITE_RECORD},
      {168, "swapoff", FR_LITE_RECORD},
      {179, "quotactl", FR_LITE_RECORD},
      {300, "fanotify_init", FR_LITE_RECORD},
      {301, "fanotify_mark", FR_LITE_RECORD},
      {272, "unshare", FR_LITE_RECORD},
      {308, "setns", FR_LITE_RECORD},
      // The kernel.
      {321, "bpf", FR_LITE_RECORD},
      {175, "init_module", FR_LITE_RECORD},
      {313, "finit_module", FR_LITE_RECORD},
      {176, "delete_module", FR_LITE_RECORD},
      {246, "kexec_load", FR_LITE_RECORD},
      {320, "kexec_file_load", FR_LITE_RECORD},
      {298, "perf_event_open", FR_LITE_RECORD},
      {323, "userfaultfd", FR_LITE_RECORD},
      {172, "iopl", FR_LITE_RECORD},
      {173, "ioperm", FR_LITE_RECORD},
      {103, "syslog", FR_LITE_RECORD},
      {163, "acct", FR_LITE_RECORD},
      {169, "reboot", FR_LITE_RECORD},
      {170, "sethostname", FR_LITE_RECORD},
      {171, "setdomainname", FR_LITE_RECORD},
      {164, "settimeofday", FR_LITE_RECORD},
      {227, "clock_settime", FR_LITE_RECORD},
      {159, "adjtimex", FR_LITE_RECORD},
      {305, "clock_adjtime", FR_LITE_RECORD},  // adjtimex for any clock: sets the time too
      {153, "vhangup", FR_LITE_RECORD},
      // io_uring's operations bypass the syscall tracepoints: its setup is
      // recorded, so the record says where lite stops seeing.
      {425, "io_uring_setup", FR_LITE_RECORD},
  };
  return calls;
}

}  // namespace flightrec::probe
