/* BPF-LSM hooks, loaded only where the kernel allows them (userspace
 * probes first; this host refuses them with EPERM). They see what the
 * kernel itself resolved: the opened file's path (bpf_d_path), the exec'd
 * file, the connect address after it was copied in - no time-of-check /
 * time-of-use gap as with syscall arguments read from user memory.
 * file_open also enforces the session's path rules, compiled from the
 * policy into two tries: hidden paths may not be opened, and files opened
 * for exec must lie on the exec allowlist. A refusal is -EPERM and a record
 * naming the rule; processes outside the session are never affected.
 * socket_connect enforces the egress allowlist, unix_stream_connect and
 * unix_may_send keep the host out of the session's UNIX sockets. The other
 * hooks audit. */
#include "lib/common.bpf.h"
#include <bpf/bpf_endian.h>

#define PATH_MASK (FR_STR_MAX - 1)

struct lsm_scratch {
	__u8 buf[sizeof(struct fr_lsm) + FR_STR_MAX];  /* the record; lsm_record() */
	struct fr_path_key key;                        /* a trie lookup */
	struct fr_exec_ticket ticket;                  /* an exec grant's lookup */
};

/* Runtime exec grants (include/flightrec/abi/events.h), made and filled by
 * the session's grant supervisor. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, FR_EXEC_TICKETS_MAX);
	__type(key, struct fr_exec_ticket);
	__type(value, __u64);
} fr_exec_tickets SEC(".maps");

#define FR_OVERLAYFS_MAGIC 0x794c7630

/* __FMODE_EXEC in f_flags: the open of a file to execute it (execve, the
 * ELF interpreter, a script's interpreter), as Landlock tells it too. */
#define FR_FMODE_EXEC 0x20

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lsm_scratch);
} lsm_scratch_map SEC(".maps");

/* Scratch for one record of `session`'s. */
static __always_inline struct fr_lsm *lsm_record(__u32 hook, __u32 session)
{
	__u32 zero = 0;
	struct lsm_scratch *s = bpf_map_lookup_elem(&lsm_scratch_map, &zero);
	if (!s)
		return 0;
	struct fr_lsm *r = (struct fr_lsm *)s->buf;
	r->h.session = session;
	r->hook = hook;
	r->flags = 0;
	r->path_len = 0;
	r->sockaddr_len = 0;
	r->denied_by = 0;
	r->target = 0;
	r->pad = 0;
	return r;
}

static __always_inline void lsm_emit(struct fr_lsm *r)
{
	__u32 size = sizeof(*r) + (r->path_len & PATH_MASK);
	fr_fill_header(&r->h, FR_REC_LSM, size, r->h.session);
	if (size <= sizeof(struct lsm_scratch))
		fr_output(r, size);
}

/* The rule of a path trie that covers r's path (len bytes): its number, or
 * 0 (no rule, or an exception such as the work directory under a hidden
 * path: the longest match wins). The key is the path plus "/", cut at FR_PATH_RULE_MAX bytes: a rule is
 * at most that long with its own "/", so the cut never hides a match. */
static __always_inline __u32 path_rule(void *trie, struct fr_lsm *r, __u32 len)
{
	struct fr_path_key *key = &((struct lsm_scratch *)r)->key;
	if (bpf_probe_read_kernel(key->data, FR_PATH_RULE_MAX, r->path))
		return 0;
	if (len < FR_PATH_RULE_MAX) {
		key->data[len & (FR_PATH_RULE_MAX - 1)] = '/';
		len += 1;
	} else {
		len = FR_PATH_RULE_MAX;
	}
	key->prefixlen = len * 8;
	__u32 *rule = bpf_map_lookup_elem(trie, key);
	return rule ? *rule : 0;
}

/* Takes the current thread's exec ticket for r's path (len bytes), if it
 * has one in time: the grant supervisor's yes to this very file. One exec
 * opens a file on overlayfs twice before Linux 6.6: the overlay file, then
 * the real one behind it under the overlay's path (open_with_fake_path),
 * so there the overlay's open only looks and the real one's takes. From
 * 6.6 the real file is a backing file, whose open is not judged
 * (backing_open): the overlay's open takes. */
static __always_inline bool exec_ticket(struct fr_lsm *r, __u32 len, struct file *file)
{
	if (len == 0 || len >= FR_PATH_RULE_MAX)
		return false;
	struct fr_exec_ticket *t = &((struct lsm_scratch *)r)->ticket;
	__builtin_memset(t, 0, sizeof(*t));
	t->tid = (__u32)bpf_get_current_pid_tgid();
	t->len = len;
	barrier_var(len);  /* keep the mask below: the verifier needs it to bound the read */
	if (bpf_probe_read_kernel(t->path, len & (FR_PATH_RULE_MAX - 1), r->path))
		return false;
	__u64 *deadline = bpf_map_lookup_elem(&fr_exec_tickets, t);
	if (!deadline)
		return false;
	bool in_time = bpf_ktime_get_ns() < *deadline;
	bool overlay = BPF_CORE_READ(file, f_inode, i_sb, s_magic) == FR_OVERLAYFS_MAGIC;
	if (overlay && !bpf_core_type_exists(struct backing_file))
		return in_time;
	return bpf_map_delete_elem(&fr_exec_tickets, t) == 0 && in_time;
}

/* 0: the open may go on; else why not (denied_by). n is bpf_d_path's result. */
static __always_inline __u32 open_verdict(struct fr_lsm *r, long n, bool exec, struct file *file)
{
	bool check_exec = exec && fr_exec_rules;
	if (!check_exec && !fr_hidden_rules)
		return 0;
	if (n <= 0)  /* no path (longer than PATH_MAX): an exec cannot be shown allowed */
		return check_exec ? FR_DENY_EXEC : 0;
	__u32 len = (__u32)(n - 1);
	if (check_exec && !path_rule(&fr_exec_paths, r, len) && !exec_ticket(r, len, file))
		return FR_DENY_EXEC;
	if (!fr_hidden_rules)
		return 0;
	/* A file replaced since it was opened (by an O_PATH fd, reopened
	 * through /proc/self/fd) is named "PATH (deleted)": judged as PATH.
	 * Only for hidden paths, where it can only refuse more. */
	const char deleted[] = " (deleted)";
	if (len > sizeof(deleted) - 1) {
		bool suffix = true;
		for (__u32 i = 0; i < sizeof(deleted) - 1; i++)
			suffix = suffix && r->path[(len - (sizeof(deleted) - 1) + i) & PATH_MASK] == deleted[i];
		if (suffix)
			len -= sizeof(deleted) - 1;
	}
	return path_rule(&fr_hidden_paths, r, len);
}

/* overlayfs opens the real file behind an overlay file itself (6.6+: a
 * backing file): on a private clone of a layer's mount, which no mount
 * namespace holds, under the mounter's credentials. Its path is relative
 * to the layer, not what the process opened, and the process's own open of
 * the overlay file was checked already. Both conditions: a memfd (internal
 * mount) opened on the caller's own credentials is still checked, and so
 * is an open under borrowed credentials (io_uring personalities) of a file
 * in a namespace. */
static __always_inline bool backing_open(struct file *file, struct task_struct *task)
{
	struct vfsmount *vfs = BPF_CORE_READ(file, f_path.mnt);
	struct mount *m = (struct mount *)((char *)vfs - bpf_core_field_offset(struct mount, mnt));
	/* MNT_NS_INTERNAL (ERR_PTR(-EINVAL)) marks clone_private_mount's clones
	 * (and kern_mount's); a lazily detached mount (NULL) is still checked. */
	bool internal = (unsigned long)BPF_CORE_READ(m, mnt_ns) == (unsigned long)-22;
	return internal && BPF_CORE_READ(task, cred) != BPF_CORE_READ(task, real_cred);
}

SEC("lsm/file_open")  /* bpf_d_path is allowed: file_open is a sleepable-capable hook */
int BPF_PROG(fr_lsm_file_open, struct file *file, int ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 session = ret ? 0 : fr_task_session(task);
	if (!session || backing_open(file, task))
		return ret;
	/* A lite session's reads are counted at their syscall, not recorded
	 * (O_CREAT and O_TRUNC are still in f_flags here: cleared after). */
	if (fr_session_lite(session) && !fr_hidden_rules && !fr_exec_rules &&
	    !(file->f_mode & FR_FMODE_WRITE) && !(file->f_flags & (FR_FMODE_EXEC | FR_O_CREAT | FR_O_TRUNC)))
		return ret;
	struct fr_lsm *r = lsm_record(FR_LSM_FILE_OPEN, session);
	if (!r)
		return ret;
	long n = bpf_d_path((struct path *)&file->f_path, r->path, FR_STR_MAX);
	r->path_len = n > 0 ? (__u16)((n - 1) & PATH_MASK) : 0;
	r->flags = file->f_flags;
	r->denied_by = open_verdict(r, n, r->flags & FR_FMODE_EXEC, file);
	lsm_emit(r);
	return r->denied_by ? -1 /* -EPERM */ : ret;
}

/* Path rules hold only while the session's files keep their paths. While
 * they are enforced, the session may not create a user namespace (inside
 * one an unprivileged process may mount), mount, or chroot. Fails closed. */
static __always_inline int refuse_new_view(__u32 hook, int ret)
{
	if (ret || !(fr_hidden_rules || fr_exec_rules))
		return ret;
	__u32 session = fr_task_session(bpf_get_current_task_btf());
	if (!session)
		return ret;
	struct fr_lsm *r = lsm_record(hook, session);
	if (r) {
		r->denied_by = FR_DENY_VIEW;
		lsm_emit(r);
	}
	return -1;  /* -EPERM */
}

SEC("lsm/userns_create")
int BPF_PROG(fr_lsm_userns_create, const struct cred *cred, int ret)
{
	return refuse_new_view(FR_LSM_USERNS_CREATE, ret);
}

SEC("lsm/sb_mount")
int BPF_PROG(fr_lsm_sb_mount, const char *dev_name, const struct path *path, const char *type,
	     unsigned long flags, void *data, int ret)
{
	return refuse_new_view(FR_LSM_SB_MOUNT, ret);
}

SEC("lsm/move_mount")
int BPF_PROG(fr_lsm_move_mount, const struct path *from_path, const struct path *to_path, int ret)
{
	return refuse_new_view(FR_LSM_MOVE_MOUNT, ret);
}

SEC("lsm/path_chroot")
int BPF_PROG(fr_lsm_path_chroot, const struct path *path, int ret)
{
	return refuse_new_view(FR_LSM_PATH_CHROOT, ret);
}

SEC("lsm/bprm_check_security")
int BPF_PROG(fr_lsm_bprm_check, struct linux_binprm *bprm, int ret)
{
	__u32 session = ret ? 0 : fr_task_session(bpf_get_current_task_btf());
	if (!session)
		return ret;
	struct fr_lsm *r = lsm_record(FR_LSM_BPRM_CHECK, session);
	if (!r)
		return ret;
	long n = bpf_probe_read_kernel_str(r->path, FR_STR_MAX, BPF_CORE_READ(bprm, filename));
	r->path_len = n > 0 ? (__u16)((n - 1) & PATH_MASK) : 0;
	lsm_emit(r);
	return ret;
}

SEC("lsm/socket_connect")
int BPF_PROG(fr_lsm_socket_connect, struct socket *sock, struct sockaddr *address, int addrlen, int ret)
{
	__u32 session = ret ? 0 : fr_task_session(bpf_get_current_task_btf());
	if (!session)
		return ret;
	struct fr_lsm *r = lsm_record(FR_LSM_SOCKET_CONNECT, session);
	if (!r)
		return ret;
	/* The kernel copied the address into a sockaddr_storage (128 bytes):
	 * read all of it, keep addrlen of it. */
	__u32 len = addrlen > 0 ? (__u32)addrlen : 0;
	if (len > FR_SOCKADDR_MAX)
		len = FR_SOCKADDR_MAX;
	if (len && bpf_probe_read_kernel(r->sockaddr, FR_SOCKADDR_MAX, address) == 0)
		r->sockaddr_len = len;
	/* The egress allowlist, decided on the kernel's copy of the address
	 * (the cgroup connect programs enforce it too, and alone where this
	 * hook does not load). */
	if (fr_egress_lsm && r->sockaddr_len >= 8) {
		__u16 family = *(__u16 *)r->sockaddr;
		__u16 port = bpf_ntohs(*(__u16 *)(r->sockaddr + 2));
		__u8 addr[16] = {};
		int inet = family == 2, inet6 = family == 10 && r->sockaddr_len >= 24;
		if (inet)
			__builtin_memcpy(addr, r->sockaddr + 4, 4);
		if (inet6)
			__builtin_memcpy(addr, r->sockaddr + 8, 16);
		/* A granted connect's ticket is left for the cgroup program, which runs next and takes it. */
		if ((inet || inet6) && !fr_egress_allowed(family, addr, port) && !fr_egress_named_ok(family, addr, port, 1) &&
		    !fr_egress_ticket(family, addr, port, 0)) {
			r->denied_by = FR_DENY_EGRESS;
			lsm_emit(r);
			return -1;  /* -EPERM */
		}
	}
	lsm_emit(r);
	return ret;
}

/* UNIX sockets made by a confined session that shares the host's network
 * namespace (an allowlist): an abstract name it binds is the host's too.
 * Marked at creation; no task outside the session may connect or send to
 * them (inbound, like the cgroup_skb filter for IP). */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);  /* the session that made it */
} fr_session_unix SEC(".maps");

#define FR_AF_UNIX 1

SEC("lsm/socket_post_create")
int BPF_PROG(fr_lsm_socket_post_create, struct socket *sock, int family, int type, int protocol, int kern,
	     int ret)
{
	if (ret || !fr_egress_lsm || family != FR_AF_UNIX)
		return ret;
	__u32 session = fr_task_session(bpf_get_current_task_btf());
	struct sock *sk = sock->sk;
	if (!session || !sk)
		return ret;
	__u32 *owner = bpf_sk_storage_get(&fr_session_unix, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (owner)
		*owner = session;
	return ret;
}

/* 0, or -EPERM and a record (in the socket's session) when a task outside
 * the session reaches `other`, a socket of the session; a task of another
 * session is outside it too. */
static __always_inline int unix_inbound(struct sock *other, __u32 kind, int ret)
{
	if (ret || !fr_egress_lsm || !other)
		return ret;
	__u32 *owner = bpf_sk_storage_get(&fr_session_unix, other, 0, 0);
	if (!owner)
		return ret;
	__u32 session = *owner;
	if (!fr_session_open(session) || fr_task_session(bpf_get_current_task_btf()) == session)
		return ret;
	struct fr_lsm *r = lsm_record(FR_LSM_UNIX_INBOUND, session);
	if (!r)
		return -1;
	r->denied_by = FR_DENY_INBOUND;
	r->target = kind;
	r->sockaddr_len = (__u16)fr_unix_name(other, r->sockaddr);
	lsm_emit(r);
	return -1;  /* -EPERM */
}

SEC("lsm/unix_stream_connect")
int BPF_PROG(fr_lsm_unix_stream_connect, struct sock *sock, struct sock *other, struct sock *newsk, int ret)
{
	return unix_inbound(other, 1, ret);
}

SEC("lsm/unix_may_send")
int BPF_PROG(fr_lsm_unix_may_send, struct socket *sock, struct socket *other, int ret)
{
	return unix_inbound(other->sk, 2, ret);
}

SEC("lsm/task_kill")
int BPF_PROG(fr_lsm_task_kill, struct task_struct *p, struct kernel_siginfo *info, int sig,
	     const struct cred *cred, int ret)
{
	__u32 session = ret ? 0 : fr_task_session(bpf_get_current_task_btf());
	if (!session)
		return ret;
	struct fr_lsm *r = lsm_record(FR_LSM_TASK_KILL, session);
	if (!r)
		return ret;
	r->flags = (__u32)sig;
	r->target = BPF_CORE_READ(p, tgid);
	lsm_emit(r);
	return ret;
}

SEC("lsm/bpf")
int BPF_PROG(fr_lsm_bpf, int cmd, union bpf_attr *attr, unsigned int size, int ret)
{
	__u32 session = ret ? 0 : fr_task_session(bpf_get_current_task_btf());
	if (!session)
		return ret;
	struct fr_lsm *r = lsm_record(FR_LSM_BPF, session);
	if (!r)
		return ret;
	r->flags = (__u32)cmd;
	lsm_emit(r);
	return ret;
}

SEC("lsm/capable")
int BPF_PROG(fr_lsm_capable, const struct cred *cred, struct user_namespace *ns, int cap,
	     unsigned int opts, int ret)
{
	__u32 session = ret ? 0 : fr_task_session(bpf_get_current_task_btf());
	if (!session || fr_session_lite(session))  /* lite: too frequent (docs/LITE.md) */
		return ret;
	struct fr_lsm *r = lsm_record(FR_LSM_CAPABLE, session);
	if (!r)
		return ret;
	r->flags = (__u32)cap;
	lsm_emit(r);
	return ret;
}

/* File changes. The directory part needs bpf_d_path, which older kernels
 * (6.1) refuse in these hooks: there the program is refused alone, the
 * genesis entry lists it under capture_refused, and the syscall tracepoints
 * still record the unlink or rename (userspace loads hook by hook). */

/* dir's path, '/', the dentry's name, into buf (at most max bytes, max a
 * power of two); returns the length without the NUL. */
static __always_inline __u32 dir_and_name(char *buf, __u32 max, const struct path *dir, struct dentry *d)
{
	long n = bpf_d_path((struct path *)dir, buf, max);
	if (n <= 0)
		return 0;
	__u32 off = (__u32)(n - 1) & (max - 1);
	if (off == 1)
		off = 0;  /* the root: "/" + name */
	if (off > max - 257)
		return off;
	buf[off] = '/';
	long m = bpf_probe_read_kernel_str(buf + off + 1, 256, BPF_CORE_READ(d, d_name.name));
	return m > 0 ? off + (__u32)m : off;
}

SEC("lsm/path_unlink")
int BPF_PROG(fr_lsm_path_unlink, const struct path *dir, struct dentry *dentry, int ret)
{
	__u32 session = ret ? 0 : fr_task_session(bpf_get_current_task_btf());
	if (!session)
		return ret;
	struct fr_lsm *r = lsm_record(FR_LSM_PATH_UNLINK, session);
	if (!r)
		return ret;
	r->path_len = (__u16)dir_and_name(r->path, FR_STR_MAX, dir, dentry);
	lsm_emit(r);
	return ret;
}

SEC("lsm/path_rename")
int BPF_PROG(fr_lsm_path_rename, const struct path *old_dir, struct dentry *old_dentry,
	     const struct path *new_dir, struct dentry *new_dentry, unsigned int flags, int ret)
{
	__u32 session = ret ? 0 : fr_task_session(bpf_get_current_task_btf());
	if (!session)
		return ret;
	struct fr_lsm *r = lsm_record(FR_LSM_PATH_RENAME, session);
	if (!r)
		return ret;
	r->path_len = (__u16)dir_and_name(r->path, FR_RENAME_NEW, old_dir, old_dentry);
	r->target = dir_and_name(r->path + FR_RENAME_NEW, FR_RENAME_NEW, new_dir, new_dentry);
	r->flags = flags;
	__u32 size = sizeof(*r) + FR_RENAME_NEW + (r->target & (FR_RENAME_NEW - 1));
	fr_fill_header(&r->h, FR_REC_LSM, size, r->h.session);
	if (size <= sizeof(struct lsm_scratch))
		fr_output(r, size);
	return ret;
}

/* The hook gained a first argument (struct mnt_idmap *) in 6.3. One
 * program per signature, each reading its arguments at fixed positions;
 * the one that does not match the running kernel returns at once. */
static __always_inline int setattr(struct dentry *dentry, struct iattr *attr, int ret)
{
	__u32 session = ret ? 0 : fr_task_session(bpf_get_current_task_btf());
	if (!session)
		return ret;
	struct fr_lsm *r = lsm_record(FR_LSM_INODE_SETATTR, session);
	if (!r)
		return ret;
	long n = bpf_probe_read_kernel_str(r->path, 256, BPF_CORE_READ(dentry, d_name.name));
	r->path_len = n > 0 ? (__u16)(n - 1) : 0;
	r->flags = BPF_CORE_READ(attr, ia_valid);
	r->target = BPF_CORE_READ(attr, ia_mode);
	lsm_emit(r);
	return ret;
}

SEC("lsm/inode_setattr")
int fr_lsm_inode_setattr(unsigned long long *ctx)
{
	if (!bpf_core_type_exists(struct mnt_idmap))
		return (int)ctx[2];  /* before 6.3: fr_lsm_inode_setattr_old; pass the verdict on */
	return setattr((struct dentry *)ctx[1], (struct iattr *)ctx[2], (int)ctx[3]);
}

SEC("lsm/inode_setattr")
int fr_lsm_inode_setattr_old(unsigned long long *ctx)
{
	if (bpf_core_type_exists(struct mnt_idmap))
		return (int)ctx[3];
	return setattr((struct dentry *)ctx[0], (struct iattr *)ctx[1], (int)ctx[2]);
}
