/* The kernel <-> userspace contract: records the BPF programs write into the
 * ring buffer, and the tables userspace writes into BPF maps.
 *
 * C only, fixed-width types, no libc: included by bpf/ (with vmlinux.h) and by
 * userspace/ (with <linux/types.h>). Every struct has its size pinned by a
 * static assertion so both sides agree byte for byte; FR_ABI_VERSION changes
 * whenever any layout here does, and userspace checks it at load time. */
#ifndef FLIGHTREC_ABI_EVENTS_H
#define FLIGHTREC_ABI_EVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#ifdef __cplusplus
#define FR_STATIC_ASSERT static_assert
#else
#define FR_STATIC_ASSERT _Static_assert
#endif

#define FR_ABI_VERSION 10

#define FR_COMM_LEN 16
#define FR_MAX_SESSIONS 4096    /* sessions one capture records at once */
#define FR_SESSION_CGROUPS 65536 /* cgroups (with their descendants) all of them observe */
#define FR_CGROUP_DEPTH 32      /* levels of the cgroup tree searched for a session's cgroup */
#define FR_STR_MAX 4096         /* PATH_MAX: paths are never cut short */
#define FR_SOCKADDR_MAX 128     /* sizeof(struct sockaddr_storage) */
#define FR_ARGV_MAX 4096        /* bytes of argv in the exec record */
#define FR_ARGV_PIECES 255      /* fr_argv records after it: argv up to 1 MiB in all */
#define FR_SYSCALL_TABLE_SIZE 512

enum fr_record_type {
	FR_REC_SYSCALL = 1,
	FR_REC_EXEC = 2,
	FR_REC_FORK = 3,
	FR_REC_EXIT = 4,
	FR_REC_TLS = 5,
	FR_REC_LSM = 6,
	FR_REC_CGROUP_MOVE = 7,
	FR_REC_ARGV = 8,
	FR_REC_TLS_HELLO = 9,
	FR_REC_TLS_BIND = 10,
	FR_REC_DNS_ANSWER = 11,
};

/* Common to every record. pid is the thread-group id, tid the thread id,
 * both as seen from the initial pid namespace. */
struct fr_header {
	__u16 type;              /* enum fr_record_type */
	__u16 cpu;               /* NR_CPUS is at most 8192 */
	__u32 size;              /* bytes of the whole record */
	__u64 ts_mono_ns;        /* CLOCK_MONOTONIC when the event completed */
	__u64 cgroup_id;         /* cgroup v2 id of the task */
	__u32 pid, tid, ppid;
	__u32 uid, gid;
	__u32 session;           /* the session it belongs to (see fr_sessions), never 0 */
	char comm[FR_COMM_LEN];
};
FR_STATIC_ASSERT(sizeof(struct fr_header) == 64, "fr_header layout");

/* fr_syscall.flags */
#define FR_SC_NORETURN      (1u << 0)  /* exit/exit_group: no return value */
#define FR_SC_STR0_TRUNC    (1u << 1)
#define FR_SC_STR1_TRUNC    (1u << 2)
#define FR_SC_STR0_FAULT    (1u << 3)  /* the string could not be read */
#define FR_SC_STR1_FAULT    (1u << 4)
#define FR_SC_SOCKADDR_FAULT (1u << 5)
#define FR_SC_HAS_DATA      (1u << 6)  /* struct fr_syscall_data follows */
#define FR_SC_EXEC_PATH     (1u << 7)  /* str0 is the exec'd file (from the kernel) */
#define FR_SC_BLOCKED       (1u << 8)  /* stopped before it ran (seccomp): sys_exit without sys_enter */
#define FR_SC_KPATH         (1u << 9)  /* a successful open: the kernel's path of the file follows */
#define FR_SC_KPATH_TRUNC   (1u << 10) /* ...cut at its last FR_KPATH_DEPTH components or FR_STR_MAX bytes */
#define FR_SC_KADDR         (1u << 11) /* the sockaddr is the kernel's own, read from the socket: the peer of a
                                          * connect that succeeded or is under way, of an accepted connection and
                                          * of getpeername; the name of a bind and of getsockname (ABI 10) */
#define FR_SC_SOCKADDR_UNREAD (1u << 12) /* an address the call returned, not read: read at sys_exit alone, the
                                          * caller's buffer size (an in/out argument) is gone */

/* One syscall, entry and exit joined. */
struct fr_syscall {
	struct fr_header h;
	__u64 enter_ns;          /* CLOCK_MONOTONIC at sys_enter; 0: read at sys_exit alone */
	__s64 args[6];
	__s64 ret;
	__u32 nr;
	__u32 flags;
	__u16 str_len[2];        /* bytes stored in data[], without the NUL */
	__u16 sockaddr_len;      /* bytes stored in sockaddr */
	__u16 kpath_len;         /* FR_SC_KPATH: bytes of the kernel's path, after the strings */
};
FR_STATIC_ASSERT(sizeof(struct fr_syscall) == 144, "fr_syscall layout");

/* The kernel's path of an opened file is walked up from its dentry to the
 * process's root, a component (or a mount crossing) per step; a path of
 * FR_STR_MAX bytes has at most FR_STR_MAX / 2 components, so the buffer,
 * not the step count, is what cuts a path short. */
#define FR_KPATH_DEPTH (FR_STR_MAX / 2 + 64)

/* Follows struct fr_syscall when FR_SC_HAS_DATA is set: a socket address
 * and then str_len[0] + str_len[1] bytes of string arguments and kpath_len
 * bytes of the kernel's path, packed. */
struct fr_syscall_data {
	__u8 sockaddr[FR_SOCKADDR_MAX];
	char strings[];
};
FR_STATIC_ASSERT(sizeof(struct fr_syscall_data) == 128, "fr_syscall_data layout");

/* fr_exec.flags */
#define FR_EXEC_FILENAME_TRUNC (1u << 0)
#define FR_EXEC_ARGV_TRUNC     (1u << 1)
#define FR_EXEC_ARGV_FAULT     (1u << 2)

/* A successful exec: the file and the new argv (NUL-separated). Followed by
 * filename_len bytes of filename and then argv_len bytes of argv. */
struct fr_exec {
	struct fr_header h;
	__u32 old_pid;
	__u32 flags;
	__u16 filename_len;
	__u16 argv_len;
	__u32 argv_total;        /* bytes of argv in the process, kept or not */
	char data[];
};
FR_STATIC_ASSERT(sizeof(struct fr_exec) == 80, "fr_exec layout");

/* The rest of a long argv, FR_ARGV_MAX bytes at a time, right after its
 * exec record (same task): the bytes at `offset` of the NUL-separated block. */
struct fr_argv {
	struct fr_header h;
	__u32 offset;
	__u32 len;
	char data[];
};
FR_STATIC_ASSERT(sizeof(struct fr_argv) == 72, "fr_argv layout");

#define FR_FORK_THREAD (1u << 0)  /* clone(CLONE_THREAD): a new thread */
#define FR_FORK_NEW_NS (1u << 1)  /* the child runs in other namespaces than its parent (clone's CLONE_NEW*) */

struct fr_fork {
	struct fr_header h;
	__u32 child_pid;
	__u32 child_tid;
	__u32 flags;
	__u32 pad;
};
FR_STATIC_ASSERT(sizeof(struct fr_fork) == 80, "fr_fork layout");

#define FR_EXIT_GROUP_DEAD (1u << 0)  /* last thread: the process is gone */

struct fr_exit {
	struct fr_header h;
	__u32 exit_code;         /* raw wait status: code << 8 | signal */
	__u32 flags;
};
FR_STATIC_ASSERT(sizeof(struct fr_exit) == 72, "fr_exit layout");

/* TLS plaintext from uprobes on OpenSSL, GnuTLS, NSS and Go's crypto/tls:
 * one record per chunk of one plaintext read or write call; the chunk's
 * bytes follow. */
#define FR_TLS_CHUNK_MAX 16384   /* bytes per record at most */
#define FR_TLS_CHUNKS_MAX 16     /* chunks per call at most (the verifier walks each) */
enum fr_tls_func {
	FR_TLS_SSL_READ = 0,
	FR_TLS_SSL_WRITE = 1,
	FR_TLS_SSL_READ_EX = 2,
	FR_TLS_SSL_WRITE_EX = 3,
	FR_TLS_GNUTLS_RECV = 4,  /* gnutls_record_recv, also _recv_seq */
	FR_TLS_GNUTLS_SEND = 5,  /* gnutls_record_send, also _send2 */
	FR_TLS_HANDSHAKE = 6,    /* SSL_connect, SSL_do_handshake, gnutls_handshake, SSL_ForceHandshake,
				  * Go's handshakeContext: noted, never recorded */
	FR_TLS_NSPR_READ = 7,    /* NSS: PR_Read, PR_Recv on an SSL layer */
	FR_TLS_NSPR_WRITE = 8,   /* NSS: PR_Write, PR_Send on an SSL layer */
	FR_TLS_GO_READ = 9,      /* Go: crypto/tls.(*Conn).Read */
	FR_TLS_GO_WRITE = 10,    /* Go: crypto/tls.(*Conn).Write */
	/* The record layer's AEAD of aws-lc or BoringSSL linked into a program
	 * (rustls on aws-lc-rs: Codex): one TLS record per call, its plaintext
	 * read at the seal's entry and the open's return, TLS application data
	 * only (the inner content type taken off). The connection is the
	 * socket's inode number (ssl); a seal's is known from the first socket
	 * write after it (FR_TLS_UNBOUND until then), an open's from the
	 * socket read before it. */
	FR_TLS_AEAD_SEAL = 11,          /* EVP_AEAD_CTX_seal */
	FR_TLS_AEAD_SEAL_SCATTER = 12,  /* EVP_AEAD_CTX_seal_scatter */
	FR_TLS_AEAD_OPEN = 13,          /* EVP_AEAD_CTX_open */
	FR_TLS_AEAD_OPEN_GATHER = 14,   /* EVP_AEAD_CTX_open_gather */
	FR_TLS_FUNC_LAST = FR_TLS_AEAD_OPEN_GATHER,
};
/* In a TLS probe's attach cookie beside the enum fr_tls_func: a Go
 * program's probe (its register ABI; returns probed at RET instructions). */
#define FR_TLS_COOKIE_GO (1u << 8)
#define FR_TLS_FAULT (1u << 0)   /* the buffer could not be read */
/* An AEAD seal whose connection is not known yet: ssl is the AEAD context,
 * fd -1; the FR_REC_TLS_BIND record that follows names its connection. */
#define FR_TLS_UNBOUND (1u << 1)
/* An AEAD open whose connection could not be told (the data it opened was
 * not in the thread's last socket read): ssl is the AEAD context, fd -1. */
#define FR_TLS_NO_CONN (1u << 2)
struct fr_tls {
	struct fr_header h;
	__u64 ssl;               /* the SSL*, gnutls_session_t, PRFileDesc* or *tls.Conn (the connection in the process) */
	__u64 enter_ns;
	__s32 fd;                /* socket fd the call used, -1 if it made no syscall */
	__u32 func;              /* enum fr_tls_func */
	__u32 call_bytes;        /* bytes the call read or wrote */
	__u32 offset;            /* of this chunk within the call */
	__u32 len;               /* bytes of this chunk that follow */
	__u32 flags;
	char data[];
};
FR_STATIC_ASSERT(sizeof(struct fr_tls) == 104, "fr_tls layout");

/* An AEAD context (one direction of one TLS connection) bound to its
 * socket: the first socket write a thread makes after sealing with a
 * context not bound yet, when it starts with that seal's record header
 * (type, version and, for TLS 1.3, length). Userspace gives the FR_TLS_UNBOUND records of
 * (pid, ctx) before it their connection. */
struct fr_tls_bind {
	struct fr_header h;
	__u64 ctx;               /* the AEAD context: the unbound records' ssl */
	__u64 conn;              /* the socket's inode number */
	__s32 fd;
	__u32 pad;
};
FR_STATIC_ASSERT(sizeof(struct fr_tls_bind) == 88, "fr_tls_bind layout");

/* The first bytes a task sent on a TCP connection it made, when they are a
 * TLS ClientHello (a handshake record whose first message is type 1): so
 * a TLS connection is on the record whether or not a probe sees its
 * plaintext. Up to FR_TLS_HELLO_MAX - 1 bytes of the first send follow
 * (the record: `len` bytes, not the whole array), for userspace to parse
 * the name and ALPN extensions: a record holds at most 16 KiB, and a hello
 * with post-quantum key shares is ~1.5 KiB before its server name. */
#define FR_TLS_HELLO_MAX 16384
/* Sent inside a probed TLS library call: that library's plaintext is
 * captured. */
#define FR_HELLO_IN_PROBED_CALL (1u << 0)
/* Sent outside one, by a program that has called a probed TLS library
 * function since its exec (a library that hands its bytes to the program
 * to send, e.g. node's memory BIOs, sends outside the call). Likely
 * captured, not proven: a program that made one probed call and then
 * uses a second, unprobed TLS stack gets this bit too. */
#define FR_HELLO_PROBED_PROGRAM (1u << 1)

struct fr_tls_hello {
	struct fr_header h;
	__s32 fd;
	__u32 len;               /* bytes that follow */
	__u32 sent;              /* bytes the call sent */
	__u32 flags;
	__u8 data[FR_TLS_HELLO_MAX];  /* len of them in a record */
};
FR_STATIC_ASSERT(sizeof(struct fr_tls_hello) == 80 + FR_TLS_HELLO_MAX, "fr_tls_hello layout");
#define FR_TLS_HELLO_HEAD 80  /* a record's bytes before data */

/* Not a record: what the fr_exec_notices ring carries (with TLS capture on)
 * at the first exec of a file, so that a program carrying its own TLS is
 * probed by a thread of its own as it starts, not once the collector has
 * read every record before its exec. */
struct fr_exec_notice {
	__u32 pid;  /* the process (tgid), as the host sees it */
	__u32 session;
	/* A pid read late may be another process's: */
	__u64 ino;             /* the file exec'd */
	__u64 start_boottime;  /* the process's start (ns of CLOCK_BOOTTIME) */
};
FR_STATIC_ASSERT(sizeof(struct fr_exec_notice) == 24, "fr_exec_notice layout");

/* A DNS answer a session's process received: a recvfrom or recvmsg whose
 * source was port 53 of any address (its UDP resolver's reply). Up to
 * FR_DNS_ANSWER_MAX - 1 bytes of it follow: userspace reads the names the
 * process's later connects were looked up by (under watch and flightrecd,
 * which run no resolver of their own). */
#define FR_DNS_ANSWER_MAX 4096
struct fr_dns_answer {
	struct fr_header h;
	__s32 fd;
	__u32 len;               /* bytes that follow */
	__u32 received;          /* bytes the call returned */
	__u16 family;            /* the source's: AF_INET or AF_INET6 */
	__u16 port;              /* host order: 53 */
	__u8 server[16];         /* the source's address, network order */
	__u8 data[FR_DNS_ANSWER_MAX];  /* len of them in a record */
};
FR_STATIC_ASSERT(sizeof(struct fr_dns_answer) == 96 + FR_DNS_ANSWER_MAX, "fr_dns_answer layout");
#define FR_DNS_ANSWER_HEAD 96  /* a record's bytes before data */

/* A BPF-LSM hook's view (where the kernel allows BPF-LSM): the kernel's own
 * copy of the path or address, race-free, unlike syscall arguments. The
 * path (path_len bytes) follows. */
enum fr_lsm_hook {
	FR_LSM_FILE_OPEN = 1,
	FR_LSM_BPRM_CHECK = 2,
	FR_LSM_SOCKET_CONNECT = 3,
	FR_LSM_TASK_KILL = 4,    /* flags: signal, target: pid */
	FR_LSM_BPF = 5,          /* flags: bpf command */
	FR_LSM_CAPABLE = 6,      /* flags: capability */
	FR_LSM_PATH_UNLINK = 7,  /* path: the file removed */
	FR_LSM_PATH_RENAME = 8,  /* path: old; new path at path + FR_RENAME_NEW, target: its length */
	FR_LSM_INODE_SETATTR = 9, /* path: the file's name (no directory), flags: ia_valid, target: new mode */
	FR_LSM_USERNS_CREATE = 10, /* these four only refuse, while path rules are enforced */
	FR_LSM_SB_MOUNT = 11,
	FR_LSM_MOVE_MOUNT = 12,
	FR_LSM_PATH_CHROOT = 13,
	FR_LSM_UNIX_INBOUND = 14,  /* a task outside the session reaching a session's UNIX socket: refused;
				    * sockaddr: that socket's name, target: 1 stream connect, 2 datagram */
};
struct fr_lsm {
	struct fr_header h;
	__u32 hook;              /* enum fr_lsm_hook */
	__u32 flags;             /* file_open: f_flags */
	__u16 path_len;
	__u16 sockaddr_len;
	__u32 denied_by;         /* 0: allowed; else refused with -EPERM (FR_DENY_*, hidden rule N) */
	__u32 target;            /* task_kill: the target's thread-group id */
	__u32 pad;
	__u8 sockaddr[FR_SOCKADDR_MAX];
	char path[];
};
FR_STATIC_ASSERT(sizeof(struct fr_lsm) == 216, "fr_lsm layout");

#define FR_RENAME_NEW 2048   /* path_rename: where the new path starts in path[] */

/* denied_by of file_open and socket_connect records: 0 allowed; 1..FR_PATH_RULES
 * the hidden-path rule of that number; or one of these. */
#define FR_DENY_INBOUND 0xfffcu /* unix_inbound: the session's sockets take no one from outside */
#define FR_DENY_VIEW 0xfffdu    /* a new user namespace, mount or chroot: it could rename files */
#define FR_DENY_EXEC 0xfffeu    /* file_open for exec: outside the exec allowlist */
#define FR_DENY_EGRESS 0xffffu  /* socket_connect: not on the egress allowlist */

/* Path rules enforced by lsm/file_open, in two longest-prefix-match tries
 * (fr_hidden_paths: may not be opened; fr_exec_paths: may be executed). A rule "/a/b"
 * is stored as "/a/b/" and matched against the opened path plus "/", so it
 * covers /a/b and everything under it but not /a/bc. */
#define FR_PATH_RULES 1024
#define FR_PATH_RULE_MAX 256     /* bytes of a rule with its '/' */
struct fr_path_key {
	__u32 prefixlen;         /* bits */
	__u8 data[FR_PATH_RULE_MAX];
};
FR_STATIC_ASSERT(sizeof(struct fr_path_key) == 260, "fr_path_key layout");

/* One egress allowlist entry (cgroup/connect and sendmsg programs): an
 * address prefix and a port (0: any), both compared in network order. */
#define FR_EGRESS_MAX 64
struct fr_egress_rule {
	__u8 addr[16];
	__u32 family;            /* AF_INET (2) or AF_INET6 (10) */
	__u32 prefix;            /* bits */
	__u16 port;              /* host order; 0: any */
	__u16 pad[3];
};
FR_STATIC_ASSERT(sizeof(struct fr_egress_rule) == 32, "fr_egress_rule layout");

/* Runtime connect grants (ask.connect; userspace/grants/). The grant
 * supervisor answers a thread's asked connect() by putting a ticket for
 * that thread and the address it read into fr_egress_tickets; the cgroup
 * connect program takes it (one delete: one connect) when the kernel's
 * copy of the address is the same, so a thread that rewrites the address
 * after the decision finds no ticket. An endpoint once granted stays in
 * fr_egress_granted, whose packets the cgroup_skb filters let through:
 * a connection made under a grant outlives the grant. IPv4-mapped IPv6
 * addresses are keyed as IPv4. */
#define FR_EGRESS_GRANTED_MAX 4096
#define FR_EGRESS_TICKETS_MAX 16384
/* Addresses admitted by name (network.allow NAME:PORT): the session's
 * resolver puts each address of an allowed name's answer in fr_egress_named,
 * keyed as the grants are (port 0: the rule's any port), its value the
 * CLOCK_MONOTONIC ns until which new connects there may start (the answer's
 * TTL, floored and capped). Packets of a connection once admitted pass as
 * long as the address stays in the map (an LRU). */
#define FR_EGRESS_NAMED_MAX 4096
/* Server names checked (network.sni): the resolver also puts each
 * (name asked, address answered) pair of an allowed name's answer in
 * fr_egress_names (value unused). A TCP connection that connect() let
 * through by name alone must name, in its first payload, a server (TLS
 * ClientHello server_name, or an HTTP/1 Host header) whose pair is there;
 * otherwise its packets are dropped from then on and the cut is reported
 * on fr_sni_cuts, for userspace to shut the socket and record it. Names
 * are lowercase ASCII without a trailing dot, zero-padded. */
#define FR_EGRESS_NAMES_MAX 16384
#define FR_SNI_NAME_MAX 256       /* a DNS name is at most 253 bytes as text */
struct fr_egress_name {
	__u8 name[FR_SNI_NAME_MAX];
	__u8 addr[16];           /* as fr_egress_endpoint: IPv4-mapped keyed as IPv4 */
	__u32 family;
	__u16 port;              /* the allowing rule's (host order; 0: any port) */
	__u16 pad;
};
FR_STATIC_ASSERT(sizeof(struct fr_egress_name) == 280, "fr_egress_name layout");
enum fr_sni_mode {
	FR_SNI_OFF = 0,          /* not checked */
	FR_SNI_OPTIONAL = 1,     /* a name given must match; none given passes */
	FR_SNI_REQUIRED = 2,     /* a name must be given (and match): UDP to such an address is refused */
};
enum fr_sni_reason {
	FR_SNI_MISMATCH = 1,     /* the name given was not answered with this address */
	FR_SNI_MISSING = 2,      /* no name given, network.sni: required */
	FR_SNI_UNREADABLE = 3,   /* a TLS or HTTP start whose name is not in the first segment, or malformed */
};
enum fr_sni_proto {
	FR_SNI_TLS = 1,
	FR_SNI_HTTP = 2,
	FR_SNI_OTHER = 3,
};
struct fr_sni_cut {
	__u64 cookie;            /* the socket's (SO_COOKIE) */
	__u32 tgid;              /* the process that connected it (host pid namespace) */
	__u32 family;            /* of the packets: IPv4-mapped IPv6 sockets send AF_INET ones */
	__u8 addr[16];           /* the far end, network order */
	__u8 local_addr[16];     /* the socket's own end, for sock_diag to find it */
	__u16 port, local_port;  /* host order */
	__u8 reason;             /* fr_sni_reason */
	__u8 proto;              /* fr_sni_proto */
	__u16 name_len;          /* bytes of name (0: none read) */
	__u8 name[FR_SNI_NAME_MAX];
};
FR_STATIC_ASSERT(sizeof(struct fr_sni_cut) == 312, "fr_sni_cut layout");
/* Per socket (sk storage) from a connect admitted by name alone. */
enum fr_egress_conn_state {
	FR_CONN_UNCHECKED = 0,   /* nothing to check (admitted otherwise) */
	FR_CONN_PENDING = 1,     /* its first payload is to be read */
	FR_CONN_CUT = 2,         /* its packets are dropped */
	FR_CONN_PASSED = 3,      /* its first payload passed: a retransmission of it is read again, until it is ACKed */
};
struct fr_egress_conn {
	__u32 tgid;              /* who connected it */
	__u8 state;              /* fr_egress_conn_state */
	__u8 reported;           /* 1: the cut is on fr_sni_cuts */
	__u8 reason, proto;      /* the cut's, for a report that had to wait */
	__u32 seq_start, seq_end;  /* FR_CONN_PASSED: the TCP sequence range read */
};
struct fr_egress_endpoint {
	__u8 addr[16];           /* network order; IPv4 in the first 4 bytes */
	__u32 family;            /* AF_INET or AF_INET6 */
	__u16 port;              /* host order */
	__u16 pad;
};
FR_STATIC_ASSERT(sizeof(struct fr_egress_endpoint) == 24, "fr_egress_endpoint layout");
struct fr_egress_ticket {
	struct fr_egress_endpoint to;
	__u32 tid;               /* the thread whose connect was granted (host pid namespace) */
	__u32 pad;
};
FR_STATIC_ASSERT(sizeof(struct fr_egress_ticket) == 32, "fr_egress_ticket layout");
/* The ticket's value: its deadline, bpf_ktime_get_ns() (CLOCK_MONOTONIC). */

/* Runtime exec grants (ask.exec, BPF-LSM only): the supervisor answers an
 * asked execve() of a granted file with a ticket for that thread and the
 * file's path as the thread's root shows it; lsm/file_open lets an open for
 * exec off the exec allowlist through only by taking the ticket for the
 * path the kernel resolved (bpf_d_path). Value: the deadline, as above. */
#define FR_EXEC_TICKETS_MAX 4096
struct fr_exec_ticket {
	__u32 tid;               /* host pid namespace */
	__u32 len;               /* bytes of path; the rest is zero */
	__u8 path[FR_PATH_RULE_MAX];
};
FR_STATIC_ASSERT(sizeof(struct fr_exec_ticket) == 264, "fr_exec_ticket layout");

/* Packets the egress programs' cgroup_skb filters dropped, per CPU and
 * direction (index): how many, and the far end of the last one. */
enum fr_net_drop_kind {
	FR_NET_DROP_OUT = 0,     /* to an address:port neither loopback nor allowed */
	FR_NET_DROP_IN = 1,      /* from one */
	FR_NET_DROP_KINDS = 2,
};
struct fr_net_drop {
	__u64 count;
	__u8 addr[16];           /* network order; IPv4 in the first 4 bytes */
	__u32 family;            /* AF_INET or AF_INET6 */
	__u16 port;              /* host order; 0 when not TCP or UDP */
	__u16 pad;
};
FR_STATIC_ASSERT(sizeof(struct fr_net_drop) == 32, "fr_net_drop layout");

/* A task of the session moved to another cgroup (cgroup_attach_task, any
 * hierarchy): the header is the task that moved it; the task stays
 * recorded wherever it goes. The destination's path (path_len bytes)
 * follows. */
#define FR_CGROUP_PATH_MAX 256
struct fr_cgroup_move {
	struct fr_header h;
	__u64 dst_cgroup_id;     /* kernfs id of the destination */
	__u32 pid, tid;          /* the task moved */
	__u32 threadgroup;       /* 1: its whole process moved */
	__u16 path_len;
	__u16 flags;             /* FR_MOVE_* */
	char path[FR_CGROUP_PATH_MAX];
};
#define FR_MOVE_PATH_TRUNC (1u << 0)
#define FR_MOVE_INTO_SESSION (1u << 1)  /* a task of no session moved into this one's cgroups (by someone else) */
FR_STATIC_ASSERT(sizeof(struct fr_cgroup_move) == 344, "fr_cgroup_move layout");

/* Per-task state, in the fr_tasks task storage. userspace creates it for
 * the tasks already in a watched cgroup (keyed by pidfd), so a task that
 * is moved out before its first syscall stays recorded. */
struct fr_task_state {
	__u64 enter_ns;
	__s64 args[6];
	__u32 nr;
	__u32 active;
	__u32 exec_path_len;     /* filename of a successful exec, set by process.bpf.c */
	__u32 exec_flags;
	__u32 sa_buf_len;        /* accept & co: the caller's buffer size, read at entry */
	__u32 fork_return;       /* its next sys_exit ends a syscall entered unseen (a fork's return in a
	                          * new task, or a task that was in a syscall when storage was made) */
	__u32 session;           /* the session the task was recorded in first; it stays there */
	__u32 tls_probed;        /* (a group leader's) its program called a probed TLS library function since exec */
	__u64 uid_gid;           /* its ids as bpf_get_current_uid_gid() gave them, and its cgroup's id, */
	__u64 cgroup_id;         /* kept for its syscall records (fr_task_ids) */
	__u32 ids_valid;         /* 0: read them afresh (a set*id call or exec returned) */
	__u32 ids_gen;           /* fr_session_gen when they were read (a cgroup move bumps it) */
	__s32 tls_recv_fd;       /* its last read or recvfrom (an AEAD open's connection): the fd, */
	__u32 tls_recv_len;      /* the buffer's size */
	__u64 tls_recv_buf;      /* and address (0: none, or a readv/recvmsg) */
	char exec_path[FR_STR_MAX];
};
FR_STATIC_ASSERT(sizeof(struct fr_task_state) == 4224, "fr_task_state layout");

/* Which session a cgroup's tasks belong to: fr_sessions maps a cgroup id
 * to a session number, for the cgroup and everything below it (the
 * innermost listed cgroup wins). A session number is never used twice in
 * one capture; fr_session_live[n % FR_MAX_SESSIONS] == n while session n
 * is open, so tasks that keep the number of a closed session are let go. */
struct fr_cgroup_verdict {
	__u32 generation;        /* fr_session_gen when it was worked out */
	__u32 session;           /* 0: no session */
};
FR_STATIC_ASSERT(sizeof(struct fr_cgroup_verdict) == 8, "fr_cgroup_verdict layout");

/* A session's ring: its index in fr_session_rings and its size in bytes,
 * at fr_session_ring_of[n % FR_MAX_SESSIONS]. The size is kept here so
 * that a record's wake-up decision needs no bpf_ringbuf_query for it. */
struct fr_ring_slot {
	__u32 index;
	__u32 bytes;
};
FR_STATIC_ASSERT(sizeof(struct fr_ring_slot) == 8, "fr_ring_slot layout");

/* Tasks of a session, per CPU (fr_session_tasks[n % FR_MAX_SESSIONS]):
 * given its state (joined) and exited while in it (left). A session whose
 * cgroups are gone still has tasks while the sums differ (a task moved
 * out keeps its session). */
struct fr_session_tasks {
	__u64 joined;
	__u64 left;
};
FR_STATIC_ASSERT(sizeof(struct fr_session_tasks) == 16, "fr_session_tasks layout");

/* Sessions with a ring buffer of their own (fr_session_flags[n %
 * FR_MAX_SESSIONS] & FR_SESSION_OWN_RING; the ring is in fr_session_rings):
 * their losses are counted in fr_session_drops, not fr_drops. */
#define FR_SESSION_OWN_RING (1u << 1)

/* Full sessions whose calls sys_enter sees begin (fr_session_flags[n %
 * FR_MAX_SESSIONS] & FR_SESSION_ENTRY): entry times, and calls seccomp
 * stopped told apart. sys_enter is attached only while such a session is
 * open; the other full sessions' calls are read at sys_exit alone. */
#define FR_SESSION_ENTRY (1u << 2)

/* Sessions under backpressure's emergency brake (fr_session_flags[n %
 * FR_MAX_SESSIONS] & FR_SESSION_BRAKE). The collector pauses a session
 * whose ring is half full (the cgroup freezer), but a storm of large
 * records from many threads can fill the other half before it acts. Past
 * three quarters, a process of such a session that makes a record is
 * stopped by the kernel (SIGSTOP, at its return to user space), and kept
 * in fr_braked (tgid -> struct fr_braked) for the collector to continue
 * once its ring has drained. A process the map has no room for is not
 * stopped. */
#define FR_SESSION_BRAKE (1u << 3)
#define FR_BRAKED_MAX 16384
struct fr_braked {
	__u32 session;
	__u32 pad;
	__u64 start_boottime;  /* task->start_boottime: a reused pid is not continued */
};
FR_STATIC_ASSERT(sizeof(struct fr_braked) == 16, "fr_braked layout");

/* Lite sessions (fr_session_flags[n % FR_MAX_SESSIONS] & FR_SESSION_LITE):
 * no BPF program runs on a syscall outside the ones fr_lite_calls names,
 * each caught at its own syscalls:sys_exit_* tracepoint; the raw syscall
 * programs leave lite sessions alone. fr_lite_calls[nr] says what becomes
 * of a call (every one is counted, in fr_lite_counts): */
#define FR_SESSION_LITE (1u << 0)
enum fr_lite_kind {
	FR_LITE_NONE = 0,        /* not a lite call */
	FR_LITE_RECORD = 1,      /* recorded */
	FR_LITE_OPEN = 2,        /* recorded if it opens for writing, creates or truncates, or opens
	                          * /proc/PID/mem (else counted only) */
	FR_LITE_EXEC = 3,        /* recorded if it fails (a successful exec is the exec record) */
	FR_LITE_PRCTL = 4,       /* recorded for options that change privileges, tracing or seccomp */
};
/* Calls of a lite session's tasks, per cgroup and syscall (a per-CPU
 * count: userspace sums the CPUs). */
struct fr_lite_count_key {
	__u64 cgroup_id;         /* the task's cgroup v2 id at the call */
	__u32 session;
	__u32 nr;
};
FR_STATIC_ASSERT(sizeof(struct fr_lite_count_key) == 16, "fr_lite_count_key layout");
#define FR_LITE_COUNT_KEYS 65536 /* (cgroup, session, syscall) triples counted at once; beyond: fr_lite_uncounted */

/* Which arguments of a syscall to read, indexed by syscall number.
 * FR_ARG_NONE marks an unused slot. */
#define FR_ARG_NONE 0xff
enum fr_sockaddr_mode {
	FR_SA_NONE = 0,
	FR_SA_IN = 1,    /* sockaddr is an input; its length is an argument */
	FR_SA_OUT = 2,   /* sockaddr is an output; its length is *argument */
	FR_SA_MSG = 3,   /* the argument is a struct msghdr (or the first of an mmsghdr
	                  * array): its msg_name, msg_namelen bytes (sendmsg, sendmmsg) */
};
struct fr_syscall_spec {
	__u8 str_arg[2];         /* argument index of a path/string, or NONE */
	__u8 sockaddr_arg;
	__u8 sockaddr_len_arg;
	__u8 sockaddr_mode;      /* enum fr_sockaddr_mode */
	__u8 pad[3];
};
FR_STATIC_ASSERT(sizeof(struct fr_syscall_spec) == 8, "fr_syscall_spec layout");

#endif
