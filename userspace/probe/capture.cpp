#include "probe/capture.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <set>
#include <optional>
#include <sstream>
#include <system_error>
#include <thread>

#include "common/error.h"
#include "common/huge_heap.h"
#include "common/system.h"
#include "events/syscall_table.h"
#include "probe/brake.h"
#include "probe/core_btf.h"
#include "probe/features.h"
#include "probe/host_tasks.h"
#include "probe/lite_calls.h"
#include "probe/tracefs.h"
#include "probe/uprobe_multi.h"
#include "flightrec.skel.h"

namespace flightrec::probe {
namespace {

bool g_verbose = false;
thread_local std::string* g_log = nullptr;  // while loading: libbpf's messages, to find a refused program

int print_libbpf(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (g_log && level != LIBBPF_DEBUG) {
    // Whole: a verifier log ends with the reason (e.g. an unresolved
    // CO-RE relocation) after thousands of lines of instructions.
    va_list copy;
    va_copy(copy, args);
    int n = vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    if (n > 0) {
      std::string line(size_t(n) + 1, '\0');
      va_copy(copy, args);
      vsnprintf(line.data(), line.size(), fmt, copy);
      va_end(copy);
      line.pop_back();
      *g_log += line;
    }
  }
  if (!g_verbose) return 0;
  return vfprintf(stderr, fmt, args);
}

// The program libbpf says the kernel refused ("prog 'NAME': failed to load").
std::string refused_program(const std::string& log) {
  const std::string mark = "prog '", failed = "': failed to load";
  for (size_t at = log.find(mark); at != std::string::npos; at = log.find(mark, at + 1)) {
    size_t end = log.find('\'', at + mark.size());
    if (end != std::string::npos && log.compare(end, failed.size(), failed) == 0)
      return log.substr(at + mark.size(), end - at - mark.size());
  }
  return "";
}

// A rule "/a/b" is stored as "/a/b/" ("/" as itself): see fr_path_key.
void fill_path_rules(int trie, const PathRules& rules) {
  for (const auto& [path, number] : rules.match) {
    fr_path_key key{};
    std::string data = path == "/" ? path : path + "/";
    std::memcpy(key.data, data.data(), data.size());
    key.prefixlen = uint32_t(data.size() * 8);
    // The first rule to name a path keeps it (the record names that one).
    if (bpf_map_update_elem(trie, &key, &number, BPF_NOEXIST) != 0 && errno != EEXIST)
      throw Error(errno_message("cannot load the path rules", errno));
  }
}

// Every CPU's value of one key of a per-CPU map, into out. False (errno
// set) when it cannot be read, and when the CPU count is unknown (out empty).
template <class T>
bool read_per_cpu(int map, uint32_t key, std::vector<T>& out) {
  int ncpu = libbpf_num_possible_cpus();
  out.assign(size_t(std::max(0, ncpu)), T{});
  if (ncpu <= 0) return false;
  return bpf_map_lookup_elem(map, &key, out.data()) == 0;
}

}  // namespace

void select_programs(bpf_object* obj, bool lsm, bool tls) {
  bpf_program* prog;
  bpf_object__for_each_program(prog, obj) {
    std::string_view sec = bpf_program__section_name(prog);
    bool is_lsm = sec.rfind("lsm", 0) == 0;
    bool is_tls = sec.rfind("uprobe", 0) == 0 || sec.rfind("uretprobe", 0) == 0;
    if ((is_lsm && !lsm) || (is_tls && !tls)) bpf_program__set_autoload(prog, false);
  }
}

bool valid_ring_size(size_t bytes) {
  return bytes >= (64u << 10) && bytes <= (1u << 30) && (bytes & (bytes - 1)) == 0;
}

void quiet_libbpf(bool verbose) {
  g_verbose = verbose;
  libbpf_set_print(print_libbpf);
}

Capture::Capture(const CaptureOptions& opts, Handler handler) : handler_(std::move(handler)) {
  quiet_libbpf(opts.verbose);
  session_slots_ = std::clamp(opts.session_slots, 2u, uint32_t(FR_MAX_SESSIONS));
  if (!valid_ring_size(opts.ring_bytes))
    throw Error("ring buffer size must be a power of two from 64 KiB to 1 GiB");

  // BPF-LSM where the kernel allows it; elsewhere the syscall tracepoints
  // alone (the genesis entry's capture list says which).
  bool lsm = bpf_lsm_available();
  if (opts.require_lsm && !lsm)
    throw Error("this kernel refuses BPF-LSM programs, so the path rules (or ask.exec's grants) cannot be enforced; "
                "flightrec will not run the command unconfined (boot with lsm=...,bpf)");
  for (const auto* rules : {&opts.hidden, &opts.exec}) {
    if (rules->match.size() > FR_PATH_RULES)
      throw Error("at most " + std::to_string(FR_PATH_RULES) + " paths per kind of path rule");
    for (const auto& [path, number] : rules->match)
      if (path.empty() || path[0] != '/' || path.size() >= FR_PATH_RULE_MAX || number > rules->listed.size())
        throw Error("a path rule must be an absolute path shorter than " + std::to_string(FR_PATH_RULE_MAX) +
                    " bytes: '" + path + "'");
  }
  if (opts.tls && (opts.tls_chunk == 0 || opts.tls_chunk > FR_TLS_CHUNK_MAX ||
                   opts.tls_cap / opts.tls_chunk > FR_TLS_CHUNKS_MAX))
    throw Error("TLS capture: at most " + std::to_string(FR_TLS_CHUNK_MAX) + " bytes per record and " +
                std::to_string(FR_TLS_CHUNKS_MAX) + " records per call");
  bool egress = opts.egress_allowlist;
  tls_multi_ = opts.tls && uprobe_multi_available();
  if (opts.egress.size() > FR_EGRESS_MAX)
    throw Error("at most " + std::to_string(FR_EGRESS_MAX) + " egress allowlist addresses");

  // libbpf relocates against a cut of the kernel's BTF (probe/core_btf.h),
  // or against the whole of it where the cut cannot be made.
  size_t object_size = 0;
  const void* object = flightrec_bpf__elf_bytes(&object_size);
  std::string cut_why;
  struct CutFd {
    int fd;
    ~CutFd() { if (fd >= 0) close(fd); }
  } cut{kernel_btf_cut_fd(static_cast<const uint8_t*>(object), object_size, &cut_why)};
  std::string cut_path = cut.fd >= 0 ? "/proc/self/fd/" + std::to_string(cut.fd) : "";
  if (cut.fd >= 0 && access(cut_path.c_str(), R_OK) != 0) {  // no /proc here: libbpf could not open it
    cut_why = errno_message("cannot open " + cut_path, errno);
    close(cut.fd);
    cut.fd = -1;
  }
  if (cut.fd < 0 && opts.verbose)
    fprintf(stderr, "flightrec: relocating against the whole kernel BTF: %s\n", cut_why.c_str());
  LIBBPF_OPTS(bpf_object_open_opts, open_opts, .btf_custom_path = cut.fd >= 0 ? cut_path.c_str() : nullptr);

  // fr_sys_exit, the largest program to verify by far, is loaded on a
  // second thread as an object of its own while the rest loads here: the
  // kernel's verification is most of a session's start-up, and the two
  // halves take about as long. Both objects share every map, made first by
  // a third object without programs.
  bool split = opts.raw_syscalls;
  // The high-water mark as a fraction of a ring, 1/2^shift (0: none).
  uint32_t highwater_shift = opts.highwater_bytes ? 1 : 0;
  while (highwater_shift && highwater_shift < 30 && (opts.ring_bytes >> (highwater_shift + 1)) >= opts.highwater_bytes)
    ++highwater_shift;
  enum class Role { Maps, Main, Side };
  auto open_one = [&](Role role) {
    flightrec_bpf* s = flightrec_bpf__open_opts(&open_opts);
    if (!s) throw Error(errno_message("cannot open the BPF object", errno));
    s->rodata->fr_self_tgid = uint32_t(getpid());
    s->rodata->fr_tls_enabled = opts.tls ? 1 : 0;
    s->rodata->fr_exit_only = opts.entry_times ? 0 : 1;
    s->rodata->fr_tls_chunk = opts.tls_chunk;
    s->rodata->fr_tls_cap = opts.tls_cap;
    s->rodata->fr_highwater_shift = highwater_shift;
    s->rodata->fr_hidden_rules = opts.hidden.empty() ? 0 : 1;
    s->rodata->fr_exec_rules = opts.exec.empty() ? 0 : 1;
    s->rodata->fr_egress_count = uint32_t(opts.egress.size());
    s->rodata->fr_egress_lsm = egress && lsm ? 1 : 0;
    s->rodata->fr_view_gen_on = opts.view_gen_fd >= 0 ? 1 : 0;
    bpf_map__set_max_entries(s->maps.fr_events, uint32_t(opts.ring_bytes));
    for (bpf_map* m : {s->maps.fr_session_ring_of, s->maps.fr_session_live, s->maps.fr_session_tasks,
                       s->maps.fr_session_flags, s->maps.fr_session_drops, s->maps.fr_lite_uncounted})
      bpf_map__set_max_entries(m, session_slots_);
    bool makes_maps = role == Role::Maps || (role == Role::Main && !split);
    const std::pair<bpf_map*, int> shared[] = {  // made by the session for its grant supervisor and resolver
        {s->maps.fr_egress_granted, opts.egress_granted_fd}, {s->maps.fr_egress_tickets, opts.egress_tickets_fd},
        {s->maps.fr_egress_named, opts.egress_named_fd}, {s->maps.fr_exec_tickets, opts.exec_tickets_fd},
        {s->maps.fr_view_gen, opts.view_gen_fd}};
    bool reused = true;
    for (auto [map, fd] : shared) reused = reused && (!makes_maps || fd < 0 || bpf_map__reuse_fd(map, fd) == 0);
    if (!reused) {
      int e = errno;
      flightrec_bpf__destroy(s);
      throw Error(errno_message("cannot share the runtime grants' maps with the BPF programs", e));
    }
    bpf_program* prog;
    // --verbose: each program's verifier statistics (time, states), what
    // start-up is made of.
    if (g_verbose) bpf_object__for_each_program(prog, s->obj) bpf_program__set_log_level(prog, 4);
    if (role != Role::Main) {
      bpf_object__for_each_program(prog, s->obj)
        bpf_program__set_autoload(prog, role == Role::Side && prog == s->progs.fr_sys_exit);
      bpf_program__set_autoattach(s->progs.fr_sys_exit, false);
      return s;
    }
    select_programs(s->obj, lsm, opts.tls);
    if (!opts.entry_times || !opts.raw_syscalls) bpf_program__set_autoload(s->progs.fr_sys_enter, false);
    if (!opts.raw_syscalls || split) bpf_program__set_autoload(s->progs.fr_sys_exit, false);
    if (!opts.lite) bpf_program__set_autoload(s->progs.fr_lite_exit, false);
    // Attached by the first session that needs them (open_session): a
    // daemon with no full session makes no task on the host pay for them.
    bpf_program__set_autoattach(s->progs.fr_sys_enter, false);
    bpf_program__set_autoattach(s->progs.fr_sys_exit, false);
    if (tls_multi_)
      for (auto* p : {s->progs.fr_ssl_enter, s->progs.fr_ssl_ret})
        bpf_program__set_expected_attach_type(p, bpf_attach_type(kTraceUprobeMulti));
    for (const auto& name : refused_names_)
      if (auto* p = bpf_object__find_program_by_name(s->obj, name.c_str())) bpf_program__set_autoload(p, false);
    return s;
  };
  // Every map of `to` is the one `from` (loaded) made in its place: both
  // are the same ELF, so their maps come in the same order (not always
  // under the same names: a shared grants' map takes its maker's).
  auto share_maps = [](flightrec_bpf* from, flightrec_bpf* to) {
    bpf_map* made = bpf_object__next_map(from->obj, nullptr);
    for (bpf_map* map = bpf_object__next_map(to->obj, nullptr); map; map = bpf_object__next_map(to->obj, map)) {
      if (!made || bpf_map__reuse_fd(map, bpf_map__fd(made)) != 0) return -(errno ? errno : ENOENT);
      made = bpf_object__next_map(from->obj, made);
    }
    return 0;
  };

  // The capture's ring goes at index 0 of the table of rings. A map-in-map
  // update waits for an RCU grace period (~20 ms here): where the programs
  // load on two threads, it is slept through on a third meanwhile.
  auto place_capture_ring = [](int table, int events) {
    uint32_t zero = 0;
    return bpf_map_update_elem(table, &zero, &events, BPF_ANY) == 0 ? 0 : errno;
  };
  int rings_err = 0;
  // Load; where the kernel refuses one LSM program (a helper that hook may
  // not call on this kernel, a hook it does not have), load again without
  // it: that hook falls back to the tracepoints alone, and refused() says so.
  for (int attempt = 0;; ++attempt) {
    rings_err = 0;
    flightrec_bpf* maps = nullptr;
    try {
      maps = split ? open_one(Role::Maps) : nullptr;
      skel_ = open_one(Role::Main);
      side_ = split ? open_one(Role::Side) : nullptr;
    } catch (...) {
      flightrec_bpf__destroy(maps);
      flightrec_bpf__destroy(skel_);
      skel_ = nullptr;
      throw;
    }
    std::string log, side_log;
    int err = 0, side_err = 0;
    {
      HugeHeap heap;  // for libbpf's copies of the kernel's BTF
      g_log = &log;
      if (split) {
        err = flightrec_bpf__load(maps);
        if (!err) err = share_maps(maps, skel_);
        if (!err) err = share_maps(maps, side_);
        if (!err) {
          std::jthread rings = beside([&, table = bpf_map__fd(maps->maps.fr_session_rings),
                                       events = bpf_map__fd(maps->maps.fr_events)] {
            rings_err = place_capture_ring(table, events);
          });
          std::jthread side = beside([&] {
            HugeHeap::advise_arena();
            g_log = &side_log;
            side_err = flightrec_bpf__load(side_);
            g_log = nullptr;
          });
          g_log = &log;  // (unset if the side load ran here, for want of a thread)
          err = flightrec_bpf__load(skel_);
          // While fr_sys_exit's thread still verifies: the first uprobe of
          // a while waits for an RCU grace period (~10-25 ms here).
          if (!err) tls_ = std::make_unique<TlsUprobes>(skel_->progs.fr_ssl_enter, skel_->progs.fr_ssl_ret, tls_multi_);
          if (!err && opts.tls) tls_->probe_system_tls();
        }  // both threads joined
      } else {
        err = flightrec_bpf__load(skel_);
      }
      g_log = nullptr;
    }
    flightrec_bpf__destroy(maps);  // the loaded objects hold its maps
    log += side_log;
    if (!err) err = side_err;
    if (!err && !tls_) tls_ = std::make_unique<TlsUprobes>(skel_->progs.fr_ssl_enter, skel_->progs.fr_ssl_ret, tls_multi_);
    if (!err) break;
    std::string name = refused_program(log);
    auto* prog = name.empty() ? nullptr : bpf_object__find_program_by_name(skel_->obj, name.c_str());
    std::string section = prog ? bpf_program__section_name(prog) : "";
    flightrec_bpf__destroy(side_);
    side_ = nullptr;
    tls_.reset();  // they ran this attempt's programs
    flightrec_bpf__destroy(skel_);
    skel_ = nullptr;
    // The cut of the kernel's BTF is never why a program is lost: where
    // libbpf could not use it, or left a relocation unresolved (libbpf's
    // poison, 0xbad2310, names it in the verifier log), load once more
    // against the whole BTF.
    if (open_opts.btf_custom_path &&
        (name.empty() || log.find("CO-RE relocation") != std::string::npos || log.find("195896080") != std::string::npos)) {
      if (opts.verbose) fprintf(stderr, "flightrec: loading again, relocated against the whole kernel BTF\n");
      open_opts.btf_custom_path = nullptr;
      continue;
    }
    // Where BPF-LSM alone enforces the path rules (or exec grants), the
    // hooks that keep a session from changing its view of the paths (a
    // user namespace, a mount, a chroot) must hold as well as file_open.
    static const char* kViewHooks[] = {"lsm/file_open", "lsm/userns_create", "lsm/sb_mount", "lsm/move_mount",
                                       "lsm/path_chroot"};
    bool view_hook = std::find(std::begin(kViewHooks), std::end(kViewHooks), section) != std::end(kViewHooks);
    bool optional = section.rfind("lsm/", 0) == 0 && !(view_hook && opts.require_lsm);
    if (!optional || attempt >= 16)
      throw Error(errno_message("the kernel refused flightrec's BPF program " + (name.empty() ? "" : name + " ") +
                                    "(run with --verbose for the verifier log)",
                                -err));
    refused_names_.push_back(name);
    refused_.push_back(section);
  }
  auto loaded = [&](const char* section) { return std::find(refused_.begin(), refused_.end(), section) == refused_.end(); };
  path_rules_ = lsm && (!opts.hidden.empty() || !opts.exec.empty()) && loaded("lsm/file_open");
  entry_times_ = opts.entry_times && opts.raw_syscalls;
  unix_inbound_ = lsm && egress && loaded("lsm/socket_post_create") && loaded("lsm/unix_stream_connect") &&
                  loaded("lsm/unix_may_send");
  try {
    int specs = bpf_map__fd(skel_->maps.fr_syscall_specs);
    for (uint32_t nr = 0; nr < FR_SYSCALL_TABLE_SIZE; ++nr) {
      const auto* info = events::syscall_info(nr);
      if (bpf_map_update_elem(specs, &nr, &info->spec, BPF_ANY) != 0)
        throw Error(errno_message("cannot fill the syscall table map", errno));
    }
    fill_path_rules(bpf_map__fd(skel_->maps.fr_hidden_paths), opts.hidden);
    fill_path_rules(bpf_map__fd(skel_->maps.fr_exec_paths), opts.exec);
    ring_ = std::make_unique<RingReader>(bpf_map__fd(skel_->maps.fr_events), opts.ring_bytes);
    if (int err = flightrec_bpf__attach(skel_))
      throw Error(errno_message("cannot attach flightrec's BPF programs", -err));
    if (!split)
      rings_err = place_capture_ring(bpf_map__fd(skel_->maps.fr_session_rings), bpf_map__fd(skel_->maps.fr_events));
    if (rings_err) throw Error(errno_message("cannot fill the table of ring buffers", rings_err));
    // After the process programs: a task that forked or exited in between
    // would join the session unseen by them and never be counted out.
    if (!opts.session_cgroups.empty()) first_session_ = open_session(opts.session_cgroups, {.lite = opts.session_lite});
    // For lsm/socket_connect (the cgroup programs have their own: EgressFilter).
    int rules = bpf_map__fd(skel_->maps.fr_egress);
    for (uint32_t i = 0; egress && i < opts.egress.size(); ++i)
      if (bpf_map_update_elem(rules, &i, &opts.egress[i], BPF_ANY) != 0)
        throw Error(errno_message("cannot load the egress allowlist", errno));
  } catch (...) {
    for (auto* link : lite_links_) bpf_link__destroy(link);
    bpf_link__destroy(enter_link_);
    bpf_link__destroy(exit_link_);
    ring_.reset();
    tls_.reset();
    flightrec_bpf__destroy(side_);
    flightrec_bpf__destroy(skel_);
    throw;
  }
}

Capture::~Capture() {
  for (auto* link : lite_links_) bpf_link__destroy(link);
  bpf_link__destroy(enter_link_);
  bpf_link__destroy(exit_link_);
  if (tls_) tls_->detach_in_background();
  tls_.reset();
  ring_.reset();
  for (const auto& [index, ring] : rings_) close(ring.fd);
  flightrec_bpf__destroy(side_);
  flightrec_bpf__destroy(skel_);
}

void Capture::attach_raw(bool entry) {
  auto attach = [](bpf_program* prog) {
    bpf_link* link = bpf_program__attach(prog);
    if (!link)
      throw Error(errno_message(std::string("cannot attach ") + bpf_program__section_name(prog), errno));
    return link;
  };
  // sys_exit first: a call sys_enter saw begins is always seen to end.
  if (!exit_link_) exit_link_ = attach(sys_exit_program());
  if (entry && !enter_link_) enter_link_ = attach(skel_->progs.fr_sys_enter);
}

void Capture::release_idle_programs(uint64_t idle_ns) {
  uint64_t now = mono_ns();
  // sys_enter first, for the same reason.
  if (entry_sessions_.empty() && enter_link_ && now - entry_closed_ns_ >= idle_ns) {
    bpf_link__destroy(enter_link_);
    enter_link_ = nullptr;
  }
  if (full_sessions_.empty() && exit_link_ && now - full_closed_ns_ >= idle_ns) {
    bpf_link__destroy(exit_link_);
    exit_link_ = nullptr;
  }
}

void Capture::attach_lite() {
  const auto& calls = lite_calls();
  int kinds = bpf_map__fd(skel_->maps.fr_lite_calls);
  std::vector<std::string> names;
  for (const auto& c : calls) {
    uint32_t kind = c.kind;
    if (bpf_map_update_elem(kinds, &c.nr, &kind, BPF_ANY) != 0)
      throw Error(errno_message("cannot fill the lite call table", errno));
    names.push_back(std::string("sys_exit_") + c.tracepoint);
  }
  std::vector<int64_t> ids = tracepoint_ids("syscalls", names);
  // A call this kernel does not have (fchmodat2 before 6.6, init_module
  // without CONFIG_MODULES) has no tracepoint: it fails with ENOSYS. The
  // genesis entry lists them (capture_absent).
  std::vector<std::string> absent;
  for (size_t i = 0; i < names.size(); ++i)
    if (ids[i] < 0) absent.push_back(calls[i].tracepoint);
  // The calls every audit asks about: without them lite would record
  // next to nothing, and say nothing.
  for (const char* core : {"openat", "execve", "connect", "unlinkat", "renameat2", "setuid"})
    if (std::find(absent.begin(), absent.end(), std::string(core)) != absent.end())
      throw Error(std::string("this kernel has no syscalls:sys_exit_") + core +
                  " tracepoint (CONFIG_FTRACE_SYSCALLS); lite mode cannot record here");
  std::vector<bpf_link*> links;  // all or none: a retry must not attach twice
  std::vector<std::string> attached;
  auto fail = [&](const std::string& what, int err) {
    for (auto* l : links) bpf_link__destroy(l);
    throw Error(errno_message(what, err));
  };
  for (size_t i = 0; i < names.size(); ++i) {
    if (ids[i] < 0) continue;
    perf_event_attr attr{};
    attr.type = PERF_TYPE_TRACEPOINT;
    attr.size = sizeof(attr);
    attr.config = uint64_t(ids[i]);
    attr.sample_period = 1;
    attr.wakeup_events = 1;
    // One event serves every CPU: the program hangs off the tracepoint itself.
    int fd = int(syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) fail("cannot open the tracepoint syscalls:" + names[i], errno);
    // The cookie is the call's number: fr_lite_exit ignores a tracepoint
    // that fires for another call (an id that was not what it seemed).
    LIBBPF_OPTS(bpf_perf_event_opts, opts, .bpf_cookie = calls[i].nr);
    bpf_link* link = bpf_program__attach_perf_event_opts(skel_->progs.fr_lite_exit, fd, &opts);
    if (!link) {
      int err = errno;
      close(fd);
      fail("cannot attach to the tracepoint syscalls:" + names[i], err);
    }
    links.push_back(link);  // owns fd
    attached.push_back("tracepoint/syscalls/" + names[i]);
  }
  lite_links_ = std::move(links);
  lite_attached_ = std::move(attached);
  lite_absent_ = std::move(absent);
  lite_on_ = true;
}

std::vector<Capture::LiteCount> Capture::take_lite_counts() {
  std::vector<LiteCount> out;
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0 || !bpf_program__autoload(skel_->progs.fr_lite_exit)) return out;
  int map = bpf_map__fd(skel_->maps.fr_lite_counts);
  // Read and removed in one step, bucket by bucket: each count is handed
  // out once, and the table holds only what was counted since.
  uint32_t chunk = 1024;
  fr_lite_count_key in{}, next{};  // batch positions (the kernel's need no more than a key's room)
  bool first = true;
  std::vector<fr_lite_count_key> keys;
  std::vector<uint64_t> values;
  for (;;) {
    keys.resize(chunk);
    values.resize(size_t(chunk) * size_t(ncpu));
    uint32_t count = chunk;
    int err = bpf_map_lookup_and_delete_batch(map, first ? nullptr : &in, &next, keys.data(), values.data(), &count,
                                              nullptr);
    int e = err ? errno : 0;
    for (uint32_t i = 0; i < count && i < chunk; ++i) {
      LiteCount c{keys[i].session, keys[i].nr, keys[i].cgroup_id, 0};
      for (int cpu = 0; cpu < ncpu; ++cpu) c.calls += values[size_t(i) * size_t(ncpu) + size_t(cpu)];
      if (c.calls) out.push_back(c);
    }
    if (err && e == ENOENT) break;  // the end of the table
    if (err && e == ENOSPC && count == 0) {
      chunk *= 2;  // one bucket holds more keys than fit
      if (chunk > FR_LITE_COUNT_KEYS) throw Error("cannot read the lite call counts: a bucket larger than the table");
      continue;
    }
    if (err) throw Error(errno_message("cannot read the lite call counts", e));
    in = next;
    first = false;
  }
  return out;
}

uint64_t Capture::lite_uncounted(uint32_t session) const {
  std::vector<uint64_t> per_cpu;
  if (!read_per_cpu(bpf_map__fd(skel_->maps.fr_lite_uncounted), session % FR_MAX_SESSIONS, per_cpu)) return 0;
  uint64_t n = 0;
  for (uint64_t v : per_cpu) n += v;
  return n;
}

uint32_t Capture::open_first_session(const std::vector<uint64_t>& cgroup_ids, const SessionSpec& spec) {
  if (first_session_) throw Error("the capture's first session is open already");
  first_session_ = open_session(cgroup_ids, spec);
  return first_session_;
}

uint32_t Capture::open_session(const std::vector<uint64_t>& cgroup_ids, const SessionSpec& spec) {
  bool lite = spec.lite;
  bool entry = !lite && spec.entry_times && entry_times_;
  size_t own_ring_bytes = spec.own_ring_bytes;
  if (cgroup_ids.empty()) throw Error("a session observes at least one cgroup");
  if (own_ring_bytes && (own_ring_bytes < (64u << 10) || (own_ring_bytes & (own_ring_bytes - 1)) ||
                         own_ring_bytes > (1u << 30)))
    throw Error("a session's ring buffer is a power of two from 64 KiB to 1 GiB");
  if (lite && !bpf_program__autoload(skel_->progs.fr_lite_exit))
    throw Error("lite sessions need the lite programs loaded (CaptureOptions::lite)");
  if (!lite && !bpf_program__autoload(sys_exit_program()))
    throw Error("full sessions need the raw syscall programs loaded (CaptureOptions::raw_syscalls)");
  if (lite && !lite_on_) attach_lite();
  if (!lite) attach_raw(entry);
  size_t listed = 0;
  for (const auto& [number, ids] : sessions_) listed += ids.size();
  if (sessions_.size() >= FR_MAX_SESSIONS || listed + cgroup_ids.size() > FR_SESSION_CGROUPS)
    throw Error("at most " + std::to_string(FR_MAX_SESSIONS) + " sessions and " +
                std::to_string(FR_SESSION_CGROUPS) + " cgroups are recorded at once");
  if (session_slots_ < FR_MAX_SESSIONS && next_session_ >= session_slots_)
    throw Error("this capture records one session only (CaptureOptions::session_slots)");
  for (uint64_t id : cgroup_ids)
    if (owner_of(id)) throw Error("cgroup " + std::to_string(id) + " is already recorded by another session");
  // A number whose slot an open session holds is skipped (slots are the
  // number modulo FR_MAX_SESSIONS); 0 means "none" and is never given.
  uint32_t session = next_number();
  ++next_session_;
  int map = bpf_map__fd(skel_->maps.fr_sessions);
  int live = bpf_map__fd(skel_->maps.fr_session_live);
  uint32_t slot = session % FR_MAX_SESSIONS;
  // The slot is made ready (task counts from zero: a closed session may
  // have left some) and the session open before any cgroup leads to it: a
  // task that joined earlier would find its session closed, be let go and
  // join again, counted twice and keeping the session open forever.
  std::vector<fr_session_tasks> zeros(size_t(std::max(1, libbpf_num_possible_cpus())));
  std::vector<uint64_t> no_calls(zeros.size(), 0);
  uint32_t flags = (lite ? FR_SESSION_LITE : 0) | (own_ring_bytes ? FR_SESSION_OWN_RING : 0) |
                   (entry ? FR_SESSION_ENTRY : 0) | (spec.brake ? FR_SESSION_BRAKE : 0),
           closed = 0;
  // Its ring: an idle one of its size (no wait), or a new one.
  uint32_t index = 0;
  if (own_ring_bytes && !(index = idle_ring(own_ring_bytes))) {
    int ring = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "fr_session_ring", 0, 0, uint32_t(own_ring_bytes), nullptr);
    if (ring < 0) throw Error(errno_message("cannot make the session's ring buffer", errno));
    if (!(index = place_ring(ring))) {
      int err = errno;
      close(ring);
      throw Error(errno_message("cannot put the session's ring buffer in the kernel's table", err));
    }
    rings_[index] = {ring, own_ring_bytes};
  }
  auto undo = [&](size_t added) {
    for (size_t i = 0; i < added; ++i) bpf_map_delete_elem(map, &cgroup_ids[i]);
    bpf_map_update_elem(live, &slot, &closed, BPF_ANY);
  };
  // Its ring first: a record of the session never finds none.
  fr_ring_slot ring_slot{index, uint32_t(index ? own_ring_bytes : ring_->size())};
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.fr_session_ring_of), &slot, &ring_slot, BPF_ANY) != 0 ||
      bpf_map_update_elem(bpf_map__fd(skel_->maps.fr_session_drops), &slot, no_calls.data(), BPF_ANY) != 0 ||
      bpf_map_update_elem(bpf_map__fd(skel_->maps.fr_session_tasks), &slot, zeros.data(), BPF_ANY) != 0 ||
      bpf_map_update_elem(bpf_map__fd(skel_->maps.fr_lite_uncounted), &slot, no_calls.data(), BPF_ANY) != 0 ||
      bpf_map_update_elem(bpf_map__fd(skel_->maps.fr_session_flags), &slot, &flags, BPF_ANY) != 0 ||
      bpf_map_update_elem(live, &slot, &session, BPF_ANY) != 0) {
    int err = errno;
    undo(0);
    throw Error(errno_message("cannot open the session", err));
  }
  for (size_t i = 0; i < cgroup_ids.size(); ++i)
    if (bpf_map_update_elem(map, &cgroup_ids[i], &session, BPF_NOEXIST) != 0) {
      int err = errno;
      undo(i);
      throw Error(errno_message("cannot register the session's cgroup", err));
    }
  if (index) {
    OwnRing& r = rings_[index];
    r.session = r.last = session;
    r.read = true;
    r.reusable = false;  // until its reader says it ended cleanly
  }
  // Verdicts worked out before now may have missed this session.
  __atomic_add_fetch(&skel_->bss->fr_session_gen, 1, __ATOMIC_SEQ_CST);
  sessions_.emplace_back(session, cgroup_ids);
  if (!lite) full_sessions_.insert(session);
  if (entry) entry_sessions_.insert(session);
  return session;
}

int Capture::exec_notices_fd() const { return bpf_map__fd(skel_->maps.fr_exec_notices); }

int Capture::session_ring(uint32_t session) const {
  for (const auto& [index, ring] : rings_)
    if (ring.session == session) return ring.fd;
  return -1;
}

std::vector<uint64_t> Capture::session_drops(uint32_t session) const {
  std::vector<uint64_t> per_cpu;
  if (!read_per_cpu(bpf_map__fd(skel_->maps.fr_session_drops), session % FR_MAX_SESSIONS, per_cpu) &&
      !per_cpu.empty())
    throw Error(errno_message("cannot read the session's drop counters", errno));
  return per_cpu;
}

int Capture::session_drops_map_readonly() const {
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(bpf_map__fd(skel_->maps.fr_session_drops), &info, &len) != 0) return -1;
  LIBBPF_OPTS(bpf_get_fd_by_id_opts, opts, .open_flags = BPF_F_RDONLY);
  return bpf_map_get_fd_by_id_opts(info.id, &opts);
}

uint32_t Capture::owner_of(uint64_t cgroup_id) const {
  for (const auto& [number, ids] : sessions_)
    if (std::find(ids.begin(), ids.end(), cgroup_id) != ids.end()) return number;
  return 0;
}

const std::vector<uint64_t>* Capture::cgroups_of(uint32_t session) const {
  for (const auto& [number, ids] : sessions_)
    if (number == session) return &ids;
  return nullptr;
}

int64_t Capture::session_tasks(uint32_t session) const {
  std::vector<fr_session_tasks> per_cpu;
  if (!read_per_cpu(bpf_map__fd(skel_->maps.fr_session_tasks), session % FR_MAX_SESSIONS, per_cpu)) {
    if (per_cpu.empty()) return 0;
    throw Error(errno_message("cannot read the session's task counts", errno));
  }
  int64_t n = 0;
  for (const auto& c : per_cpu) n += int64_t(c.joined) - int64_t(c.left);
  auto adjust = task_adjust_.find(session);
  return n + (adjust == task_adjust_.end() ? 0 : adjust->second);
}

bool Capture::session_has_tasks(uint32_t session) const {
  uint64_t now = mono_ns();
  if (!sessions_seen_ns_ || now - sessions_seen_ns_ >= 1'000'000'000ull) {
    sessions_seen_ = sessions_of_host_tasks(bpf_map__fd(skel_->maps.fr_tasks));
    sessions_seen_ns_ = now;
  }
  return !sessions_seen_ || sessions_seen_->count(session);
}

void Capture::close_session(uint32_t session) {
  auto it = std::find_if(sessions_.begin(), sessions_.end(), [&](const auto& s) { return s.first == session; });
  if (it == sessions_.end()) return;
  // Closed first, so no task is added to it between the two steps.
  uint32_t slot = session % FR_MAX_SESSIONS, none = 0;
  bpf_map_update_elem(bpf_map__fd(skel_->maps.fr_session_live), &slot, &none, BPF_ANY);
  for (uint64_t id : it->second) bpf_map_delete_elem(bpf_map__fd(skel_->maps.fr_sessions), &id);
  __atomic_add_fetch(&skel_->bss->fr_session_gen, 1, __ATOMIC_SEQ_CST);
  sessions_.erase(it);
  task_adjust_.erase(session);
  if (full_sessions_.erase(session)) full_closed_ns_ = mono_ns();
  if (entry_sessions_.erase(session)) entry_closed_ns_ = mono_ns();
  // Its ring stays in the table (taking it out waits for an RCU grace
  // period): a record still on its way goes there, with the number of a
  // closed session, which its reader skips.
  for (auto& [index, ring] : rings_)
    if (ring.session == session) ring.session = 0;
}

size_t Capture::continue_braked() { return probe::continue_braked(bpf_map__fd(skel_->maps.fr_braked)); }

uint32_t Capture::next_number() {
  // A number whose slot an open session holds is skipped (slots are the
  // number modulo FR_MAX_SESSIONS); 0 means "none" and is never given.
  auto slot_taken = [&](uint32_t n) {
    for (const auto& [number, ids] : sessions_)
      if (number % FR_MAX_SESSIONS == n % FR_MAX_SESSIONS) return true;
    return false;
  };
  while (next_session_ == 0 || slot_taken(next_session_)) ++next_session_;
  return next_session_;
}

uint32_t Capture::place_ring(int fd) {
  for (uint32_t index = 1; index < FR_MAX_SESSIONS; ++index)
    if (!rings_.count(index))
      return bpf_map_update_elem(bpf_map__fd(skel_->maps.fr_session_rings), &index, &fd, BPF_ANY) == 0 ? index : 0;
  errno = ENOSPC;
  return 0;
}

namespace {

// Nothing written to the ring is unread (its positions, from its pages).
bool ring_drained(int fd) {
  long page = sysconf(_SC_PAGESIZE);
  void* cons = mmap(nullptr, size_t(page), PROT_READ, MAP_SHARED, fd, 0);
  if (cons == MAP_FAILED) return false;
  void* prod = mmap(nullptr, size_t(page), PROT_READ, MAP_SHARED, fd, off_t(page));
  bool drained = prod != MAP_FAILED && __atomic_load_n(static_cast<unsigned long*>(cons), __ATOMIC_ACQUIRE) ==
                                           __atomic_load_n(static_cast<unsigned long*>(prod), __ATOMIC_ACQUIRE);
  if (prod != MAP_FAILED) munmap(prod, size_t(page));
  munmap(cons, size_t(page));
  return drained;
}

}  // namespace

uint32_t Capture::idle_ring(size_t bytes) {
  for (auto& [index, ring] : rings_)
    if (!ring.session && !ring.read && ring.reusable && ring.bytes == bytes) {
      if (ring_drained(ring.fd)) return index;
      ring.reusable = false;  // left unread: release_closed_rings takes it out
    }
  return 0;
}

void Capture::reader_gone(uint32_t session, bool reusable) {
  for (auto& [index, ring] : rings_)
    if (ring.last == session && !ring.session) {
      ring.read = false;
      ring.reusable = reusable;
    }
}

void Capture::release_closed_rings(size_t at_most) {
  // Idle ones beyond two, the most recently used kept (higher session
  // numbers are later), and any a reader did not end cleanly.
  std::vector<std::pair<uint32_t, uint32_t>> idle;  // (last session, index)
  std::vector<uint32_t> out;
  for (const auto& [index, ring] : rings_)
    if (!ring.session && !ring.read) {
      if (ring.reusable) idle.emplace_back(ring.last, index);
      else out.push_back(index);
    }
  std::sort(idle.rbegin(), idle.rend());
  for (size_t i = 2; i < idle.size(); ++i) out.push_back(idle[i].second);
  for (size_t i = 0; i < out.size() && i < at_most; ++i) {
    uint32_t index = out[i];
    if (bpf_map_delete_elem(bpf_map__fd(skel_->maps.fr_session_rings), &index) != 0) continue;  // next time
    close(rings_[index].fd);
    rings_.erase(index);
  }
}

void Capture::prepare_ring(size_t bytes) {
  if (!valid_ring_size(bytes) || idle_ring(bytes)) return;
  int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "fr_session_ring", 0, 0, uint32_t(bytes), nullptr);
  if (fd < 0) return;  // open_session makes one then
  uint32_t index = place_ring(fd);
  if (!index) {
    close(fd);
    return;
  }
  rings_[index] = {fd, bytes};
}

int Capture::poll_fd() const { return ring_->epoll_fd(); }

int Capture::ring_fd() const { return bpf_map__fd(skel_->maps.fr_events); }

int Capture::consume(int budget) { return ring_->consume(budget > 0 ? budget : 1, handler_); }

void Capture::drain_to_now() {
  // What the kernel committed up to now, not what it adds meanwhile: a
  // busy session must not keep the caller here. A record still being
  // written (reserved, not yet submitted) stops consume() early.
  uint64_t target = ring_->producer_pos();
  while (int64_t(target - ring_->consumer_pos()) > 0)
    if (consume() == 0) break;
}

std::vector<uint64_t> Capture::drops_per_cpu() const {
  std::vector<uint64_t> values;
  if (!read_per_cpu(bpf_map__fd(skel_->maps.fr_drops), 0, values) && !values.empty())
    throw Error(errno_message("cannot read the drop counters", errno));
  return values;
}

size_t Capture::track_existing(uint32_t session, const std::vector<std::string>& cgroup_dirs) {
  // Keyed by pidfd; a thread needs PIDFD_THREAD (6.9+). Where that is
  // refused, its process's leader (listed too) gets state, and sys_enter
  // counts a thread whose leader has state as tracked.
  fr_task_state seeded{};
  seeded.fork_return = 1;  // it may be inside a syscall whose entry we did not see
  seeded.session = session;
  int map = bpf_map__fd(skel_->maps.fr_tasks);
  size_t tracked = 0;
  auto cgroup_id = [](const std::string& dir) -> uint64_t {
    struct stat st {};
    return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? uint64_t(st.st_ino) : 0;  // cgroup v2: the id
  };
  // A task an enclosing session seeded (opened before this one) moves to
  // this, the innermost, session; a task another session holds otherwise
  // stays with it (tasks keep their session), and the cgroups of other
  // sessions below are theirs.
  std::set<uint64_t> enclosing;
  for (const auto& dir : cgroup_dirs)
    for (std::string up = dir; up.rfind('/') > 0;) {
      up.resize(up.rfind('/'));
      if (uint64_t id = cgroup_id(up)) enclosing.insert(id);
    }
  auto encloses = [&](uint32_t other) {
    if (const auto* ids = cgroups_of(other))
      for (uint64_t id : *ids)
        if (enclosing.count(id)) return true;
    return false;
  };
  // A task's state letter and flags, from /proc/TID/stat (fields 3 and 9);
  // nullopt once it is gone.
  struct TaskStat {
    char state = 0;
    unsigned long flags = 0;
  };
  auto task_stat = [](pid_t tid) -> std::optional<TaskStat> {
    auto fields = proc_stat_fields(tid);
    if (!fields || fields->size() <= 9 - 3) return std::nullopt;
    char* end = nullptr;
    TaskStat t{(*fields)[0][0], std::strtoul((*fields)[9 - 3].c_str(), &end, 10)};
    if (end == (*fields)[9 - 3].c_str()) return std::nullopt;
    return t;
  };
  // PF_EXITING (include/linux/sched.h): set before the exit tracepoint fires.
  constexpr unsigned long kPfExiting = 0x4;
  std::vector<std::string> dirs = cgroup_dirs;
  for (size_t i = 0; i < dirs.size(); ++i) {
    if (DIR* d = opendir(dirs[i].c_str())) {
      while (dirent* e = readdir(d)) {
        std::string_view name = e->d_name;
        if (e->d_type != DT_DIR || name == "." || name == "..") continue;
        std::string below = dirs[i] + "/" + e->d_name;
        uint32_t owner = owner_of(cgroup_id(below));
        if (owner == 0 || owner == session) dirs.push_back(below);
      }
      closedir(d);
    }
    std::istringstream threads(try_read_file(dirs[i] + "/cgroup.threads").value_or(""));
    for (pid_t tid; threads >> tid;) {
      // Never the recorder itself (watching the cgroup it runs in), and
      // never a task past its exit (it would count in its session forever).
      if (access(("/proc/self/task/" + std::to_string(tid)).c_str(), F_OK) == 0) continue;
      auto before = task_stat(tid);
      if (!before || before->state == 'Z' || before->state == 'X') continue;
      int fd = task_pidfd(tid);
      if (fd < 0) continue;  // gone meanwhile, or a thread its leader covers
      if (bpf_map_update_elem(map, &fd, &seeded, BPF_NOEXIST) == 0) {
        ++tracked;
        ++task_adjust_[session];  // joined here, not in a program
        // Exiting meanwhile: if the exit program ran before the state was
        // there, it counted nothing and left the state (it deletes what it
        // counts out, bpf/process.bpf.c), so the state is taken back.
        auto now = task_stat(tid);
        if ((!now || (now->flags & kPfExiting)) && bpf_map_delete_elem(map, &fd) == 0) {
          --tracked;
          --task_adjust_[session];
        }
      } else if (errno == EEXIST) {
        fr_task_state held{};
        bool read = bpf_map_lookup_elem(map, &fd, &held) == 0;
        // No session yet: a program made this state a moment ago and is
        // about to join it (fr_join_session), counting it. Replacing it
        // now would count the task twice and out once: a session that
        // never ends.
        if (read && held.session == 0) {
          close(fd);
          continue;
        }
        bool held_open = cgroups_of(held.session) != nullptr;
        bool take = read && held.session != session && (encloses(held.session) || !held_open);
        bool mine = read && held.session == session;
        if (take && bpf_map_update_elem(map, &fd, &seeded, BPF_EXIST) == 0) {
          mine = true;
          ++task_adjust_[session];
          if (held_open) --task_adjust_[held.session];
        }
        tracked += mine;
      }
      close(fd);
    }
  }
  // A task that was found outside every session before it was given state
  // here (fr_outside) looks again.
  __atomic_add_fetch(&skel_->bss->fr_session_gen, 1, __ATOMIC_SEQ_CST);
  return tracked;
}

bpf_program* Capture::sys_exit_program() const {
  return side_ ? side_->progs.fr_sys_exit : skel_->progs.fr_sys_exit;
}

std::vector<bpf_program*> Capture::programs() const {
  std::vector<bpf_program*> out;
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel_->obj) out.push_back(prog);
  if (side_) out.push_back(side_->progs.fr_sys_exit);
  return out;
}

std::vector<Capture::ProgramStats> Capture::program_stats() const {
  std::vector<ProgramStats> out;
  for (bpf_program* prog : programs()) {
    int fd = bpf_program__fd(prog);
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) != 0) continue;
    out.push_back({bpf_program__name(prog), info.run_cnt, info.run_time_ns});
  }
  return out;
}

uint64_t Capture::program_misses() const {
  // The kernel skips a program rather than nest it on one CPU (a task
  // preempted inside sys_exit, another entering it): those events are lost
  // too, and counted only here.
  uint64_t total = 0;
  for (bpf_program* prog : programs()) {
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) == 0)
      total += info.recursion_misses;
  }
  return total;
}

void Capture::detach() {
  flightrec_bpf__detach(skel_);
  for (auto* link : lite_links_) bpf_link__destroy(link);
  lite_links_.clear();
  bpf_link__destroy(enter_link_);
  bpf_link__destroy(exit_link_);
  enter_link_ = exit_link_ = nullptr;
}

double Capture::ring_fill() const {
  if (!ring_) return 0;
  uint64_t prod = ring_->producer_pos(), cons = ring_->consumer_pos();
  return prod > cons ? double(prod - cons) / double(ring_->size()) : 0.0;
}

CaptureTraits Capture::traits(bool entry_times) const {
  return CaptureTraits{attached(false, entry_times), refused_, path_rules_, unix_inbound_,
                       entry_times && entry_times_};
}

std::vector<std::string> Capture::attached(bool lite, bool entry_times) const {
  std::vector<std::string> out;
  for (bpf_program* prog : programs()) {
    std::string sec = bpf_program__section_name(prog);
    if (!bpf_program__autoload(prog)) continue;
    // The raw programs leave lite sessions alone; sys_enter serves only
    // the sessions that ask for it.
    if (sec == "tp_btf/sys_exit" && lite) continue;
    if (sec == "tp_btf/sys_enter" && (lite || !entry_times)) continue;
    bool listed = std::find(out.begin(), out.end(), sec) != out.end();  // one hook, two signatures
    if (!listed && (sec.rfind("tp_btf/", 0) == 0 || sec.rfind("lsm", 0) == 0 || sec.rfind("cgroup/", 0) == 0))
      out.push_back(sec);
  }
  if (lite) out.insert(out.end(), lite_attached_.begin(), lite_attached_.end());
  std::vector<std::string> tls = tls_->probed();
  out.insert(out.end(), tls.begin(), tls.end());
  return out;
}

}  // namespace flightrec::probe
