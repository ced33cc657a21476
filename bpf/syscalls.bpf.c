/* Every syscall of the session's tasks, entry and exit joined into one
 * record: sys_enter keeps the arguments in task storage, sys_exit adds the
 * return value, reads string and socket-address arguments (the kernel has
 * faulted those pages in by then) and emits one record. sys_enter serves
 * only the sessions that ask for it (FR_SESSION_ENTRY; it is attached
 * only while one is open, as its cost falls on every task on the host):
 * for the others sys_exit reads the number and arguments from the
 * registers, which still hold them, and the record has no entry time.
 * A task outside every session costs each program one storage lookup
 * (fr_outside). A successful open
 * also carries the path of the file the kernel opened, walked up from the
 * new fd's dentry: another thread can rewrite the path argument while the
 * kernel resolves it, but not the kernel's own objects.
 *
 * Lite sessions have none of that: the raw syscall programs leave them
 * alone, and fr_lite_exit sees only the calls fr_lite_calls names, at
 * their own tracepoints (docs/LITE.md). */
#include "lib/common.bpf.h"

#define NR_EXIT 60
#define NR_EXIT_GROUP 231
#define NR_EXECVE 59
#define NR_EXECVEAT 322
#define NR_RT_SIGRETURN 15
#define NR_CLONE 56
#define NR_FORK 57
#define NR_VFORK 58
#define NR_CLONE3 435
#define NR_OPEN 2
#define NR_CREAT 85
#define NR_OPENAT 257
#define NR_OPENAT2 437
#define NR_BIND 49
#define NR_ACCEPT 43
#define NR_ACCEPT4 288
#define NR_WRITE 1
#define NR_WRITEV 20
#define NR_CONNECT 42
#define NR_SENDTO 44
#define NR_SENDMSG 46
#define NR_RECVFROM 45
#define NR_RECVMSG 47
#define NR_GETSOCKNAME 51
#define NR_GETPEERNAME 52
#define FR_AF_INET 2
#define FR_AF_INET6 10
#define FR_EINPROGRESS 115
#define FR_IPPROTO_TCP 6
#define FR_AF_UNIX 1
#define NAME_MAX 255  /* include/uapi/linux/limits.h */

#define STR_MASK (FR_STR_MAX - 1)

struct sys_scratch {
	/* Two strings and the kernel's path, each up to FR_STR_MAX - 1 bytes. */
	__u8 buf[sizeof(struct fr_syscall) + sizeof(struct fr_syscall_data) + 3 * FR_STR_MAX];
	/* The kernel's path is built backwards, ending at kpath[FR_STR_MAX];
	 * NAME_MAX + 1 bytes of slack let the verifier see every write in bounds. */
	char kpath[FR_STR_MAX + NAME_MAX + 1];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sys_scratch);
} sys_scratch_map SEC(".maps");

static __always_inline void fill_syscall(struct fr_syscall *r, struct task_struct *task, __u32 ppid,
					 struct fr_task_state *st, __u32 size, __s64 ret, __u32 flags)
{
	__u64 uid_gid, cgroup_id;
	fr_task_ids(st, &uid_gid, &cgroup_id);
	fr_fill_header_ids(&r->h, task, ppid, FR_REC_SYSCALL, size, st->session, uid_gid, cgroup_id);
	r->enter_ns = st->enter_ns;
	for (int i = 0; i < 6; i++)
		r->args[i] = st->args[i];
	r->ret = ret;
	r->nr = st->nr;
	r->flags = flags;
	r->str_len[0] = 0;
	r->str_len[1] = 0;
	r->sockaddr_len = 0;
	r->kpath_len = 0;
}

static __always_inline void emit_plain(struct task_struct *task, __u32 ppid, struct fr_task_state *st, __s64 ret,
				       __u32 flags)
{
	struct fr_ring_ref ring;
	struct fr_syscall *r = fr_reserve(st->session, sizeof(*r), &ring);
	if (!r)
		return;
	fill_syscall(r, task, ppid, st, sizeof(*r), ret, flags);
	bpf_ringbuf_submit(r, fr_wakeup_flag(st->session, ring, sizeof(*r)));
}

/* Reads one user string into dst; returns its length without the NUL. */
static __always_inline __u32 read_str(char *dst, __s64 uptr, __u32 *flags,
				      __u32 trunc_flag, __u32 fault_flag)
{
	long n = bpf_probe_read_user_str(dst, FR_STR_MAX, (const void *)uptr);
	if (n <= 0) {
		*flags |= fault_flag;
		return 0;
	}
	if (n == FR_STR_MAX)
		*flags |= trunc_flag;
	return (__u32)(n - 1) & STR_MASK;
}

static __always_inline __u32 read_sockaddr(__u8 *dst, struct fr_syscall_spec *spec,
					   struct fr_task_state *st, __s64 ret, __u32 *flags)
{
	if (spec->sockaddr_arg >= 6 || (spec->sockaddr_mode != FR_SA_MSG && spec->sockaddr_len_arg >= 6))
		return 0;
	__s64 uptr = st->args[spec->sockaddr_arg & 7];
	__s64 lenarg = spec->sockaddr_len_arg < 6 ? st->args[spec->sockaddr_len_arg & 7] : 0;
	__u64 len;

	if (!uptr)
		return 0;
	if (spec->sockaddr_mode == FR_SA_IN) {
		len = (__u64)lenarg;
	} else if (spec->sockaddr_mode == FR_SA_MSG) {
		/* struct user_msghdr starts with msg_name and msg_namelen (an
		 * mmsghdr with its msg_hdr). */
		struct {
			__u64 name;
			__s32 namelen;
		} hdr;
		if (bpf_probe_read_user(&hdr, sizeof(hdr), (const void *)uptr)) {
			*flags |= FR_SC_SOCKADDR_FAULT;
			return 0;
		}
		if (!hdr.name || hdr.namelen <= 0)
			return 0;  /* a connected socket: no destination given */
		uptr = (__s64)hdr.name;
		len = (__u64)hdr.namelen;
	} else if (spec->sockaddr_mode == FR_SA_OUT) {
		__u32 outlen = 0;
		if (ret < 0 || !lenarg)
			return 0;
		if (!st->enter_ns) {
			/* Read at the return alone (no entry time): the kernel may
			 * have cut the address to the caller's buffer, whose size
			 * is gone: never read past it. */
			*flags |= FR_SC_SOCKADDR_UNREAD;
			return 0;
		}
		if (bpf_probe_read_user(&outlen, sizeof(outlen), (const void *)lenarg)) {
			*flags |= FR_SC_SOCKADDR_FAULT;
			return 0;
		}
		/* The kernel reports the address's full size, which may exceed
		 * the caller's buffer: never read past what the caller gave. */
		len = outlen < st->sa_buf_len ? outlen : st->sa_buf_len;
	} else {
		return 0;
	}
	if (len > FR_SOCKADDR_MAX)
		len = FR_SOCKADDR_MAX;
	if (len == 0)
		return 0;
	if (bpf_probe_read_user(dst, len & 0xff, (const void *)uptr)) {
		*flags |= FR_SC_SOCKADDR_FAULT;
		return 0;
	}
	return (__u32)len;
}

/* One step up from a dentry toward the task's root, for bpf_loop: the
 * loop body is verified once, whatever the path's depth. */
struct kpath_walk {
	struct dentry *d, *root_d;
	struct vfsmount *vm, *root_m;
	struct mount *m;
	__u64 mnt_off;           /* of struct mount's mnt (CO-RE) */
	__u32 off;               /* where the path built so far starts in kpath[] */
	__u32 reached;           /* the walk arrived at the root */
};

static long kpath_step(__u32 i, void *ctx)
{
	struct kpath_walk *w = ctx;
	/* Locals: BPF_CORE_READ relocates every access in its argument, and
	 * kpath_walk is ours, not the kernel's. */
	struct dentry *d = w->d;
	struct vfsmount *vm = w->vm;
	struct mount *m = w->m;
	__u32 zero = 0;
	struct sys_scratch *s = bpf_map_lookup_elem(&sys_scratch_map, &zero);

	if (!s)
		return 1;
	if (d == w->root_d && vm == w->root_m) {
		w->reached = 1;
		return 1;
	}
	struct dentry *parent = BPF_CORE_READ(d, d_parent);
	if (d == BPF_CORE_READ(vm, mnt_root) || d == parent) {
		/* The top of a mount: on to where it is mounted. */
		struct mount *up = BPF_CORE_READ(m, mnt_parent);
		if (up == m) {  /* the top of its tree */
			w->reached = 1;
			return 1;
		}
		w->d = BPF_CORE_READ(m, mnt_mountpoint);
		w->m = up;
		w->vm = (struct vfsmount *)((void *)up + w->mnt_off);
		return 0;
	}
	__u32 len = BPF_CORE_READ(d, d_name.len);
	const unsigned char *name = BPF_CORE_READ(d, d_name.name);
	__u32 off = w->off;
	if (len > NAME_MAX || off > FR_STR_MAX || off < len + 2)
		return 1;  /* no room: the path is cut (never to FR_STR_MAX bytes) */
	off -= len;
	bpf_probe_read_kernel(s->kpath + (off & (FR_STR_MAX - 1)), len & NAME_MAX, name);
	off -= 1;
	s->kpath[off & (FR_STR_MAX - 1)] = '/';
	w->off = off;
	w->d = parent;
	return 0;
}

/* The socket at fd of the current task; 0 when fd is no socket. */
__noinline __u64 fr_fd_sock(__s64 fd)
{
	struct file *f = (struct file *)fr_fd_file(fd);
	if (!f || (BPF_CORE_READ(f, f_inode, i_mode) & FR_S_IFMT) != FR_S_IFSOCK)
		return 0;
	struct socket *sock = (struct socket *)BPF_CORE_READ(f, private_data);
	return (__u64)BPF_CORE_READ(sock, sk);
}

/* The path of the file at fd of the current task, as the task sees it (up
 * to its root; across mounts), built backwards in s->kpath so that it ends
 * at kpath[FR_STR_MAX]. Returns where it starts, or FR_STR_MAX when there
 * is no such file. Sets FR_SC_KPATH_TRUNC when the walk stopped short. */
static __always_inline __u32 kernel_path(struct task_struct *task, __s64 fd, struct sys_scratch *s,
					 __u32 *flags)
{
	struct file *f = (struct file *)fr_fd_file(fd);
	if (!f)
		return FR_STR_MAX;
	struct kpath_walk w = {
		.d = BPF_CORE_READ(f, f_path.dentry),
		.vm = BPF_CORE_READ(f, f_path.mnt),
		.root_d = BPF_CORE_READ(task, fs, root.dentry),
		.root_m = BPF_CORE_READ(task, fs, root.mnt),
		.mnt_off = bpf_core_field_offset(struct mount, mnt),
		.off = FR_STR_MAX,
	};
	w.m = (struct mount *)((void *)w.vm - w.mnt_off);
	bpf_loop(FR_KPATH_DEPTH, kpath_step, &w, 0);
	if (!w.reached)
		*flags |= FR_SC_KPATH_TRUNC;
	__u32 off = w.off;
	if (off >= FR_STR_MAX) {  /* the root itself */
		off = FR_STR_MAX - 1;
		s->kpath[off] = '/';
	}
	*flags |= FR_SC_KPATH;
	return off;
}

#define FR_NAME_BOUND 0  /* what a bind asked: port 0 when the kernel chose one */
#define FR_NAME_PEER 1   /* the peer */
#define FR_NAME_LOCAL 2  /* the local address and port as they are */
#define FR_SOCK_BINDPORT_LOCK 8  /* include/net/sock.h: the port was asked for (sk_userlocks is
				  * a 4-bit bitfield before 6.9, a byte since: read as a bitfield) */

/* An IP socket's address as the kernel holds it, as a sockaddr_in or
 * sockaddr_in6 in dst: its peer (which == FR_NAME_PEER) or its local address. Returns
 * its length, or 0 when sk is no IP socket or has no such address yet.
 * A global function, as fr_fd_file: checked once, not at every call. */
__noinline __u32 fr_inet_name(__u64 skp, struct fr_syscall_data *d, int which)
{
	struct sock *sk = (struct sock *)skp;
	if (!d || !sk)
		return 0;
	__u8 *dst = d->sockaddr;
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	/* Ports in network order, as in a sockaddr (skc_num is host order).
	 * A bind of port 0 asks the kernel to choose: recorded as asked, as a
	 * client's bind (the one it chose is getsockname's answer). */
	__u16 port = which == FR_NAME_PEER ? BPF_CORE_READ(sk, __sk_common.skc_dport)
				: bpf_htons(BPF_CORE_READ(sk, __sk_common.skc_num));
	if (which == FR_NAME_BOUND && !(BPF_CORE_READ_BITFIELD_PROBED(sk, sk_userlocks) & FR_SOCK_BINDPORT_LOCK))
		port = 0;
	if (family != FR_AF_INET && family != FR_AF_INET6)
		return 0;
	__builtin_memset(dst, 0, 28);
	*(__u16 *)dst = family;
	*(__u16 *)(dst + 2) = port;
	if (family == FR_AF_INET) {
		__u32 addr = which == FR_NAME_PEER ? BPF_CORE_READ(sk, __sk_common.skc_daddr)
				       : BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
		if (which == FR_NAME_PEER && !addr && !port)
			return 0;  /* not connected */
		*(__u32 *)(dst + 4) = addr;
		return 16;  /* sizeof(struct sockaddr_in) */
	}
	if (which == FR_NAME_PEER)
		BPF_CORE_READ_INTO(dst + 8, sk, __sk_common.skc_v6_daddr);
	else
		BPF_CORE_READ_INTO(dst + 8, sk, __sk_common.skc_v6_rcv_saddr);
	if (which == FR_NAME_PEER && !port && !*(__u64 *)(dst + 8) && !*(__u64 *)(dst + 16))
		return 0;
	return 28;  /* sizeof(struct sockaddr_in6) */
}

/* The address a socket call named or returned, from the kernel's own
 * socket, where the call leaves it there: a connect that succeeded or is
 * under way (its peer), an accept's new connection and getpeername (their
 * peer), a bind and getsockname (the socket's own name). The argument is
 * user memory, which another thread can rewrite while the kernel reads
 * it, or after the kernel wrote it; the socket cannot be. For UNIX
 * sockets the names are the bound ones (struct unix_address). Returns the
 * length copied to d->sockaddr, or 0 to keep what was read from memory. */
static __always_inline __u32 kernel_sockaddr(struct fr_task_state *st, __s64 ret, struct fr_syscall_data *d)
{
	__u32 nr = st->nr;
	__s64 fd = st->args[0];
	int which;

	if (nr == NR_CONNECT && (ret == 0 || ret == -FR_EINPROGRESS))
		which = FR_NAME_PEER;
	else if ((nr == NR_ACCEPT || nr == NR_ACCEPT4) && ret >= 0)
		which = FR_NAME_PEER, fd = ret;
	else if (nr == NR_GETPEERNAME && ret == 0)
		which = FR_NAME_PEER;
	else if (nr == NR_BIND && ret == 0)
		which = FR_NAME_BOUND;
	else if (nr == NR_GETSOCKNAME && ret == 0)
		which = FR_NAME_LOCAL;
	else
		return 0;
	struct sock *sk = (struct sock *)fr_fd_sock(fd);
	if (!sk)
		return 0;
	if (BPF_CORE_READ(sk, __sk_common.skc_family) == FR_AF_UNIX) {
		/* An accepted UNIX connection's peer is the client, unnamed
		 * as a rule: what accept returned is kept. */
		if (nr == NR_ACCEPT || nr == NR_ACCEPT4)
			return 0;
		if (which == FR_NAME_PEER)
			sk = BPF_CORE_READ((struct unix_sock *)sk, peer);
		return sk ? fr_unix_name(sk, d->sockaddr) : 0;
	}
	return fr_inet_name((__u64)sk, d, which);
}

static __always_inline bool tcp_socket(struct task_struct *task, __s64 fd)
{
	struct sock *sk = (struct sock *)fr_fd_sock(fd);
	if (!sk || BPF_CORE_READ(sk, sk_protocol) != FR_IPPROTO_TCP)
		return false;
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	return family == FR_AF_INET || family == FR_AF_INET6;
}

/* TCP connections a session's task made whose first send is not seen yet,
 * by (process, fd). LRU: a connection closed unsent leaves its slot to the
 * newest. */
struct conn_key {
	__u32 tgid;
	__s32 fd;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct conn_key);
	__type(value, __u8);
} fresh_conns SEC(".maps");

/* A hello's or a DNS answer's record room (one at a time: sys_exit makes
 * them in turn): the read's length is masked to one below the data's size
 * (a power of two), which the verifier of every kernel can follow. */
union record_scratch {
	struct fr_tls_hello hello;
	struct fr_dns_answer dns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, union record_scratch);
} record_scratch SEC(".maps");

/* With TLS capture on: a TCP connect is remembered; the first send on it
 * that starts with a TLS ClientHello is recorded (fr_tls_hello), so a TLS
 * connection whose library no probe covers is on the record all the same.
 * One map lookup per send; only a connection's first send is read. A
 * global function, as emit_with_data: checked once, not in every state
 * fr_sys_exit ends in. Returns 0. */
__noinline int note_tls_hello(struct fr_task_state *st, __s64 ret)
{
	if (!st)  /* the caller's never is; the verifier checks it here */
		return 0;
	__u32 nr = st->nr;
	if (nr != NR_CONNECT && nr != NR_WRITE && nr != NR_SENDTO && nr != NR_WRITEV && nr != NR_SENDMSG)
		return 0;
	/* The kernel takes the fd as an int: the upper half of the register is
	 * the caller's to fill with anything. */
	__s32 fd = (__s32)st->args[0];
	struct conn_key key = { .tgid = bpf_get_current_pid_tgid() >> 32, .fd = fd };
	struct task_struct *task = bpf_get_current_task_btf();
	if (nr == NR_CONNECT) {
		if ((ret == 0 || ret == -FR_EINPROGRESS) && tcp_socket(task, fd)) {
			__u8 one = 1;
			bpf_map_update_elem(&fresh_conns, &key, &one, BPF_ANY);
		}
		return 0;
	}
	if (ret <= 0 || !bpf_map_lookup_elem(&fresh_conns, &key))
		return 0;  /* a send that sent nothing leaves the connection fresh */
	bpf_map_delete_elem(&fresh_conns, &key);
	if (!tcp_socket(task, fd))
		return 0;  /* closed unsent, and the number reused */
	/* Where the bytes were: the buffer, or the first iovec. */
	__u64 buf = (__u64)st->args[1], len = (__u64)ret;
	if (nr == NR_WRITEV || nr == NR_SENDMSG) {
		__u64 iov = buf;
		if (nr == NR_SENDMSG && bpf_probe_read_user(&iov, sizeof(iov), (void *)(buf + 16)))  /* msg_iov */
			return 0;
		__u64 first[2];  /* iov_base, iov_len */
		if (bpf_probe_read_user(first, sizeof(first), (void *)iov))
			return 0;
		buf = first[0];
		if (first[1] < len)
			len = first[1];
	}
	__u8 head[6];
	if (len < sizeof(head) || bpf_probe_read_user(head, sizeof(head), (void *)buf))
		return 0;
	/* A handshake record (22) of TLS 1.0-1.3 (legacy version 3.x) whose
	 * first message is a ClientHello (1). */
	if (head[0] != 22 || head[1] != 3 || head[2] > 4 || head[5] != 1)
		return 0;
	__u32 zero = 0;
	union record_scratch *rs = bpf_map_lookup_elem(&record_scratch, &zero);
	if (!rs)
		return 0;
	struct fr_tls_hello *r = &rs->hello;
	__u32 n = len < FR_TLS_HELLO_MAX ? (__u32)len : FR_TLS_HELLO_MAX - 1;
	barrier_var(n);
	n &= FR_TLS_HELLO_MAX - 1;
	if (bpf_probe_read_user(r->data, n, (void *)buf) != 0)
		n = 0;
	/* Only the bytes read go out: no earlier hello's after them. */
	__u32 size = FR_TLS_HELLO_HEAD + n;
	fr_fill_header(&r->h, FR_REC_TLS_HELLO, size, st->session);
	r->fd = fd;
	r->len = n;
	r->sent = (__u32)ret;
	/* Inside a probed call (a handshake, or a write that starts one), or
	 * from a process that made one: a library whose plaintext is captured. */
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	r->flags = (bpf_map_lookup_elem(&fr_tls_calls, &tid) ? FR_HELLO_IN_PROBED_CALL : 0) |
		   (fr_leader_tls_probed(0) ? FR_HELLO_PROBED_PROGRAM : 0);
	fr_output(r, size);
	return 0;
}

/* A recvfrom or recvmsg that returned a datagram from port 53: recorded
 * (fr_dns_answer), so the names the process looks up by its own resolver
 * are on the record and its connects carry them. One read of the source
 * address per such call. A global function, as note_tls_hello. Returns 0. */
__noinline int note_dns_answer(struct fr_task_state *st, __s64 ret)
{
	if (!st || ret < 12)  /* a DNS header is 12 bytes */
		return 0;
	__u64 buf = (__u64)st->args[1], from = (__u64)st->args[4], len = (__u64)ret;
	if (st->nr == NR_RECVMSG) {
		__u64 m[3];  /* msg_name, msg_namelen (and padding), msg_iov */
		__u64 first[2];  /* iov_base, iov_len */
		if (bpf_probe_read_user(m, sizeof(m), (void *)buf) || bpf_probe_read_user(first, sizeof(first), (void *)m[2]))
			return 0;
		from = m[0];
		buf = first[0];
		if (first[1] < len)
			len = first[1];
	} else if (st->nr != NR_RECVFROM) {
		return 0;
	}
	__u16 sa[2];  /* family, port (network order) */
	if (!from || bpf_probe_read_user(sa, sizeof(sa), (void *)from) || sa[1] != bpf_htons(53) ||
	    (sa[0] != FR_AF_INET && sa[0] != FR_AF_INET6))
		return 0;
	__u32 zero = 0;
	union record_scratch *rs = bpf_map_lookup_elem(&record_scratch, &zero);
	if (!rs)
		return 0;
	struct fr_dns_answer *r = &rs->dns;
	__builtin_memset(r->server, 0, sizeof(r->server));
	if (bpf_probe_read_user(r->server, sa[0] == FR_AF_INET ? 4 : 16, (void *)(from + (sa[0] == FR_AF_INET ? 4 : 8))))
		return 0;
	__u32 n = len < FR_DNS_ANSWER_MAX ? (__u32)len : FR_DNS_ANSWER_MAX - 1;
	barrier_var(n);
	n &= FR_DNS_ANSWER_MAX - 1;
	if (bpf_probe_read_user(r->data, n, (void *)buf) != 0)
		return 0;
	__u32 size = FR_DNS_ANSWER_HEAD + n;
	fr_fill_header(&r->h, FR_REC_DNS_ANSWER, size, st->session);
	r->fd = (__s32)st->args[0];
	r->len = n;
	r->received = (__u32)ret;
	r->family = sa[0];
	r->port = 53;
	fr_output(r, size);
	return 0;
}

static __always_inline bool is_open(__u32 nr)
{
	return nr == NR_OPEN || nr == NR_CREAT || nr == NR_OPENAT || nr == NR_OPENAT2;
}

/* A global function: the verifier checks it once per program, on its
 * own, instead of once for every state the caller reaches it in (its
 * optional pieces multiplied the caller's paths: most of sys_exit's load
 * time). Its pointers arrive as plain memory of their types' sizes. */
__noinline int emit_with_data(struct fr_task_state *st, struct fr_syscall_spec *spec, __s64 ret, __u32 blocked,
			      __u32 ppid)
{
	__u32 zero = 0;
	struct sys_scratch *s = bpf_map_lookup_elem(&sys_scratch_map, &zero);
	if (!s || !st || !spec)  /* the callers' are never NULL; the verifier checks it here */
		return 0;
	struct fr_syscall *r = (struct fr_syscall *)s->buf;
	struct fr_syscall_data *d = (struct fr_syscall_data *)(s->buf + sizeof(*r));
	char *strings = (char *)s->buf + sizeof(*r) + sizeof(*d);
	__u32 flags = FR_SC_HAS_DATA | blocked;
	__u32 len0 = 0, len1 = 0, salen = 0;

	if (st->exec_path_len) {
		/* A successful exec replaced the memory the path was in; the
		 * kernel's copy of the filename was kept at sched_process_exec. */
		len0 = st->exec_path_len & STR_MASK;
		bpf_probe_read_kernel(strings, len0, st->exec_path);
		flags |= FR_SC_EXEC_PATH | st->exec_flags;
		st->exec_path_len = 0;
		st->exec_flags = 0;
	} else if (spec->str_arg[0] < 6) {
		len0 = read_str(strings, st->args[spec->str_arg[0] & 7], &flags,
				FR_SC_STR0_TRUNC, FR_SC_STR0_FAULT);
	}
	if (spec->str_arg[1] < 6 && !(flags & FR_SC_EXEC_PATH))
		len1 = read_str(strings + (len0 & STR_MASK), st->args[spec->str_arg[1] & 7],
				&flags, FR_SC_STR1_TRUNC, FR_SC_STR1_FAULT);
	if (spec->sockaddr_mode != FR_SA_NONE)
		salen = read_sockaddr(d->sockaddr, spec, st, ret, &flags);
	if (spec->sockaddr_mode != FR_SA_NONE && !blocked) {
		__u32 kalen = kernel_sockaddr(st, ret, d);
		if (kalen) {
			salen = kalen;
			flags = (flags & ~(FR_SC_SOCKADDR_UNREAD | FR_SC_SOCKADDR_FAULT)) | FR_SC_KADDR;
		}
	}
	__u32 klen = 0;
	if (is_open(st->nr) && ret >= 0 && !blocked) {
		__u32 start = kernel_path(bpf_get_current_task_btf(), ret, s, &flags);
		klen = (FR_STR_MAX - start) & STR_MASK;
		if (klen)
			bpf_probe_read_kernel(strings + (((len0 & STR_MASK) + (len1 & STR_MASK)) & (2 * FR_STR_MAX - 1)),
					      klen, s->kpath + (start & STR_MASK));
	}

	__u32 size = sizeof(*r) + sizeof(*d) + (len0 & STR_MASK) + (len1 & STR_MASK) + klen;
	fill_syscall(r, bpf_get_current_task_btf(), ppid, st, size, ret, flags);
	r->str_len[0] = len0;
	r->str_len[1] = len1;
	r->sockaddr_len = salen;
	r->kpath_len = klen;
	if (size > sizeof(s->buf))
		return 0;
	fr_output(r, size);
	return 0;
}

/* The call's number, arguments (still in the registers) and start time
 * (0 at sys_exit alone: there is none to be had). */
static __always_inline void save_call(struct fr_task_state *st, struct pt_regs *regs, long id, __u64 enter_ns)
{
	st->enter_ns = enter_ns;
	st->nr = (__u32)id;
	st->args[0] = regs->di;
	st->args[1] = regs->si;
	st->args[2] = regs->dx;
	st->args[3] = regs->r10;
	st->args[4] = regs->r8;
	st->args[5] = regs->r9;
}

/* A new call: no exec path kept for it yet (sched_process_exec keeps one). */
static __always_inline void forget_exec(struct fr_task_state *st)
{
	st->exec_path_len = 0;
	st->exec_flags = 0;
}

/* Inside SSL_read/SSL_write, the first socket read or write names the
 * connection's fd (tls.bpf.c). An AEAD open's connection is the last read
 * before it; a seal's the first socket write after it. */
static __always_inline void note_tls_fd(struct fr_task_state *st, long id, __u64 fd, __u64 arg2, __u64 arg3)
{
	if (id != 0 && id != 1 && id != 19 && id != 20 && (id < 44 || id > 47))
		return;  /* read, write, readv, writev, sendto, recvfrom, sendmsg, recvmsg */
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct fr_tls_call *call = bpf_map_lookup_elem(&fr_tls_calls, &tid);
	if (call && call->fd < 0)
		call->fd = (__s32)fd;
	if (id == 0 || id == 19 || id == 45 || id == 47) {
		st->tls_recv_fd = (__s32)fd;
		st->tls_recv_buf = id == 0 || id == 45 ? arg2 : 0;
		st->tls_recv_len = arg3 > 0xffffffffULL ? 0xffffffff : (__u32)arg3;
	} else {
		fr_aead_bind(id, (__s64)(__s32)fd, arg2, st->session);
	}
}

/* The task's state, made on its first syscall in a session (*made says
 * so); NULL for a task no session records. */
static __always_inline struct fr_task_state *session_task(struct task_struct *task, bool *made)
{
	*made = false;
	/* Read before the walk: a session opened during it bumps the
	 * generation, so a verdict it missed is not kept as current. */
	__u32 generation = fr_session_gen;
	barrier();
	/* The outside mark first: every other task on the host pays one
	 * lookup per call while a session runs, a recorded task two (~12 ns
	 * more for it, ~12 ns less for each of the others, the other way). */
	__u32 *outside = bpf_task_storage_get(&fr_outside, task, 0, 0);
	if (outside && *outside == generation)
		return NULL;
	struct fr_task_state *st = bpf_task_storage_get(&fr_tasks, task, 0, 0);

	if (st) {
		if (fr_session_open(st->session))
			return st;
		/* Its session is over: the task is let go (and may be in another). */
		bpf_task_storage_delete(&fr_tasks, task);
	}
	__u32 session = fr_task_session(task);
	if (!session) {
		outside = bpf_task_storage_get(&fr_outside, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (outside)
			*outside = generation;
		return NULL;
	}
	st = bpf_task_storage_get(&fr_tasks, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st) {
		fr_count_drop(session);
		return NULL;
	}
	*made = !st->session;
	fr_join_session(st, session);
	return st;
}

/* accept, recvfrom, getsockname, getpeername, accept4: *addrlen is the
 * buffer size on entry and the address size on exit. */
static __always_inline bool returns_sockaddr(long id)
{
	return id == 43 || id == 45 || id == 51 || id == 52 || id == 288;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(fr_sys_enter, struct pt_regs *regs, long id)
{
	struct task_struct *task = bpf_get_current_task_btf();
	bool made;
	struct fr_task_state *st = session_task(task, &made);

	if (!st || !fr_session_entry(st->session))
		return 0;
	/* Also at the call's entry: threads sharing its fs_struct see a new
	 * umask or root before it returns. */
	if (fr_view_gen_on && fr_changes_view(id))
		fr_bump_view_gen();
	save_call(st, regs, id, bpf_ktime_get_ns());
	forget_exec(st);
	if (fr_tls_enabled)
		note_tls_fd(st, id, regs->di, regs->si, regs->dx);
	if (id == NR_EXIT || id == NR_EXIT_GROUP) {
		/* These never reach sys_exit. */
		st->active = 0;
		emit_plain(task, fr_parent_tgid(task), st, 0, FR_SC_NORETURN);
		return 0;
	}
	st->sa_buf_len = 0;
	if (returns_sockaddr(id)) {
		__u64 len_ptr = id == 45 ? regs->r9 : regs->dx;
		__u32 buf_len = 0;
		if (len_ptr && !bpf_probe_read_user(&buf_len, sizeof(buf_len), (const void *)len_ptr))
			st->sa_buf_len = buf_len;
	}
	st->active = 1;
	return 0;
}

/* The number of the call the kernel ran: the low 32 bits of orig_ax,
 * sign-extended, as entry_SYSCALL_64 dispatches it (syscall_get_nr); the
 * upper half of rax is the caller's to fill with anything. */
static __always_inline long syscall_nr(struct pt_regs *regs)
{
	return (long)(int)regs->orig_ax;
}

/* A call complete at its return, read from the registers (which still
 * hold its number and arguments): no entry time. rt_sigreturn restores
 * orig_ax to -1 (no syscall to restart). */
static __always_inline void read_call_at_exit(struct fr_task_state *st, struct pt_regs *regs, long nr)
{
	save_call(st, regs, nr, 0);
	if (st->nr != NR_EXECVE && st->nr != NR_EXECVEAT)
		forget_exec(st);  /* only an exec's own return uses a kept path */
	if (fr_tls_enabled)
		note_tls_fd(st, st->nr, regs->di, regs->si, regs->dx);
	st->sa_buf_len = 0;
}

/* The record of the call st holds, returning ret; ppid is the task's
 * parent's, read where the program has few paths (fr_parent_tgid). */
static __always_inline void record_return(struct task_struct *task, __u32 ppid, struct fr_task_state *st, __s64 ret,
					  __u32 blocked)
{
	__u32 nr = st->nr;
	struct fr_syscall_spec *spec = bpf_map_lookup_elem(&fr_syscall_specs, &nr);
	bool wants_data = spec && (spec->str_arg[0] < 6 || spec->str_arg[1] < 6 ||
				   spec->sockaddr_mode != FR_SA_NONE);
	if (st->exec_path_len && (nr == NR_EXECVE || nr == NR_EXECVEAT))
		wants_data = true;
	if (!wants_data) {
		emit_plain(task, ppid, st, ret, blocked);
		return;
	}
	struct fr_syscall_spec none = {
		.str_arg = { FR_ARG_NONE, FR_ARG_NONE },
		.sockaddr_arg = FR_ARG_NONE,
		.sockaddr_len_arg = FR_ARG_NONE,
	};
	emit_with_data(st, spec ? spec : &none, ret, blocked, ppid);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(fr_sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	bool made;
	struct fr_task_state *st = session_task(task, &made);

	/* A recorded task's only (the supervisor's own set*id calls would undo
	 * what it just read), also one whose state could not be made. */
	if (fr_view_gen_on && fr_changes_view(syscall_nr(regs)) && (st || fr_task_session(task)))
		fr_bump_view_gen();
	if (!st || fr_session_lite(st->session))
		return 0;
	__u32 ppid = fr_parent_tgid(task);
	__u32 blocked = 0;
	if (!st->active && st->fork_return) {
		st->fork_return = 0;  /* fork returning in the new task */
		return 0;
	}
	st->fork_return = 0;
	long nr = syscall_nr(regs);
	if (made && ret == 0 && (nr == NR_CLONE || nr == NR_CLONE3 || nr == NR_FORK || nr == NR_VFORK))
		return 0;  /* its fork returning in it (cloned straight into the cgroup), as for any child */
	if (made || !fr_session_entry(st->session)) {
		/* Every call is complete here, read from the registers: in a
		 * session without sys_enter, or the first call of a task whose
		 * state this made (it began before anything saw the task). One
		 * that seccomp stopped cannot be told from one that failed (so
		 * run refuses reading at the return alone for a sandbox with a
		 * seccomp filter). */
		read_call_at_exit(st, regs, syscall_nr(regs) < 0 ? NR_RT_SIGRETURN : syscall_nr(regs));
	} else if (!st->active) {
		/* A syscall that reaches sys_exit without sys_enter was stopped
		 * before it ran: seccomp (or a ptrace tracer) skipped it. Its
		 * arguments are still in the registers. A task with no storage
		 * (one in a syscall when we attached) is not counted; new tasks
		 * get storage at fork (process.bpf.c). */
		blocked = FR_SC_BLOCKED;
		save_call(st, regs, syscall_nr(regs), bpf_ktime_get_ns());
		forget_exec(st);
		st->sa_buf_len = 0;
	}
	st->active = 0;
	if (fr_changes_ids(task, st->nr))
		st->ids_valid = 0;  /* its record shows the ids it returned with */
	record_return(task, ppid, st, ret, blocked);
	if (fr_tls_enabled && !blocked)
		note_tls_hello(st, ret);
	if ((st->nr == NR_RECVFROM || st->nr == NR_RECVMSG) && ret >= 12 && !blocked)
		note_dns_answer(st, ret);
	return 0;
}

/* Lite sessions: the calls fr_lite_calls names, each at its own
 * syscalls:sys_exit_NAME tracepoint (userspace attaches this program to
 * every one of them), so no BPF program runs on any other syscall of any
 * task. The tracepoint's record (its format file): */
struct syscall_exit_args {
	__u64 common;
	__s32 nr;
	__s32 pad;
	__s64 ret;
};

/* Calls of the session's tasks, per cgroup and syscall. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, FR_LITE_COUNT_KEYS);
	__type(key, struct fr_lite_count_key);
	__type(value, __u64);
} fr_lite_counts SEC(".maps");

/* Calls fr_lite_counts had no room for, per session slot. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FR_MAX_SESSIONS);
	__type(key, __u32);
	__type(value, __u64);
} fr_lite_uncounted SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FR_SYSCALL_TABLE_SIZE);
	__type(key, __u32);
	__type(value, __u32);  /* enum fr_lite_kind */
} fr_lite_calls SEC(".maps");

static __always_inline void count_call(__u32 session, __u32 nr)
{
	struct fr_lite_count_key key = {
		.cgroup_id = bpf_get_current_cgroup_id(), .session = session, .nr = nr,
	};
	__u64 one = 1;
	/* Per-CPU values, and these programs never nest on one CPU. */
	__u64 *n = bpf_map_lookup_elem(&fr_lite_counts, &key);
	if (n) {
		*n += 1;
		return;
	}
	if (bpf_map_update_elem(&fr_lite_counts, &key, &one, BPF_NOEXIST) == 0)
		return;
	n = bpf_map_lookup_elem(&fr_lite_counts, &key);  /* made meanwhile on another CPU */
	if (n) {
		*n += 1;
		return;
	}
	__u32 slot = session % FR_MAX_SESSIONS;
	n = bpf_map_lookup_elem(&fr_lite_uncounted, &slot);
	if (n)
		*n += 1;
}

#define FR_O_ACCMODE 03

#define FR_PROC_SUPER_MAGIC 0x9fa0

/* A process's memory through procfs (/proc/PID/mem), which reading
 * already makes a ptrace-like act. */
static __always_inline bool proc_mem(struct file *f)
{
	char name[4] = {};
	if (BPF_CORE_READ(f, f_path.dentry, d_sb, s_magic) != FR_PROC_SUPER_MAGIC)
		return false;
	bpf_probe_read_kernel(name, sizeof(name), BPF_CORE_READ(f, f_path.dentry, d_name.name));
	return name[0] == 'm' && name[1] == 'e' && name[2] == 'm' && name[3] == 0;
}

/* Whether lite records an open (st's call, returning ret): one that
 * opened a file for writing or a process's memory, or asked to write,
 * create or truncate. The file's own mode where the open succeeded: the
 * kernel's, not memory another thread can change. (openat2, whose flags
 * are such memory, is always recorded.) */
static __always_inline bool open_recorded(struct fr_task_state *st, struct task_struct *task, __s64 ret)
{
	if (ret >= 0) {
		struct file *f = (struct file *)fr_fd_file(ret);
		if (f && ((BPF_CORE_READ(f, f_mode) & FR_FMODE_WRITE) || proc_mem(f)))
			return true;
	}
	__s64 flags = st->nr == NR_OPEN ? st->args[1] : st->args[2];  /* open, openat: registers */
	return (flags & FR_O_ACCMODE) || (flags & (FR_O_CREAT | FR_O_TRUNC));
}

/* prctl options that change privileges, who may trace or dump the
 * process, or its seccomp filter: recorded (the rest are only counted). */
static __always_inline bool prctl_recorded(__s64 option)
{
	switch (option) {
	case 4:           /* PR_SET_DUMPABLE */
	case 8:           /* PR_SET_KEEPCAPS */
	case 22:          /* PR_SET_SECCOMP */
	case 24:          /* PR_CAPBSET_DROP */
	case 28:          /* PR_SET_SECUREBITS */
	case 35:          /* PR_SET_MM */
	case 38:          /* PR_SET_NO_NEW_PRIVS */
	case 47:          /* PR_CAP_AMBIENT */
	case 0x59616d61:  /* PR_SET_PTRACER */
		return true;
	}
	return false;
}

SEC("tracepoint")
int fr_lite_exit(struct syscall_exit_args *ctx)
{
	__u32 nr = (__u32)ctx->nr;
	/* Each attachment's cookie is the number of the call userspace meant
	 * it for: a tracepoint id that named another call is ignored, not
	 * recorded under a wrong name. */
	if (bpf_get_attach_cookie(ctx) != nr)
		return 0;
	__u32 *kind = bpf_map_lookup_elem(&fr_lite_calls, &nr);
	if (!kind || *kind == FR_LITE_NONE)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	bool made;
	struct fr_task_state *st = session_task(task, &made);
	if (!st || !fr_session_lite(st->session))
		return 0;
	__u32 ppid = fr_parent_tgid(task);
	count_call(st->session, nr);
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return 0;
	/* Lite sees no fork returns (clone is no lite call). */
	st->fork_return = 0;
	st->active = 0;
	read_call_at_exit(st, regs, nr);
	if (*kind == FR_LITE_EXEC) {
		/* A success is the exec record; a failure kept no path (one kept
		 * earlier, by an exec whose return went unseen, is not its). */
		forget_exec(st);
		if (ctx->ret == 0)
			return 0;
	}
	if (*kind == FR_LITE_OPEN && !open_recorded(st, task, ctx->ret))
		return 0;
	if (*kind == FR_LITE_PRCTL && !prctl_recorded(st->args[0]))
		return 0;
	record_return(task, ppid, st, ctx->ret, 0);
	return 0;
}
