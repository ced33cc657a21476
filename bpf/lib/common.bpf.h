/* Shared by every flightrec BPF object: the maps they all use (defined once,
 * in maps.bpf.c, and declared extern here so the static linker joins them),
 * the session filter, and the read -> fill -> emit helpers. */
#ifndef FLIGHTREC_BPF_COMMON_H
#define FLIGHTREC_BPF_COMMON_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include "flightrec/abi/events.h"

/* maps.bpf.c defines FR_SHARED as empty to turn these declarations into
 * the one definition; everywhere else they are extern. */
#ifndef FR_SHARED
#define FR_SHARED extern
#endif

/* Open flags (uapi fcntl.h) and FMODE_WRITE (a struct file's f_mode: open
 * for writing), which have kept their values across kernels. */
#define FR_O_CREAT 0100
#define FR_O_TRUNC 01000
#define FR_FMODE_WRITE 0x2
#define FR_S_IFMT 0170000
#define FR_S_IFSOCK 0140000

/* Set by userspace before load (initial values in maps.bpf.c). */
extern const volatile __u32 fr_self_tgid;  /* flightrec itself: never recorded */
extern const volatile __u32 fr_tls_enabled;
extern const volatile __u32 fr_exit_only;     /* no sys_enter program loaded: every call is read at sys_exit alone */
extern const volatile __u32 fr_hidden_rules;  /* fr_hidden holds rules: file_open enforces them */
extern const volatile __u32 fr_exec_rules;    /* fr_exec holds the exec allowlist: file_open enforces it */
extern const volatile __u32 fr_egress_lsm;    /* lsm/socket_connect enforces the allowlist too, lsm/unix_* keep the host out */
extern const volatile __u64 fr_tls_chunk;  /* bytes per TLS record */
extern const volatile __u64 fr_tls_cap;    /* bytes per SSL call */
/* A ring's reader is woken when its unread data crosses size >> shift
 * (its size: each session's ring may have its own). */
extern const volatile __u32 fr_wakeup_shift;
extern const volatile __u32 fr_highwater_shift;  /* backpressure pauses the session here; 0: none */
extern const volatile __u32 fr_view_gen_on;  /* a grant supervisor reads fr_view_gen: keep it */
/* Bumped by userspace whenever fr_sessions changes, and by
 * fr_cgroup_move at every move: fr_verdicts and fr_outside worked out
 * before then are stale. */
extern volatile __u32 fr_session_gen;


FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 * 1024 * 1024);  /* resized by userspace */
} fr_events SEC(".maps");

/* The ring buffers sessions' records go to: fr_events at index 0, and
 * rings of sessions' own (FR_SESSION_OWN_RING) that their readers hold,
 * e.g. a `flightrec run` that flightrecd records. Inner rings may differ
 * in size. Changing an index waits for an RCU grace period, so a ring
 * stays at its index, and a later session may be pointed at it
 * (fr_session_ring_of). A record of a session with no ring is lost,
 * counted. */
struct fr_ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);  /* the template's; each ring has its own size */
};

FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, FR_MAX_SESSIONS);
	__type(key, __u32);
	__array(values, struct fr_ring);
} fr_session_rings SEC(".maps");

/* Each session's ring (struct fr_ring_slot), at
 * fr_session_ring_of[n % FR_MAX_SESSIONS], set by userspace before the
 * session opens (a plain update: no wait). */
FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FR_MAX_SESSIONS);
	__type(key, __u32);
	__type(value, struct fr_ring_slot);
} fr_session_ring_of SEC(".maps");

/* The sessions: cgroup id -> session number (see fr_cgroup_verdict). */
FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FR_SESSION_CGROUPS);
	__type(key, __u64);
	__type(value, __u32);
} fr_sessions SEC(".maps");

FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FR_MAX_SESSIONS);
	__type(key, __u32);
	__type(value, __u32);
} fr_session_live SEC(".maps");

FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FR_MAX_SESSIONS);
	__type(key, __u32);
	__type(value, struct fr_session_tasks);
} fr_session_tasks SEC(".maps");

/* Per session slot: FR_SESSION_* flags, set before the session opens. */
FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FR_MAX_SESSIONS);
	__type(key, __u32);
	__type(value, __u32);
} fr_session_flags SEC(".maps");

/* The session of each cgroup tasks ran in, worked out once per cgroup
 * (and again after a change): a task outside every session pays one
 * lookup per event, not a walk up the tree. */
FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct fr_cgroup_verdict);
} fr_verdicts SEC(".maps");

/* Records lost: per CPU those of the sessions that write to fr_events,
 * and per session (and CPU) those of every session. A session with a ring
 * of its own is left out of fr_drops: its reader counts its losses, the
 * shared ring's reader would take them for its own. */
FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} fr_drops SEC(".maps");

FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FR_MAX_SESSIONS);
	__type(key, __u32);
	__type(value, __u64);
} fr_session_drops SEC(".maps");

FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct fr_task_state);
} fr_tasks SEC(".maps");

/* Tasks known to be in no session: the fr_session_gen their verdict was
 * worked out in. A process outside every session then pays one storage
 * lookup per syscall, not the walk to its cgroup's verdict. A move to
 * another cgroup (fr_cgroup_move) or a new session makes it stale. */
FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);
} fr_outside SEC(".maps");

/* Path rules (see struct fr_path_key); the value is the rule's number. */
FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, FR_PATH_RULES);
	__type(key, struct fr_path_key);
	__type(value, __u32);
} fr_hidden_paths SEC(".maps");

FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, FR_PATH_RULES);
	__type(key, struct fr_path_key);
	__type(value, __u32);
} fr_exec_paths SEC(".maps");

/* The egress allowlist and the runtime connect grants. */
#include "lib/egress.bpf.h"

/* The grant supervisor keeps what it read of a thread in /proc (its
 * file-system ids, groups, umask and root) while fr_view_gen[0] stays the
 * same (grants/agent_view.h). So it is bumped at the entry and the return
 * of every call that may change those for the caller or for the threads
 * sharing its fs_struct, at every fork in a session (a new thread id) and
 * at every exit (an id may then be reused) of a session's task.
 * Array of one: mmapped by the supervisor, read without a system call. */
FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} fr_view_gen SEC(".maps");

/* x86-64 numbers (x32's bit masked off): umask, setuid, setgid, setreuid,
 * setregid, setgroups, setresuid, setresgid, setfsuid, setfsgid, capset,
 * pivot_root, chroot, unshare, setns, execve, execveat. */
static __always_inline bool fr_changes_view(long nr)
{
	switch (nr & ~0x40000000L) {
	case 95: case 105: case 106: case 113: case 114: case 116: case 117: case 119:
	case 122: case 123: case 126: case 155: case 161: case 272: case 308: case 59: case 322:
		return true;
	}
	return false;
}

static __always_inline void fr_bump_view_gen(void)
{
	__u32 zero = 0;
	__u64 *gen = bpf_map_lookup_elem(&fr_view_gen, &zero);
	if (gen)
		__sync_fetch_and_add(gen, 1);
}

/* An SSL_read/SSL_write in progress, by thread id. */
struct fr_tls_call {
	__u64 ssl, buf, len_ptr, enter_ns;
	__u32 func;
	__s32 fd;
	__u32 session;
	__u32 nested;            /* handshakes entered inside it (gnutls_record_recv may start one), not returned yet */
	__u32 tls13;             /* an AEAD open: of a TLS 1.3 record (its content type ends the plaintext) */
	__u32 flags;             /* FR_TLS_* flags for its records */
};

/* LRU: a call whose return probe never fires (the thread died inside it)
 * leaves a slot behind; the oldest slots make room, so capture never stops. */
FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct fr_tls_call);
} fr_tls_calls SEC(".maps");

/* AEAD seals (tls.bpf.c) waiting for their connection, by thread id: the
 * context sealed with and the header its first waiting record has on the
 * wire, bound by the thread's next socket write that starts with it
 * (within FR_AEAD_WAIT_NS). */
#define FR_AEAD_WAIT_NS 1000000000ULL
struct fr_aead_wait {
	__u64 ctx;
	__u64 since_ns;
	__u8 wire[5];            /* type, version, length (TLS 1.3; 1.2: wire_len 3, no length) */
	__u8 wire_len;
	__u8 pad[2];
};
FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct fr_aead_wait);
} fr_aead_pending SEC(".maps");

/* An AEAD context's connection, once known: the socket's inode number and
 * fd, by (context, process). LRU: contexts are freed unseen. */
struct fr_aead_key {
	__u64 ctx;
	__u32 tgid;
	__u32 pad;
};
struct fr_aead_conn {
	__u64 ino;
	__s32 fd;
	__u32 pad;
};
FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct fr_aead_key);
	__type(value, struct fr_aead_conn);
} fr_aead_conns SEC(".maps");

FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FR_SYSCALL_TABLE_SIZE);
	__type(key, __u32);
	__type(value, struct fr_syscall_spec);
} fr_syscall_specs SEC(".maps");

static __always_inline bool fr_session_open(__u32 session)
{
	__u32 key = session % FR_MAX_SESSIONS;
	__u32 *live = bpf_map_lookup_elem(&fr_session_live, &key);
	return session && live && *live == session;
}

static __always_inline bool fr_session_lite(__u32 session)
{
	__u32 key = session % FR_MAX_SESSIONS;
	__u32 *flags = bpf_map_lookup_elem(&fr_session_flags, &key);
	return flags && (*flags & FR_SESSION_LITE);
}

/* A full session whose calls sys_enter sees begin (the others' are read at
 * sys_exit alone). */
static __always_inline bool fr_session_entry(__u32 session)
{
	__u32 key = session % FR_MAX_SESSIONS;
	__u32 *flags = bpf_map_lookup_elem(&fr_session_flags, &key);
	return !fr_exit_only && flags && (*flags & FR_SESSION_ENTRY);
}

/* A task got state in `session` (joined) or exited in it (left). */
static __always_inline void fr_count_task(__u32 session, bool joined)
{
	__u32 key = session % FR_MAX_SESSIONS;
	struct fr_session_tasks *t = bpf_map_lookup_elem(&fr_session_tasks, &key);
	if (!t)
		return;
	/* Atomic: a program may be interrupted by another on the same CPU. */
	if (joined)
		__sync_fetch_and_add(&t->joined, 1);
	else
		__sync_fetch_and_add(&t->left, 1);
}

/* Fresh task state joins `session` and is counted there. State the
 * recorder seeded meanwhile (Capture::track_existing gives the tasks
 * already in a cgroup state, and counts them itself) has its session
 * already: counted twice, it would keep its session open forever. */
static __always_inline void fr_join_session(struct fr_task_state *st, __u32 session)
{
	if (st->session)
		return;
	st->session = session;
	fr_count_task(session, true);
}

struct fr_cgroup_walk {
	void *ancestors;  /* the cgroup's ancestors[] array */
	int own;          /* its level */
	__u32 session;
};

/* One level up from a cgroup, for bpf_loop: the verifier walks a callback
 * once, where an unrolled walk of FR_CGROUP_DEPTH levels costs every
 * program that inlines it milliseconds of load time. 1 ends the walk. */
static long fr_cgroup_walk_step(__u32 up, void *ctx)
{
	struct fr_cgroup_walk *w = ctx;
	int level = w->own - (int)up;
	if (level < 0)
		return 1;
	struct cgroup *a = 0;
	if (bpf_probe_read_kernel(&a, sizeof(a), w->ancestors + (__u32)level * sizeof(a)) || !a)
		return 1;
	__u64 id = BPF_CORE_READ(a, kn, id);
	__u32 *session = bpf_map_lookup_elem(&fr_sessions, &id);
	if (session && fr_session_open(*session)) {
		w->session = *session;
		return 1;
	}
	return 0;
}

/* The session of a cgroup v2 directory or of its nearest listed ancestor,
 * the innermost winning (a tree of any depth is searched in its last
 * FR_CGROUP_DEPTH levels); 0 for none, or a cgroup of another hierarchy
 * (its ids are its own). */
static __always_inline __u32 fr_cgroup_session(struct cgroup *cgrp)
{
	if (BPF_CORE_READ(cgrp, root, hierarchy_id) != 0)
		return 0;
	struct fr_cgroup_walk w = {
		.ancestors = (void *)cgrp + bpf_core_field_offset(struct cgroup, ancestors),
		.own = BPF_CORE_READ(cgrp, level),
	};
	bpf_loop(FR_CGROUP_DEPTH, fr_cgroup_walk_step, &w, 0);
	return w.session;
}

/* The session of the current task's cgroup, `cgroup`, by a walk up its
 * tree, kept in fr_verdicts for `generation`. A global function (maps.bpf.c):
 * the walk, a bpf_loop with its callback, is checked once per program
 * instead of in every state a caller reaches it in. */
extern __u32 fr_walk_current_cgroup(__u64 cgroup, __u32 generation);

/* The session whose cgroup holds the current task (or one of its
 * ancestors); 0 for none. */
static __always_inline __u32 fr_current_session(void)
{
	/* Watching a cgroup that holds flightrec must not record the
	 * recorder's own writes: that would feed on itself. */
	if ((bpf_get_current_pid_tgid() >> 32) == fr_self_tgid)
		return 0;
	__u64 cgroup = bpf_get_current_cgroup_id();
	/* Read before the walk: a session added during it bumps the
	 * generation, so what the walk missed is not kept as current. */
	__u32 generation = fr_session_gen;
	barrier();
	struct fr_cgroup_verdict *known = bpf_map_lookup_elem(&fr_verdicts, &cgroup);
	if (known && known->generation == generation)
		return known->session;
	return fr_walk_current_cgroup(cgroup, generation);
}

FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FR_BRAKED_MAX);
	__type(key, __u32);
	__type(value, struct fr_braked);
} fr_braked SEC(".maps");

/* Backpressure's emergency brake (FR_SESSION_BRAKE): stops the current
 * process, which makes a record of `session` while its ring is over three
 * quarters full. In the kernel and at once: the freezer waits for the
 * collector's watchdog to be scheduled, and 16 threads writing 4 KB
 * records fill 4 MB before it is. Each thread can still finish the call
 * it is in, so the last quarter holds one record per thread. */
static __always_inline __u32 fr_task_session(struct task_struct *task);

static __always_inline void fr_brake(__u32 session)
{
	__u32 key = session % FR_MAX_SESSIONS;
	__u32 *flags = bpf_map_lookup_elem(&fr_session_flags, &key);
	if (!flags || !(*flags & FR_SESSION_BRAKE))
		return;
	/* Only a process of the session, and one that can still be stopped:
	 * a record can be made by another (a cgroup move) or at an exit. */
	struct task_struct *task = bpf_get_current_task_btf();
	if ((task->flags & 0x4 /* PF_EXITING */) || fr_task_session(task) != session)
		return;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	/* Read, not loaded: see fr_leader_session for what a load costs. */
	struct fr_braked b = { .session = session, .start_boottime = BPF_CORE_READ(task, group_leader, start_boottime) };
	/* Kept first: a process stopped with no note of it would stay stopped. */
	long err = bpf_map_update_elem(&fr_braked, &tgid, &b, BPF_NOEXIST);
	if (err && err != -17 /* EEXIST: stopped before, continued since by a sibling */)
		return;
	bpf_send_signal(19 /* SIGSTOP */);
}

/* The brake, when a ring of `bytes` holds `avail` unread bytes. */
static __always_inline void fr_brake_if_full(__u32 session, __u64 bytes, __u64 avail)
{
	if (avail >= bytes - (bytes >> 2))
		fr_brake(session);
}

static __always_inline void fr_count_drop(__u32 session)
{
	fr_brake(session);  /* a full ring: nothing more until it drains */
	__u32 key = session % FR_MAX_SESSIONS;
	__u64 *n = bpf_map_lookup_elem(&fr_session_drops, &key);
	if (n)
		*n += 1;  /* per-CPU slot: no other writer */
	__u32 *flags = bpf_map_lookup_elem(&fr_session_flags, &key);
	if (flags && (*flags & FR_SESSION_OWN_RING))
		return;
	key = 0;
	n = bpf_map_lookup_elem(&fr_drops, &key);
	if (n)
		*n += 1;
}

/* A session's ring buffer (a map; NULL for none) and its size. */
struct fr_ring_ref {
	void *ring;
	__u64 bytes;
};

static __always_inline struct fr_ring_ref fr_ring(__u32 session)
{
	struct fr_ring_ref r = {};
	__u32 key = session % FR_MAX_SESSIONS;
	struct fr_ring_slot *slot = bpf_map_lookup_elem(&fr_session_ring_of, &key);
	if (!slot)
		return r;
	key = slot->index;
	r.bytes = slot->bytes;
	r.ring = bpf_map_lookup_elem(&fr_session_rings, &key);
	return r;
}

/* The tgid of the current task's parent, in a global function (as
 * fr_leader_session below), for the records other than syscalls: their
 * programs then pay the verifier's search for real_parent once each. */
extern __u32 fr_current_ppid(void);

/* The header of a record of the current task, `task`, whose parent is
 * `ppid` (a hot path that has the task already saves a helper call). */
static __always_inline void fr_fill_header_ppid(struct fr_header *h, struct task_struct *task, __u32 ppid,
					      __u32 type, __u32 size, __u32 session)
{
	h->type = type;
	h->size = size;
	h->ts_mono_ns = bpf_ktime_get_ns();
	/* Scalar fields of the task are read through its BTF pointer (a
	 * faulting load the verifier guards): a helper call each is dearer,
	 * most of all where every return pays for a speculation mitigation
	 * (SRSO). Its comm may change under a prctl() from another of its
	 * threads, as it may under bpf_get_current_comm(). A pointer loaded
	 * from the task costs the verifier a search of the kernel's BTF by
	 * name at every visit (~1 ms on 6.18): real_parent is loaded where
	 * the verifier visits it seldom (fr_parent_tgid, fr_current_ppid;
	 * bpf_probe_read_kernel, twice, was the dearest part of a record);
	 * the creds and cgroup come from their helpers. */
	__u64 uid_gid = bpf_get_current_uid_gid();
	h->cgroup_id = bpf_get_current_cgroup_id();
	h->pid = task->tgid;
	h->tid = task->pid;
	h->ppid = ppid;
	h->uid = (__u32)uid_gid;
	h->gid = uid_gid >> 32;
	h->cpu = (__u16)bpf_get_smp_processor_id();
	h->session = session;
	__builtin_memcpy(h->comm, task->comm, sizeof(h->comm));
}

/* The same for a syscall record, with the ids its task's state kept
 * (fr_task_ids). A header of its own, not fr_fill_header_ppid with its ids
 * passed in: that changed how clang compiled fr_exec's size, which 6.1's
 * verifier then could not bound. */
static __always_inline void fr_fill_header_ids(struct fr_header *h, struct task_struct *task, __u32 ppid,
					     __u32 type, __u32 size, __u32 session, __u64 uid_gid, __u64 cgroup_id)
{
	h->type = type;
	h->size = size;
	h->ts_mono_ns = bpf_ktime_get_ns();
	h->cgroup_id = cgroup_id;
	h->pid = task->tgid;
	h->tid = task->pid;
	h->ppid = ppid;
	h->uid = (__u32)uid_gid;
	h->gid = uid_gid >> 32;
	h->cpu = (__u16)bpf_get_smp_processor_id();
	h->session = session;
	__builtin_memcpy(h->comm, task->comm, sizeof(h->comm));
}

/* x86's thread_info.status bit for a call made through the 32-bit entry
 * (int 0x80), set from its entry until the return to user space. */
#define FR_TS_COMPAT 0x0002

/* Whether the current task's uid and gid may differ after this call
 * returns: set*id, and exec (a set-user-ID program), also as x32 calls;
 * and any call through the 32-bit entry, whose numbers are i386's
 * (setuid32 is 213, execve 11), rare enough to take all of. */
static __always_inline bool fr_changes_ids(struct task_struct *task, long nr)
{
	if (task->thread_info.status & FR_TS_COMPAT)
		return true;
	switch (nr & ~0x40000000L) {
	case 105: case 106: case 113: case 114: case 117: case 119: case 122: case 123: case 59: case 322:
		return true;
	}
	return false;
}

/* The current task's uid/gid and cgroup id for a syscall record, as their
 * helpers give them, kept in its state: two helper calls a record cost
 * ~50 ns here (each return pays for the SRSO mitigation). Creds are the
 * task's own; only its own calls change them, and fr_sys_exit clears
 * ids_valid after those (fr_changes_ids). A cgroup move (of any task; for
 * a whole process it fires for its leader alone) bumps fr_session_gen. The
 * generation is read first: a move meanwhile leaves them stale for one
 * record at most, as the helpers read at that moment would. */
static __always_inline void fr_task_ids(struct fr_task_state *st, __u64 *uid_gid, __u64 *cgroup_id)
{
	__u32 gen = fr_session_gen;
	if (!st->ids_valid || st->ids_gen != gen) {
		st->uid_gid = bpf_get_current_uid_gid();
		st->cgroup_id = bpf_get_current_cgroup_id();
		st->ids_gen = gen;
		st->ids_valid = 1;
	}
	*uid_gid = st->uid_gid;
	*cgroup_id = st->cgroup_id;
}

/* The tgid of the current task's parent, read straight from `task` (the
 * current task): no call's cost, for the syscall records. Each place it is
 * inlined costs the verifier a search by name at every visit (above), so
 * the syscall programs read it once, before they branch, and pass it down. */
static __always_inline __u32 fr_parent_tgid(struct task_struct *task)
{
	return task->real_parent->tgid;
}

static __always_inline void fr_fill_header(struct fr_header *h, __u32 type, __u32 size, __u32 session)
{
	fr_fill_header_ppid(h, bpf_get_current_task_btf(), fr_current_ppid(), type, size, session);
}

/* Wake the collector only when this record makes the unread data cross
 * the threshold: a wake-up per record costs more than the record itself
 * (see DESIGN.md), and waking on every record while the ring stays above
 * the threshold would make a busy ring slower still. Crossing the
 * high-water mark wakes the watchdog too, which then pauses the session
 * at once instead of at its next tick (a storm fills megabytes in one).
 * Both also poll on a short timer, so a missed crossing only delays a tick. */
static __always_inline __u64 fr_wakeup_flag_after(struct fr_ring_ref r, __u64 avail_after, __u64 size)
{
	__u64 wakeup = r.bytes >> (fr_wakeup_shift & 63);
	if (avail_after >= wakeup && avail_after < wakeup + size)
		return BPF_RB_FORCE_WAKEUP;
	__u64 high = r.bytes >> (fr_highwater_shift & 63);
	if (fr_highwater_shift && avail_after >= high && avail_after < high + size)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

/* For bpf_ringbuf_submit of a record of `session` (fr_reserve): the
 * reserved record already counts as unread. Applies the brake too, once
 * the ring is read for the wake-up anyway. */
static __always_inline __u64 fr_wakeup_flag(__u32 session, struct fr_ring_ref r, __u64 size)
{
	__u64 avail = bpf_ringbuf_query(r.ring, BPF_RB_AVAIL_DATA);
	fr_brake_if_full(session, r.bytes, avail);
	return fr_wakeup_flag_after(r, avail, size);
}

/* A record of `size` bytes reserved in the session's ring; NULL (a loss,
 * counted) when there is no room or no ring. *ring is set for the submit. */
static __always_inline void *fr_reserve(__u32 session, __u64 size, struct fr_ring_ref *ring)
{
	*ring = fr_ring(session);
	void *r = ring->ring ? bpf_ringbuf_reserve(ring->ring, size, 0) : 0;
	if (!r)
		fr_count_drop(session);
	return r;
}

/* The session of the current task's group leader, 0 for none. One global
 * function (maps.bpf.c), which the verifier checks once per program: it
 * is the one place that loads task->group_leader, a trusted pointer whose
 * every load makes the verifier search the kernel's BTF by name (~1 ms on
 * 6.18), which each inlined copy paid on every path. */
extern __u32 fr_leader_session(void);
/* Whether the current program has made a probed TLS call since its exec
 * (kept on its group leader); with mark, notes that it has. */
extern __u32 fr_leader_tls_probed(__u32 mark);
/* The file at fd of the current task, 0 for none; as a number, since a
 * global function returns a scalar (it is only read through helpers).
 * Global functions, this and fr_fd_sock: the verifier checks each once
 * per program instead of at every place and in every state the record's
 * optional pieces reach it in (most of fr_sys_exit's load time). */
extern __u64 fr_fd_file(__s64 fd);
/* The inode number of the socket at fd of the current task (its name in
 * /proc: socket:[N]); 0 when fd is no socket. */
extern __u64 fr_sock_ino(__s64 fd);
/* At a socket write (syscall nr, fd, its second argument) of the current
 * thread: binds the AEAD context it sealed with, if one waits
 * (fr_aead_pending) and the bytes written start with its record. */
extern int fr_aead_bind(__s64 nr, __s64 fd, __u64 arg2, __u32 session);

/* The session the current task is recorded in; 0 for none. Tasks get state
 * on their first syscall inside a session and stay in it wherever they go;
 * the cgroup walk is for the others. `task` is the current task. */
static __always_inline __u32 fr_task_session(struct task_struct *task)
{
	struct fr_task_state *st = bpf_task_storage_get(&fr_tasks, task, 0, 0);
	if (st && fr_session_open(st->session))
		return st->session;
	/* The group leader too: io_uring's workers are made without a fork
	 * event, and a process that left the session's cgroup keeps them. */
	__u32 session = fr_leader_session();
	if (session)
		return session;
	return fr_current_session();
}

/* Copy a record built in scratch space to the ring buffer. Scratch space
 * is per CPU and per program: the kernel never runs one program nested
 * on the same CPU, so no one else writes it meanwhile. */
static __always_inline void fr_output(void *rec, __u64 size)
{
	__u32 session = ((struct fr_header *)rec)->session;
	struct fr_ring_ref ring = fr_ring(session);
	if (!ring.ring) {
		fr_count_drop(session);
		return;
	}
	__u64 avail_after = bpf_ringbuf_query(ring.ring, BPF_RB_AVAIL_DATA) + size;
	fr_brake_if_full(session, ring.bytes, avail_after);
	if (bpf_ringbuf_output(ring.ring, rec, size, fr_wakeup_flag_after(ring, avail_after, size)) != 0)
		fr_count_drop(session);
}

/* The name a UNIX socket is bound to, as the kernel holds it (struct
 * unix_address), copied to dst: its length, or 0 when unbound. */
static __always_inline __u32 fr_unix_name(struct sock *sk, __u8 *dst)
{
	struct unix_address *a = BPF_CORE_READ((struct unix_sock *)sk, addr);
	int len = a ? BPF_CORE_READ(a, len) : 0;
	__u32 n = (__u32)len;
	barrier_var(n);  /* the mask below stays on the register the helper gets */
	n &= 0xff;
	if (len <= 0 || len > FR_SOCKADDR_MAX ||
	    bpf_probe_read_kernel(dst, n, (void *)a + bpf_core_field_offset(struct unix_address, name)))
		return 0;
	return (__u32)len;
}

#endif
