/* Process lifecycle of the session's tasks from the sched tracepoints:
 * fork/clone (the child's ids), exec (the file and the new argv) and exit
 * (wait status, and whether the whole process is gone); and every move of
 * one of them to another cgroup (they stay recorded wherever they go). */
#include "lib/common.bpf.h"

#define STR_MASK (FR_STR_MAX - 1)
#define ARGV_MASK (FR_ARGV_MAX - 1)

struct exec_scratch {
	__u8 buf[sizeof(struct fr_exec) + FR_STR_MAX + FR_ARGV_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exec_scratch);
} exec_scratch_map SEC(".maps");

/* Files exec'd since the programs were loaded, with TLS capture on: only
 * the first exec of a file wakes the collector at once (below). Its TLS
 * probes, if it carries TLS, are per file, so they are in place for every
 * later exec of it; waking the collector again would cost an interrupt
 * (a self-IPI: a VM exit in a guest) on every exec for nothing. */
struct exec_file_key {
	__u64 dev, ino;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct exec_file_key);
	__type(value, __u8);
} fr_execd_files SEC(".maps");

/* The first exec of each file, told at once on a ring of its own
 * (struct fr_exec_notice): read ahead of the records queued before it. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} fr_exec_notices SEC(".maps");

static __always_inline bool first_exec_of(struct linux_binprm *bprm)
{
	struct exec_file_key key = {
		.dev = BPF_CORE_READ(bprm, file, f_inode, i_sb, s_dev),
		.ino = BPF_CORE_READ(bprm, file, f_inode, i_ino),
	};
	__u8 seen = 1;
	return bpf_map_update_elem(&fr_execd_files, &key, &seen, BPF_NOEXIST) == 0;
}

struct argv_pieces {
	__u64 start, total;
	__u32 session;
};

/* One fr_argv record: argv bytes from FR_ARGV_MAX * (i + 1) on; 1 when
 * there are no more. A global function: the verifier checks it once, not
 * at every step of its loop's convergence in every state of fr_exec. */
__noinline int fr_argv_piece(__u32 i, struct argv_pieces *a)
{
	if (!a)
		return 1;
	__u64 offset = (__u64)FR_ARGV_MAX * (i + 1);
	if (offset >= a->total)
		return 1;
	__u32 zero = 0;
	struct exec_scratch *s = bpf_map_lookup_elem(&exec_scratch_map, &zero);
	if (!s)
		return 1;
	struct fr_argv *r = (struct fr_argv *)s->buf;
	__u64 len = a->total - offset;
	if (len > FR_ARGV_MAX)
		len = FR_ARGV_MAX;
	if (bpf_probe_read_user(r->data, len & (2 * FR_ARGV_MAX - 1), (const void *)(a->start + offset)))
		return 1;  /* gone: the exec record's argv_bytes still says how long it was */
	__u32 size = sizeof(*r) + (__u32)len;
	fr_fill_header(&r->h, FR_REC_ARGV, size, a->session);
	r->offset = (__u32)offset;
	r->len = (__u32)len;
	fr_output(r, size & (2 * FR_ARGV_MAX - 1));
	return 0;
}

static long argv_piece(__u32 i, void *ctx)
{
	return fr_argv_piece(i, ctx) ? 1 : 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(fr_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 session = fr_task_session(parent);
	if (!session)
		return 0;
	if (fr_view_gen_on)
		fr_bump_view_gen();  /* a new thread id in the session, state or not */
	/* The child is watched from its first syscall on (one seccomp stops
	 * before sys_enter too); its first sys_exit is fork returning in it. */
	struct fr_task_state *st = bpf_task_storage_get(&fr_tasks, child, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (st && !st->session) {  /* else seeded meanwhile: the child is in the cgroup before this runs */
		st->active = 0;
		st->fork_return = 1;
		fr_join_session(st, session);
	}
	struct fr_ring_ref ring;
	struct fr_fork *r = fr_reserve(session, sizeof(*r), &ring);
	if (!r)
		return 0;
	fr_fill_header(&r->h, FR_REC_FORK, sizeof(*r), session);
	/* Scalar fields of the tracepoint's tasks are read directly, without
	 * a helper call each; pointers are followed with BPF_CORE_READ, as a
	 * pointer loaded from a trusted one costs the verifier a search of the
	 * kernel's BTF by name at every visit (milliseconds of start-up). */
	r->child_pid = child->tgid;
	r->child_tid = child->pid;
	r->flags = r->child_pid == parent->tgid ? FR_FORK_THREAD : 0;
	/* A clone with CLONE_NEW* flags gets a namespace set (or user
	 * namespace) of its own; one without shares its parent's. */
	if (BPF_CORE_READ(child, nsproxy) != BPF_CORE_READ(parent, nsproxy) ||
	    BPF_CORE_READ(child, real_cred, user_ns) != BPF_CORE_READ(parent, real_cred, user_ns))
		r->flags |= FR_FORK_NEW_NS;
	r->pad = 0;
	bpf_ringbuf_submit(r, fr_wakeup_flag(session, ring, sizeof(*r)));
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(fr_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 session = fr_task_session(p);
	if (!session)
		return 0;
	__u32 zero = 0;
	struct exec_scratch *s = bpf_map_lookup_elem(&exec_scratch_map, &zero);
	if (!s)
		return 0;
	struct fr_exec *r = (struct fr_exec *)s->buf;
	char *filename = (char *)s->buf + sizeof(*r);
	__u32 flags = 0;

	const char *kname = BPF_CORE_READ(bprm, filename);
	long n = bpf_probe_read_kernel_str(filename, FR_STR_MAX, kname);
	__u32 flen = n > 0 ? (__u32)(n - 1) & STR_MASK : 0;
	if (n == FR_STR_MAX)
		flags |= FR_EXEC_FILENAME_TRUNC;

	/* argv of the new image lives on its stack, NUL-separated. */
	struct mm_struct *mm = BPF_CORE_READ(p, mm);
	__u64 arg_start = BPF_CORE_READ(mm, arg_start);
	__u64 arg_end = BPF_CORE_READ(mm, arg_end);
	__u64 total = arg_end > arg_start ? arg_end - arg_start : 0;
	__u64 alen = total;
	if (alen > FR_ARGV_MAX) {
		alen = FR_ARGV_MAX;
		flags |= FR_EXEC_ARGV_TRUNC;
	}
	char *argv = filename + flen;
	if (alen && bpf_probe_read_user(argv, alen,
					(const void *)arg_start)) {
		flags |= FR_EXEC_ARGV_FAULT;
		alen = 0;
	}

	__u32 size = sizeof(*r) + flen + (__u32)alen;
	fr_fill_header(&r->h, FR_REC_EXEC, size, session);
	r->old_pid = old_pid;
	r->flags = flags;
	r->filename_len = flen;
	r->argv_len = alen;
	r->argv_total = total > 0xffffffffULL ? 0xffffffffU : (__u32)total;
	/* With TLS capture on, the collector is woken for a file's first exec:
	 * a program that carries its own TLS (Go, node) is probed as it starts,
	 * not a tick later, when its first connection may be made already. */
	struct fr_ring_ref ring = fr_ring(session);
	bool wake_now = fr_tls_enabled && first_exec_of(bprm);
	__u64 avail_after = ring.ring ? bpf_ringbuf_query(ring.ring, BPF_RB_AVAIL_DATA) + size : 0;
	if (ring.ring)
		fr_brake_if_full(session, ring.bytes, avail_after);
	if (size <= sizeof(s->buf) &&
	    (!ring.ring || bpf_ringbuf_output(ring.ring, r, size, wake_now ? BPF_RB_FORCE_WAKEUP : fr_wakeup_flag_after(
				ring, avail_after, size)) != 0))
		fr_count_drop(session);
	if (wake_now) {
		struct fr_exec_notice notice = {
			.pid = BPF_CORE_READ(p, tgid),
			.session = session,
			.ino = BPF_CORE_READ(bprm, file, f_inode, i_ino),
			.start_boottime = BPF_CORE_READ(p, start_boottime),
		};
		bpf_ringbuf_output(&fr_exec_notices, &notice, sizeof(notice), BPF_RB_FORCE_WAKEUP);
	}
	/* The rest of a long command line, in pieces (an argument past the
	 * first 4 KiB must not go unrecorded). */
	if ((flags & FR_EXEC_ARGV_TRUNC) && !(flags & FR_EXEC_ARGV_FAULT)) {
		struct argv_pieces a = { .start = arg_start, .total = total, .session = session };
		bpf_loop(FR_ARGV_PIECES, argv_piece, &a, 0);
	}

	/* Hand the filename to the execve syscall record (syscalls.bpf.c). */
	struct fr_task_state *st = bpf_task_storage_get(&fr_tasks, p, 0, 0);
	if (st)
		st->tls_probed = 0;  /* a new program: its TLS library is judged anew */
	if (st && flen) {
		bpf_probe_read_kernel(st->exec_path, flen, filename);
		st->exec_path_len = flen;
		st->exec_flags = (flags & FR_EXEC_FILENAME_TRUNC) ? FR_SC_STR0_TRUNC : 0;
	}
	return 0;
}

static __always_inline void record_exit(struct task_struct *p)
{
	__u32 session = fr_task_session(p);
	if (!session)
		return;
	struct fr_ring_ref ring;
	struct fr_exit *r = fr_reserve(session, sizeof(*r), &ring);
	if (!r)
		return;
	fr_fill_header(&r->h, FR_REC_EXIT, sizeof(*r), session);
	r->exit_code = p->exit_code;
	r->flags = BPF_CORE_READ(p, signal, live.counter) == 0 ? FR_EXIT_GROUP_DEAD : 0;
	bpf_ringbuf_submit(r, fr_wakeup_flag(session, ring, sizeof(*r)));
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(fr_exit, struct task_struct *p)
{
	struct fr_task_state *own = bpf_task_storage_get(&fr_tasks, p, 0, 0);
	if (fr_view_gen_on && (own || fr_task_session(p)))
		fr_bump_view_gen();  /* its id may be another thread's from now on */
	if (own && fr_session_open(own->session))
		fr_count_task(own->session, false);
	record_exit(p);
	/* A TLS call it died inside leaves no slot for the next task with its id. */
	__u32 tid = p->pid;
	bpf_map_delete_elem(&fr_tls_calls, &tid);
	/* Counted out once, and the state goes with the count: state the
	 * recorder seeds into a task that is exiting meanwhile is then found
	 * still there and taken back (Capture::track_existing), never counted in
	 * its session forever. */
	if (own)
		bpf_task_storage_delete(&fr_tasks, p);
	return 0;
}

SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(fr_cgroup_move, struct cgroup *dst_cgrp, const char *path, struct task_struct *task, bool threadgroup)
{
	__u16 flags = 0;
	__u32 session = 0;
	/* Wherever it goes, its next syscall works out its session anew; so
	 * do its threads, which this fires for only once (with the group
	 * leader) when a whole process moves, and any verdict a task was
	 * working out meanwhile: fr_outside and fr_verdicts go stale. */
	bpf_task_storage_delete(&fr_outside, task);
	__sync_fetch_and_add(&fr_session_gen, 1);
	struct fr_task_state *st = bpf_task_storage_get(&fr_tasks, task, 0, 0);
	if (st && fr_session_open(st->session))
		session = st->session;
	if (!session) {
		st = bpf_task_storage_get(&fr_tasks, task->group_leader, 0, 0);
		if (st && fr_session_open(st->session))
			session = st->session;
	}
	if (!session && (session = fr_cgroup_session(dst_cgrp))) {
		/* Put there by someone else (a task outside, another session):
		 * the record says how it came, and it is the session's now. */
		flags = FR_MOVE_INTO_SESSION;
		st = bpf_task_storage_get(&fr_tasks, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (st && !st->session) {
			st->fork_return = 1;  /* it may be inside a syscall we did not see begin */
			st->active = 0;
			fr_join_session(st, session);
		}
	}
	if (!session && task == bpf_get_current_task_btf())
		session = fr_current_session();  /* moving itself out of a session's cgroup */
	if (!session)
		return 0;
	struct fr_ring_ref ring;
	struct fr_cgroup_move *r = fr_reserve(session, sizeof(*r), &ring);
	if (!r)
		return 0;
	fr_fill_header(&r->h, FR_REC_CGROUP_MOVE, sizeof(*r), session);
	r->dst_cgroup_id = BPF_CORE_READ(dst_cgrp, kn, id);
	r->pid = task->tgid;
	r->tid = task->pid;
	r->threadgroup = threadgroup ? 1 : 0;
	r->flags = flags;
	long n = bpf_probe_read_kernel_str(r->path, sizeof(r->path), path);
	if (n <= 0)
		n = 1;
	if (n == sizeof(r->path))
		r->flags |= FR_MOVE_PATH_TRUNC;
	r->path_len = (__u16)(n - 1);
	bpf_ringbuf_submit(r, fr_wakeup_flag(session, ring, sizeof(*r)));
	return 0;
}
