#include "probe/features.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/system.h"
#include "probe/btf_scan.h"
#include "probe/uprobe_multi.h"

namespace flightrec::probe {
namespace {

// "r0 = 0; exit"
const bpf_insn kReturnZero[] = {
    {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0},
    {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
};

struct Btf {
  struct btf* btf = btf__load_vmlinux_btf();
  ~Btf() { btf__free(btf); }
  int id(const char* name, int kind) const {
    return btf ? btf__find_by_name_kind(btf, name, kind) : -1;
  }
};

std::string err_text(int err) { return err == 0 ? "" : strerror(err); }

// Loads a BTF-attached program and tries to attach it; returns "" on
// success or the reason it failed.
std::string try_btf_program(int btf_id, bpf_prog_type type, bpf_attach_type attach, const char* target) {
  if (btf_id <= 0) return std::string("no BTF for ") + target;
  LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = attach,
              .attach_btf_id = __u32(btf_id));
  int fd = bpf_prog_load(type, nullptr, "GPL", kReturnZero, 2, &opts);
  if (fd < 0) return "load: " + err_text(errno);
  int link = bpf_link_create(fd, 0, attach, nullptr);
  int err = errno;
  close(fd);
  if (link < 0) return "attach: " + err_text(err);
  close(link);
  return "";
}

std::string try_prog_type(bpf_prog_type type, bpf_attach_type attach) {
  LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = attach);
  int fd = bpf_prog_load(type, nullptr, "GPL", kReturnZero, 2, &opts);
  if (fd < 0) return "load: " + err_text(errno);
  close(fd);
  return "";
}

std::string try_map(bpf_map_type type, __u32 key, __u32 value, __u32 entries, __u32 flags) {
  LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = flags);
  int fd = bpf_map_create(type, nullptr, key, value, entries, &opts);
  if (fd < 0) return err_text(errno);
  close(fd);
  return "";
}

Feature make(std::string name, const std::string& failure, bool required, std::string ok_detail = "") {
  return Feature{std::move(name), failure.empty(), required, failure.empty() ? ok_detail : failure};
}

}  // namespace

std::vector<Feature> probe_features() {
  std::vector<Feature> out;
  bool root = geteuid() == 0;
  out.push_back(make("root", root ? "" : "not running as root", true));
  bool btf_file = access("/sys/kernel/btf/vmlinux", R_OK) == 0;
  out.push_back(make("kernel BTF", btf_file ? "" : "/sys/kernel/btf/vmlinux is missing", true,
                     "/sys/kernel/btf/vmlinux"));
  auto cg2 = find_mount("cgroup2");
  out.push_back(make("cgroup v2", cg2 ? "" : "not mounted", true, cg2.value_or("")));
  auto tracefs = find_mount("tracefs");
  out.push_back(make("tracefs mounted", tracefs ? "" : "not mounted (not needed: lite mode reads tracepoint ids from a private mount)", false,
                     tracefs.value_or("")));
  auto bpffs = find_mount("bpf");
  out.push_back(make("bpffs mounted", bpffs ? "" : "not mounted (not needed: nothing is pinned)",
                     false, bpffs.value_or("")));
  if (!root) return out;

  Btf btf;
  out.push_back(make("tp_btf raw tracepoints (sys_enter/exit, sched)",
                     try_btf_program(btf.id("btf_trace_sys_enter", BTF_KIND_TYPEDEF), BPF_PROG_TYPE_TRACING,
                                     BPF_TRACE_RAW_TP, "btf_trace_sys_enter"),
                     true));
  out.push_back(make("fentry", try_btf_program(btf.id("security_file_open", BTF_KIND_FUNC), BPF_PROG_TYPE_TRACING,
                                               BPF_TRACE_FENTRY, "security_file_open"),
                     false));
  out.push_back(make("BPF-LSM", try_btf_program(btf.id("bpf_lsm_file_open", BTF_KIND_FUNC), BPF_PROG_TYPE_LSM,
                                                BPF_LSM_MAC, "bpf_lsm_file_open"),
                     false));
  bool kprobe = access("/sys/bus/event_source/devices/kprobe/type", R_OK) == 0;
  out.push_back(make("kprobes", kprobe ? "" : "no kprobe PMU in this kernel", false));
  bool uprobe = access("/sys/bus/event_source/devices/uprobe/type", R_OK) == 0;
  out.push_back(make("uprobes", uprobe ? "" : "no uprobe PMU in this kernel", false));
  out.push_back(make("ring buffer", try_map(BPF_MAP_TYPE_RINGBUF, 0, 0, 4096 * 16, 0), true));
  out.push_back(make("cgroup connect4 programs",
                     try_prog_type(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_CGROUP_INET4_CONNECT), false));

  long landlock = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  out.push_back(make("Landlock", landlock > 0 ? "" : err_text(errno), false,
                     landlock > 0 ? "ABI " + std::to_string(landlock) : ""));
  bool seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
  out.push_back(make("seccomp", seccomp ? "" : err_text(errno), false));
  return out;
}

bool bpf_lsm_available() {
  // Asked again at load (and first by --deny-path's check): finding the
  // hook in the kernel's BTF and loading a program once per process is
  // enough. Every session start pays for it, so the id is scanned for, not
  // parsed out of the whole BTF (libbpf's parse, the fallback, costs ~40 ms).
  static const bool available = [] {
    const char* hook = "bpf_lsm_file_open";
    int id = scan_btf_func_id(hook).value_or(-1);
    if (id <= 0) id = Btf().id(hook, BTF_KIND_FUNC);
    return try_btf_program(id, BPF_PROG_TYPE_LSM, BPF_LSM_MAC, hook).empty();
  }();
  return available;
}

bool uprobe_multi_available() {
  static const bool available = [] {
    // A tiny program loaded for uprobe_multi, attached to a directory: a
    // kernel that knows uprobe_multi resolves the path and refuses it as
    // not a regular file (EBADF); one that does not refuses the attach
    // type itself (EINVAL).
    LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = bpf_attach_type(kTraceUprobeMulti));
    int prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, nullptr, "GPL", kReturnZero, 2, &opts);
    if (prog < 0) return false;
    int link = attach_uprobe_multi(prog, "/", {0}, {0}, false);
    close(prog);
    if (link >= 0) close(link);
    return link == -EBADF;
  }();
  return available;
}

void require_recording_features() {
  if (geteuid() != 0)
    throw Error("flightrec must run as root: loading BPF programs needs CAP_BPF, CAP_PERFMON and "
                "CAP_SYS_ADMIN");
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
    throw Error("this kernel has no BTF (/sys/kernel/btf/vmlinux is missing); flightrec needs a "
                "kernel built with CONFIG_DEBUG_INFO_BTF=y");
  if (!find_mount("cgroup2"))
    throw Error("no cgroup v2 hierarchy is mounted; mount one, e.g. "
                "mount -t cgroup2 none /sys/fs/cgroup/unified");
}

}  // namespace flightrec::probe
