/* The one definition of the maps and settings all flightrec BPF programs
 * share (declared in lib/common.bpf.h); bpftool links the objects. */
#define FR_SHARED
#include "lib/common.bpf.h"

const volatile __u32 fr_self_tgid = 0;
const volatile __u32 fr_tls_enabled = 0;
const volatile __u32 fr_exit_only = 0;
const volatile __u32 fr_hidden_rules = 0;
const volatile __u32 fr_exec_rules = 0;
const volatile __u32 fr_egress_count = 0;
const volatile __u32 fr_egress_lsm = 0;
const volatile __u64 fr_tls_chunk = 16384;
const volatile __u64 fr_tls_cap = 262144;
const volatile __u32 fr_wakeup_shift = 3;     /* an eighth full */
const volatile __u32 fr_highwater_shift = 0;
const volatile __u32 fr_view_gen_on = 0;
volatile __u32 fr_session_gen = 0;

/* The loads of current->group_leader and ->real_parent (see lib/common.bpf.h). */
__noinline __u32 fr_leader_session(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fr_task_state *st = bpf_task_storage_get(&fr_tasks, task->group_leader, 0, 0);
	return st && fr_session_open(st->session) ? st->session : 0;
}

__noinline __u32 fr_current_ppid(void)
{
	return bpf_get_current_task_btf()->real_parent->tgid;
}

__noinline __u32 fr_walk_current_cgroup(__u64 cgroup, __u32 generation)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fr_cgroup_verdict v = {
		.generation = generation,
		.session = fr_cgroup_session(BPF_CORE_READ(task, cgroups, dfl_cgrp)),
	};
	bpf_map_update_elem(&fr_verdicts, &cgroup, &v, BPF_ANY);
	return v.session;
}

__noinline __u32 fr_leader_tls_probed(__u32 mark)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fr_task_state *st = bpf_task_storage_get(&fr_tasks, task->group_leader, 0, 0);
	if (!st)
		return 0;
	if (mark && !st->tls_probed)
		st->tls_probed = 1;
	return st->tls_probed;
}

__noinline __u64 fr_fd_file(__s64 fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = NULL;

	if (fd < 0 || (__u64)fd >= BPF_CORE_READ(fdt, max_fds) ||
	    bpf_probe_read_kernel(&f, sizeof(f), fds + fd))
		return 0;
	return (__u64)f;
}

__noinline __u64 fr_sock_ino(__s64 fd)
{
	struct file *f = (struct file *)fr_fd_file(fd);
	if (!f)
		return 0;
	struct inode *inode = BPF_CORE_READ(f, f_inode);
	if ((BPF_CORE_READ(inode, i_mode) & FR_S_IFMT) != FR_S_IFSOCK)
		return 0;
	return BPF_CORE_READ(inode, i_ino);
}

__noinline int fr_aead_bind(__s64 nr, __s64 fd, __u64 arg2, __u32 session)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct fr_aead_wait *wait = bpf_map_lookup_elem(&fr_aead_pending, &tid);
	if (!wait)
		return 0;
	struct fr_aead_wait w = *wait;
	if (bpf_ktime_get_ns() - w.since_ns > FR_AEAD_WAIT_NS) {
		bpf_map_delete_elem(&fr_aead_pending, &tid);
		return 0;  /* its records go on without a connection */
	}
	/* The bytes written: write and sendto's buffer, writev's and sendmsg's
	 * first iovec (struct msghdr's msg_iov is at 16). */
	__u64 buf = arg2;
	__u64 iov[2] = {};
	if (nr == 46 && bpf_probe_read_user(&buf, sizeof(buf), (const void *)(arg2 + 16)))
		return 0;
	if ((nr == 20 || nr == 46) && bpf_probe_read_user(iov, sizeof(iov), (const void *)buf))
		return 0;
	if (nr == 20 || nr == 46)
		buf = iov[0];
	__u8 head[5] = {};
	if (bpf_probe_read_user(head, sizeof(head), (const void *)buf))
		return 0;
	for (int i = 0; i < 5; i++)
		if (i < w.wire_len && head[i] != w.wire[i])
			return 0;  /* not that record: an eventfd, a pipe, another socket's bytes */
	__u64 ino = fr_sock_ino(fd);
	if (!ino)
		return 0;
	struct fr_aead_key key = { .ctx = w.ctx, .tgid = id >> 32 };
	struct fr_aead_conn conn = { .ino = ino, .fd = (__s32)fd };
	bpf_map_delete_elem(&fr_aead_pending, &tid);
	/* Never in place of a binding: a stale one was dropped where it was found so. */
	if (bpf_map_update_elem(&fr_aead_conns, &key, &conn, BPF_NOEXIST) != 0)
		return 0;
	struct fr_tls_bind r = { .ctx = key.ctx, .conn = ino, .fd = (__s32)fd };
	fr_fill_header(&r.h, FR_REC_TLS_BIND, sizeof(r), session);
	fr_output(&r, sizeof(r));
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
