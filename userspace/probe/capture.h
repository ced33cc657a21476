#pragma once
// The loaded and attached BPF programs of one session, and the ring buffer
// they fill. Destroying it detaches everything.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <vector>

struct flightrec_bpf;
struct bpf_link;
struct bpf_object;
struct bpf_program;
#include "probe/ring_reader.h"
#include "probe/source.h"
#include "probe/tls_uprobes.h"

namespace flightrec::probe {

// Path rules for lsm/file_open (see fr_path_key). Rule N is listed[N-1],
// as written (the genesis entry records the list); match holds the paths
// the trie matches, each covering itself and everything under it: every
// listed path, and where its symlinks lead, under its rule's number (0: an
// exception inside a rule, e.g. the work directory under a hidden path).
struct PathRules {
  std::vector<std::string> listed;
  std::vector<std::pair<std::string, uint32_t>> match;
  bool empty() const { return listed.empty(); }
};

struct CaptureOptions {
  // The first session, opened before anything is attached: these cgroups
  // (v2 ids, Cgroup::id()) and below. Empty: sessions come with open_session().
  std::vector<uint64_t> session_cgroups;
  bool session_lite = false;              // ...as a lite session
  // Slots of the per-session maps (session number modulo FR_MAX_SESSIONS).
  // A capture that only ever records its first session (number 1) needs
  // 2: the per-CPU ones are then made in microseconds, not milliseconds
  // each, off every `run`'s start-up. Numbers past the slots are refused.
  uint32_t session_slots = FR_MAX_SESSIONS;
  size_t ring_bytes = 16u << 20;          // power of two, >= 64 KiB
  // Readers are woken when the unread data crosses an eighth of a ring,
  // and this much of ring_bytes too (0: no such wake-up; a session's own
  // ring at the same fraction of its size; rounded down to 1/2^k).
  size_t highwater_bytes = 0;
  // Attach sys_enter too: entry times, calls seccomp stopped marked as
  // such, exit/exit_group recorded; off, calls are read at sys_exit alone,
  // at about a third less cost to every task on the host.
  bool entry_times = false;
  // Load the raw syscall programs, for full sessions (every syscall of
  // every task on the host meets them once attached); off, open_session()
  // takes lite sessions only.
  bool raw_syscalls = true;
  // Load the lite program, for lite sessions: the calls lite_calls()
  // names, each at its own syscalls tracepoint, counted per cgroup and
  // syscall (docs/LITE.md). Each kind is attached by its first session.
  bool lite = false;
  bool tls = false;                       // load the TLS plaintext probes (attach with attach_tls)
  size_t tls_chunk = 16384;               // bytes per TLS record (<= 16 KiB)
  size_t tls_cap = 262144;                // bytes per SSL call; the rest is counted, not kept
  PathRules hidden;                       // the session may not open these (BPF-LSM only)
  PathRules exec;                         // the session may execute only these (empty: anything)
  bool require_lsm = false;               // the path rules are the only enforcement: no BPF-LSM, no run
  // The session's policy has an egress allowlist, `egress`: BPF-LSM
  // enforces it too where it loads (lsm/socket_connect, and the session's
  // UNIX sockets kept from the host). The cgroup programs that enforce it
  // everywhere are the session's own (EgressFilter).
  bool egress_allowlist = false;
  std::vector<fr_egress_rule> egress;
  // The runtime connect grants' maps (fr_egress_granted, fr_egress_tickets),
  // made by the session before its grant supervisor starts; -1: the
  // programs get empty maps of their own.
  int egress_granted_fd = -1, egress_tickets_fd = -1;
  int egress_named_fd = -1;  // fr_egress_named, filled by the session's resolver; likewise
  int exec_tickets_fd = -1;  // the runtime exec grants' map (fr_exec_tickets), likewise
  // fr_view_gen, likewise: the programs bump it when a thread's ids, umask
  // or root may change and at every exit (while it is given; -1: never).
  int view_gen_fd = -1;
  bool verbose = false;                   // libbpf's own messages to stderr
};

// How open_session() records a session.
struct SessionSpec {
  bool lite = false;          // only lite_calls() of its syscalls (CaptureOptions::lite)
  // A full session: sys_enter sees its calls begin (entry times, calls
  // seccomp stopped marked), where CaptureOptions::entry_times loaded it;
  // off, its calls are read at sys_exit alone. sys_enter is attached only
  // while such a session is open: every task on the host meets it.
  bool entry_times = true;
  // A power of two, >= 64 KiB: its records go to a ring buffer of its own
  // of that size instead of the capture's, read by whoever holds
  // session_ring(), which counts its losses apart.
  size_t own_ring_bytes = 0;
  // Backpressure's emergency brake (FR_SESSION_BRAKE): the kernel stops
  // its processes that make records while its ring is over three quarters
  // full, until continue_braked(). For sessions whose reader also pauses
  // them at half full (--on-loss backpressure), which that rarely reaches.
  bool brake = false;
};

class Capture : public Source {
 public:
  // Called for every record, in ring-buffer order.
  using Handler = std::function<void(const void* data, size_t size)>;

  Capture(const CaptureOptions& opts, Handler handler);  // throws Error
  ~Capture() override;
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // A session: the tasks of these cgroups and below (the innermost listed
  // cgroup of any open session wins) are recorded as its own, from their
  // next event on; every record says whose (fr_header.session). Numbers
  // start at 1 and are never given twice by one Capture. Throws Error.
  // A lite session (CaptureOptions::lite) sees only lite_calls() of its
  // syscalls; a full one sees every syscall (CaptureOptions::raw_syscalls).
  uint32_t open_session(const std::vector<uint64_t>& cgroup_ids, const SessionSpec& spec = {});
  // Its tasks are let go; records already in the ring still say its number
  // (one that still comes goes to the capture's ring).
  void close_session(uint32_t session);
  // The session's own ring buffer map (open_session's own_ring_bytes), -1
  // for one that writes to the capture's; valid until the session closes.
  int session_ring(uint32_t session) const;
  // Records of a session the kernel could not put in its ring, per CPU:
  // counted from its opening until its number's slot is given to a later
  // session (so still readable once it is closed). Those of sessions on
  // the capture's ring are in drops_per_cpu() too.
  std::vector<uint64_t> session_drops(uint32_t session) const;
  // A new read-only descriptor of the map those counters are in (an array
  // of FR_MAX_SESSIONS per-CPU counters, at session % FR_MAX_SESSIONS), for
  // whoever reads a session's own ring elsewhere; -1 and errno on failure.
  int session_drops_map_readonly() const;
  // flightrecd's, for sessions with rings of their own. Rings sit at an
  // index of the kernel's table of rings, which a session is pointed at
  // (fr_session_ring_of: no wait); putting a ring in the table or taking
  // one out waits for an RCU grace period, ~10 ms, so it is done ahead of
  // time. prepare_ring() puts a ring of `bytes` in the table unless an
  // idle one of that size is there; open_session with that size takes
  // it. A closed session's ring stays in the table until its reader has
  // gone (reader_gone()): then, if its reader ended cleanly and nothing in
  // it is unread, it is idle, for the next session of its size; else
  // release_closed_rings() takes it out, as it does idle rings beyond two.
  // (What a reused ring held stays in its pages, readable by its next
  // reader, root as the last one was.)
  void prepare_ring(size_t bytes);
  void release_closed_rings(size_t at_most = SIZE_MAX);
  void reader_gone(uint32_t session, bool reusable);
  // Detaches sys_enter when no open session has asked for it for idle_ns,
  // and both raw syscall programs when no full session has been open for
  // idle_ns: they cost every task on the host. The next session that needs
  // them attaches them again; within an RCU grace period of a detach, that
  // attach waits for one (the kernel's tracepoint update), which a linger
  // spares back-to-back sessions.
  void release_idle_programs(uint64_t idle_ns = 0);
  // Tasks the session holds now, wherever they are (a task moved out of
  // its cgroups keeps its session): what outlives a removed cgroup.
  int64_t session_tasks(uint32_t session) const;
  // Whether any task on the host holds the session's state, found by
  // looking at every thread in /proc (milliseconds on a busy host; one
  // walk serves every session for a second): what settles a count
  // session_tasks() keeps above zero with no task left. True when it
  // cannot tell (a thread whose state cannot be looked up).
  bool session_has_tasks(uint32_t session) const;
  // CaptureOptions::session_cgroups', or open_first_session()'s (0: none).
  uint32_t first_session() const { return first_session_; }
  // The first session, opened now rather than at load: once what is in its
  // cgroup already is to be recorded (the slot of its number is ready:
  // no wait). Throws Error as open_session(), or if one is open.
  uint32_t open_first_session(const std::vector<uint64_t>& cgroup_ids, const SessionSpec& spec = {});

  // The capture's own ring buffer (Source): every session's records but
  // those of sessions with a ring of their own.
  int poll_fd() const override;
  int ring_fd() const override;
  using Source::consume;
  int consume(int budget) override;
  void drain_to_now() override;
  // Records the kernel could not put in the capture's ring buffer, per CPU, since load.
  std::vector<uint64_t> drops_per_cpu() const override;
  // Gives every task already in these cgroups (and below) its recorder
  // state in `session`, so one that is moved out before its first syscall
  // stays recorded. A task an enclosing session holds is taken over (the
  // innermost session wins); one another session holds is left to it, and
  // so are other sessions' cgroups below. Returns how many tasks the
  // session holds now.
  size_t track_existing(uint32_t session, const std::vector<std::string>& cgroup_dirs);
  // Runs of our programs the kernel skipped to avoid nesting, since load.
  uint64_t program_misses() const override;
  // Each loaded program's runs and run time (the kernel counts the time
  // only while BPF stats are enabled: bpf_enable_stats).
  struct ProgramStats {
    std::string name;
    uint64_t runs = 0, run_ns = 0;
  };
  std::vector<ProgramStats> program_stats() const;
  void detach() override;  // stop producing; consume() still drains
  double ring_fill() const override;
  size_t continue_braked() override;
  // The plaintext probes, per TLS library or program file (attached with
  // CaptureOptions::tls on; the system's libraries from the start).
  TlsUprobes& tls() { return *tls_; }
  // The ring of struct fr_exec_notice (EarlyTlsAttach reads it).
  int exec_notices_fd() const;

  // Calls of lite sessions since the last take, per (session, cgroup,
  // syscall): the kernel's per-CPU counts, summed, and removed from its
  // table (so every session's are handed out at once; the caller routes
  // them). A call counted at the very moment its counter is taken may be
  // missed.
  struct LiteCount {
    uint32_t session = 0, nr = 0;
    uint64_t cgroup_id = 0, calls = 0;
  };
  std::vector<LiteCount> take_lite_counts();
  // Calls of the session that found no room in the count table, since it opened.
  uint64_t lite_uncounted(uint32_t session) const;
  // Lite calls this kernel has no tracepoint for (nor the call: ENOSYS).
  const std::vector<std::string>& lite_absent() const { return lite_absent_; }
  // "tp_btf/sys_enter", ...: what is attached that serves a full (or a
  // lite) session, with sys_enter or without, for the genesis entry.
  std::vector<std::string> attached(bool lite = false, bool entry_times = true) const;
  // LSM programs this kernel refused one by one ("lsm/path_unlink"): those
  // hooks are seen by the syscall tracepoints only.
  const std::vector<std::string>& refused() const { return refused_; }
  // Whether lsm/file_open decides the path rules on this kernel.
  bool enforces_path_rules() const { return path_rules_; }
  // Whether BPF-LSM keeps tasks outside a confined session out of the
  // session's UNIX sockets (lsm/unix_stream_connect and unix_may_send).
  bool refuses_unix_inbound() const { return unix_inbound_; }
  // sys_enter is loaded: entry times, and calls seccomp stopped marked,
  // for the sessions that ask for them.
  bool entry_times() const { return entry_times_; }
  // All of the above, for a full session (as first opened: with entry
  // times where loaded), or for one opened with or without them.
  CaptureTraits traits() const override { return traits(true); }
  CaptureTraits traits(bool entry_times) const;

 private:
  flightrec_bpf* skel_ = nullptr;
  flightrec_bpf* side_ = nullptr;  // fr_sys_exit alone, loaded beside skel_ on its maps (nullptr: in skel_)
  std::unique_ptr<TlsUprobes> tls_;  // made for each load attempt (its programs')
  bpf_program* sys_exit_program() const;
  std::vector<bpf_program*> programs() const;  // both objects' (loaded or not)
  std::unique_ptr<RingReader> ring_;
  bool tls_multi_ = false;          // TLS probes as uprobe_multi links
  std::vector<bpf_link*> lite_links_;
  bpf_link* enter_link_ = nullptr;  // sys_enter, while a session asks for it
  bpf_link* exit_link_ = nullptr;   // sys_exit, while a full session is open
  std::vector<std::string> lite_attached_;  // "tracepoint/syscalls/sys_exit_openat", ...
  std::vector<std::string> lite_absent_;
  bool lite_on_ = false;

  void attach_lite();  // at the first session of each kind
  void attach_raw(bool entry);  // sys_exit, and sys_enter for a session with entry times
  std::vector<std::string> refused_, refused_names_;
  Handler handler_;
  uint32_t next_session_ = 1, first_session_ = 0;
  uint32_t session_slots_ = FR_MAX_SESSIONS;
  std::vector<std::pair<uint32_t, std::vector<uint64_t>>> sessions_;  // open: number, cgroup ids
  std::set<uint32_t> full_sessions_, entry_sessions_;                 // open ones of each kind
  uint64_t full_closed_ns_ = 0, entry_closed_ns_ = 0;                 // when the last of each kind closed
  uint32_t owner_of(uint64_t cgroup_id) const;                       // the open session listing it, or 0
  const std::vector<uint64_t>* cgroups_of(uint32_t session) const;  // nullptr: not open
  std::map<uint32_t, int64_t> task_adjust_;  // tasks track_existing gave (or took from) a session
  // The last walk of the host's tasks: the sessions they hold (nullopt:
  // some task's could not be told), and when (mono ns; 0: never).
  mutable std::optional<std::set<uint32_t>> sessions_seen_;
  mutable uint64_t sessions_seen_ns_ = 0;
  // Rings of sessions' own, by their index in fr_session_rings (0 is the
  // capture's own ring, fr_events).
  struct OwnRing {
    int fd = -1;
    size_t bytes = 0;
    uint32_t session = 0;  // the open session it serves (0: none)
    uint32_t last = 0;     // the last session it served
    bool read = false;     // its last session's reader may still hold it
    bool reusable = true;  // that reader ended cleanly (or there was none yet)
  };
  std::map<uint32_t, OwnRing> rings_;
  uint32_t idle_ring(size_t bytes);  // an index whose ring a session of this size may take, or 0
  uint32_t place_ring(int fd);       // the ring at a free index (waits); 0 and errno if it cannot be
  uint32_t next_number();                     // the number open_session() gives next
  bool path_rules_ = false;
  bool unix_inbound_ = false;
  bool entry_times_ = false;
};


// Loads BPF-LSM programs only if `lsm` (where the kernel allows them) and
// the TLS uprobe programs only if `tls` (--tls off: not even verified, which
// is most of the load time). Programs are told apart by their ELF sections.
void select_programs(bpf_object* obj, bool lsm, bool tls);

// libbpf's messages: to stderr if verbose, else kept quiet (a refused
// program is reported by its loader).
void quiet_libbpf(bool verbose);

// Ring sizes the kernel accepts: a power of two, at least 64 KiB, at most 1 GiB.
bool valid_ring_size(size_t bytes);

}  // namespace flightrec::probe
