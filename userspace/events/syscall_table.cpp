// The x86_64 syscall table: names by number, and which arguments of each
// syscall are strings or socket addresses to read (the map the BPF side
// consults; see include/flightrec/abi/events.h).
#include "events/syscall_table.h"

#include <array>

namespace flightrec::events {
namespace {

// Names from the kernel's arch/x86/entry/syscalls/syscall_64.tbl (common and
// 64-bit ABIs), up to Linux 6.18. Gaps are unassigned numbers.
constexpr const char* kNames[] = {
    "read", "write", "open", "close", "stat", "fstat", "lstat", "poll", "lseek", "mmap",
    "mprotect", "munmap", "brk", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "ioctl",
    "pread64", "pwrite64", "readv", "writev", "access", "pipe", "select", "sched_yield",
    "mremap", "msync", "mincore", "madvise", "shmget", "shmat", "shmctl", "dup", "dup2",
    "pause", "nanosleep", "getitimer", "alarm", "setitimer", "getpid", "sendfile", "socket",
    "connect", "accept", "sendto", "recvfrom", "sendmsg", "recvmsg", "shutdown", "bind",
    "listen", "getsockname", "getpeername", "socketpair", "setsockopt", "getsockopt", "clone",
    "fork", "vfork", "execve", "exit", "wait4", "kill", "uname", "semget", "semop", "semctl",
    "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl", "fcntl", "flock", "fsync", "fdatasync",
    "truncate", "ftruncate", "getdents", "getcwd", "chdir", "fchdir", "rename", "mkdir",
    "rmdir", "creat", "link", "unlink", "symlink", "readlink", "chmod", "fchmod", "chown",
    "fchown", "lchown", "umask", "gettimeofday", "getrlimit", "getrusage", "sysinfo", "times",
    "ptrace", "getuid", "syslog", "getgid", "setuid", "setgid", "geteuid", "getegid",
    "setpgid", "getppid", "getpgrp", "setsid", "setreuid", "setregid", "getgroups",
    "setgroups", "setresuid", "getresuid", "setresgid", "getresgid", "getpgid", "setfsuid",
    "setfsgid", "getsid", "capget", "capset", "rt_sigpending", "rt_sigtimedwait",
    "rt_sigqueueinfo", "rt_sigsuspend", "sigaltstack", "utime", "mknod", "uselib",
    "personality", "ustat", "statfs", "fstatfs", "sysfs", "getpriority", "setpriority",
    "sched_setparam", "sched_getparam", "sched_setscheduler", "sched_getscheduler",
    "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval", "mlock",
    "munlock", "mlockall", "munlockall", "vhangup", "modify_ldt", "pivot_root", "_sysctl",
    "prctl", "arch_prctl", "adjtimex", "setrlimit", "chroot", "sync", "acct", "settimeofday",
    "mount", "umount2", "swapon", "swapoff", "reboot", "sethostname", "setdomainname", "iopl",
    "ioperm", "create_module", "init_module", "delete_module", "get_kernel_syms",
    "query_module", "quotactl", "nfsservctl", "getpmsg", "putpmsg", "afs_syscall", "tuxcall",
    "security", "gettid", "readahead", "setxattr", "lsetxattr", "fsetxattr", "getxattr",
    "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr", "removexattr",
    "lremovexattr", "fremovexattr", "tkill", "time", "futex", "sched_setaffinity",
    "sched_getaffinity", "set_thread_area", "io_setup", "io_destroy", "io_getevents",
    "io_submit", "io_cancel", "get_thread_area", "lookup_dcookie", "epoll_create",
    "epoll_ctl_old", "epoll_wait_old", "remap_file_pages", "getdents64", "set_tid_address",
    "restart_syscall", "semtimedop", "fadvise64", "timer_create", "timer_settime",
    "timer_gettime", "timer_getoverrun", "timer_delete", "clock_settime", "clock_gettime",
    "clock_getres", "clock_nanosleep", "exit_group", "epoll_wait", "epoll_ctl", "tgkill",
    "utimes", "vserver", "mbind", "set_mempolicy", "get_mempolicy", "mq_open", "mq_unlink",
    "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr", "kexec_load", "waitid",
    "add_key", "request_key", "keyctl", "ioprio_set", "ioprio_get", "inotify_init",
    "inotify_add_watch", "inotify_rm_watch", "migrate_pages", "openat", "mkdirat", "mknodat",
    "fchownat", "futimesat", "newfstatat", "unlinkat", "renameat", "linkat", "symlinkat",
    "readlinkat", "fchmodat", "faccessat", "pselect6", "ppoll", "unshare", "set_robust_list",
    "get_robust_list", "splice", "tee", "sync_file_range", "vmsplice", "move_pages",
    "utimensat", "epoll_pwait", "signalfd", "timerfd_create", "eventfd", "fallocate",
    "timerfd_settime", "timerfd_gettime", "accept4", "signalfd4", "eventfd2", "epoll_create1",
    "dup3", "pipe2", "inotify_init1", "preadv", "pwritev", "rt_tgsigqueueinfo",
    "perf_event_open", "recvmmsg", "fanotify_init", "fanotify_mark", "prlimit64",
    "name_to_handle_at", "open_by_handle_at", "clock_adjtime", "syncfs", "sendmmsg", "setns",
    "getcpu", "process_vm_readv", "process_vm_writev", "kcmp", "finit_module", "sched_setattr",
    "sched_getattr", "renameat2", "seccomp", "getrandom", "memfd_create", "kexec_file_load",
    "bpf", "execveat", "userfaultfd", "membarrier", "mlock2", "copy_file_range", "preadv2",
    "pwritev2", "pkey_mprotect", "pkey_alloc", "pkey_free", "statx", "io_pgetevents", "rseq",
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
    "pidfd_send_signal", "io_uring_setup", "io_uring_enter", "io_uring_register", "open_tree",
    "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "pidfd_open", "clone3",
    "close_range", "openat2", "pidfd_getfd", "faccessat2", "process_madvise", "epoll_pwait2",
    "mount_setattr", "quotactl_fd", "landlock_create_ruleset", "landlock_add_rule",
    "landlock_restrict_self", "memfd_secret", "process_mrelease", "futex_waitv",
    "set_mempolicy_home_node", "cachestat", "fchmodat2", "map_shadow_stack", "futex_wake",
    "futex_wait", "futex_requeue", "statmount", "listmount", "lsm_get_self_attr",
    "lsm_set_self_attr", "lsm_list_modules", "mseal", "setxattrat", "getxattrat",
    "listxattrat", "removexattrat", "open_tree_attr", "file_getattr", "file_setattr",
};
constexpr uint32_t kNameCount = sizeof(kNames) / sizeof(kNames[0]);

constexpr uint8_t N = FR_ARG_NONE;

struct Row {
  uint32_t nr;
  uint8_t str0, str1;
  const char* str0_name;
  const char* str1_name;
  uint8_t sa, sa_len, sa_mode;
};

// Path- and string-taking syscalls (argument index of each string), and the
// ones that carry a socket address.
constexpr Row kRows[] = {
    {2, 0, N, "path", nullptr, N, N, FR_SA_NONE},         // open
    {4, 0, N, "path", nullptr, N, N, FR_SA_NONE},         // stat
    {6, 0, N, "path", nullptr, N, N, FR_SA_NONE},         // lstat
    {21, 0, N, "path", nullptr, N, N, FR_SA_NONE},        // access
    {42, N, N, nullptr, nullptr, 1, 2, FR_SA_IN},         // connect
    {43, N, N, nullptr, nullptr, 1, 2, FR_SA_OUT},        // accept
    {44, N, N, nullptr, nullptr, 4, 5, FR_SA_IN},         // sendto
    {46, N, N, nullptr, nullptr, 1, N, FR_SA_MSG},        // sendmsg: msghdr's msg_name
    {45, N, N, nullptr, nullptr, 4, 5, FR_SA_OUT},        // recvfrom
    {49, N, N, nullptr, nullptr, 1, 2, FR_SA_IN},         // bind
    {51, N, N, nullptr, nullptr, 1, 2, FR_SA_OUT},        // getsockname
    {52, N, N, nullptr, nullptr, 1, 2, FR_SA_OUT},        // getpeername
    {59, 0, N, "path", nullptr, N, N, FR_SA_NONE},        // execve
    {76, 0, N, "path", nullptr, N, N, FR_SA_NONE},        // truncate
    {80, 0, N, "path", nullptr, N, N, FR_SA_NONE},        // chdir
    {82, 0, 1, "oldpath", "newpath", N, N, FR_SA_NONE},   // rename
    {83, 0, N, "path", nullptr, N, N, FR_SA_NONE},        // mkdir
    {84, 0, N, "path", nullptr, N, N, FR_SA_NONE},        // rmdir
    {85, 0, N, "path", nullptr, N, N, FR_SA_NONE},        // creat
    {86, 0, 1, "oldpath", "newpath", N, N, FR_SA_NONE},   // link
    {87, 0, N, "path", nullptr, N, N, FR_SA_NONE},        // unlink
    {88, 0, 1, "target", "linkpath", N, N, FR_SA_NONE},   // symlink
    {89, 0, N, "path", nullptr, N, N, FR_SA_NONE},        // readlink
    {90, 0, N, "path", nullptr, N, N, FR_SA_NONE},        // chmod
    {92, 0, N, "path", nullptr, N, N, FR_SA_NONE},        // chown
    {94, 0, N, "path", nullptr, N, N, FR_SA_NONE},        // lchown
    {132, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // utime
    {133, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // mknod
    {137, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // statfs
    {155, 0, 1, "new_root", "put_old", N, N, FR_SA_NONE}, // pivot_root
    {161, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // chroot
    {163, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // acct
    {165, 0, 1, "mount_source", "target", N, N, FR_SA_NONE},    // mount
    {166, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // umount2
    {167, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // swapon
    {168, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // swapoff
    {188, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // setxattr
    {189, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // lsetxattr
    {191, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // getxattr
    {192, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // lgetxattr
    {194, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // listxattr
    {195, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // llistxattr
    {197, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // removexattr
    {198, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // lremovexattr
    {235, 0, N, "path", nullptr, N, N, FR_SA_NONE},       // utimes
    {254, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // inotify_add_watch
    {257, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // openat
    {258, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // mkdirat
    {259, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // mknodat
    {260, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // fchownat
    {261, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // futimesat
    {262, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // newfstatat
    {263, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // unlinkat
    {264, 1, 3, "oldpath", "newpath", N, N, FR_SA_NONE},  // renameat
    {265, 1, 3, "oldpath", "newpath", N, N, FR_SA_NONE},  // linkat
    {266, 0, 2, "target", "linkpath", N, N, FR_SA_NONE},  // symlinkat
    {267, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // readlinkat
    {268, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // fchmodat
    {269, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // faccessat
    {280, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // utimensat
    {288, N, N, nullptr, nullptr, 1, 2, FR_SA_OUT},       // accept4
    {301, 4, N, "path", nullptr, N, N, FR_SA_NONE},       // fanotify_mark
    {303, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // name_to_handle_at
    {307, N, N, nullptr, nullptr, 1, N, FR_SA_MSG},       // sendmmsg: the first message's
    {316, 1, 3, "oldpath", "newpath", N, N, FR_SA_NONE},  // renameat2
    {319, 0, N, "memfd_name", nullptr, N, N, FR_SA_NONE}, // memfd_create
    {322, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // execveat
    {332, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // statx
    {428, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // open_tree
    {429, 1, 3, "from_path", "to_path", N, N, FR_SA_NONE},// move_mount
    {430, 0, N, "fstype", nullptr, N, N, FR_SA_NONE},     // fsopen
    {433, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // fspick
    {437, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // openat2
    {439, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // faccessat2
    {442, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // mount_setattr
    {452, 1, N, "path", nullptr, N, N, FR_SA_NONE},       // fchmodat2
};

struct Table {
  std::array<SyscallInfo, FR_SYSCALL_TABLE_SIZE> info{};
  Table() {
    for (uint32_t nr = 0; nr < info.size(); ++nr) {
      auto& s = info[nr];
      s.name = nr < kNameCount ? kNames[nr] : nullptr;
      s.spec = {{N, N}, N, N, FR_SA_NONE, {0, 0, 0}};
    }
    for (const Row& r : kRows) {
      auto& s = info[r.nr];
      s.spec.str_arg[0] = r.str0;
      s.spec.str_arg[1] = r.str1;
      s.spec.sockaddr_arg = r.sa;
      s.spec.sockaddr_len_arg = r.sa_len;
      s.spec.sockaddr_mode = r.sa_mode;
      s.str_name[0] = r.str0_name;
      s.str_name[1] = r.str1_name;
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

const SyscallInfo* syscall_info(uint32_t nr) {
  return nr < FR_SYSCALL_TABLE_SIZE ? &table().info[nr] : nullptr;
}

std::optional<uint32_t> syscall_number(std::string_view name) {
  for (uint32_t nr = 0; nr < kNameCount; ++nr)
    if (kNames[nr] && name == kNames[nr]) return nr;
  return std::nullopt;
}

}  // namespace flightrec::events
