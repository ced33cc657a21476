/* TLS plaintext: uprobes on OpenSSL's SSL_write/SSL_read and their _ex
 * forms, GnuTLS's gnutls_record_send/recv (and _send2/_recv_seq, which take
 * the same first three arguments), NSPR's PR_Write/PR_Read/PR_Send/PR_Recv
 * on NSS's SSL layer, and Go's crypto/tls.(*Conn).Write/Read. Entry probes
 * remember the buffer; return probes read what was actually written or
 * read, in chunks, for the session's tasks only. The C libraries' socket fd
 * is learned from the read/write syscall the call makes (syscalls.bpf.c);
 * Go's from the connection itself. The AEAD of aws-lc or BoringSSL linked
 * into a program (rustls: Codex) is probed below the TLS library: one TLS
 * record per call, plaintext at the seal's entry (it is encrypted in
 * place) and at the open's return. Userspace attaches these per library
 * file (or program).
 *
 * One entry and one return program for every stack, told apart by the
 * attach cookie (enum fr_tls_func, and FR_TLS_COOKIE_GO): verifying the
 * programs is most of a session's start-up, so each is verified once, and
 * the chunk loop is a bpf_loop callback, verified once whatever the count.
 * BPF_KPROBE is libbpf 1.1's argument accessor for uprobes too. */
#include "lib/common.bpf.h"

#define CHUNK_MASK (FR_TLS_CHUNK_MAX * 2 - 1)

struct tls_scratch {
	__u8 buf[sizeof(struct fr_tls) + FR_TLS_CHUNK_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tls_scratch);
} tls_scratch_map SEC(".maps");

/* The session of the current task, 0 for none; notes on the way that its
 * program makes probed TLS calls (syscalls.bpf.c: TLS hellos), until it
 * execs. */
static __always_inline __u32 tls_session_noting_probed(bool note)
{
	if (!fr_tls_enabled)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 session = fr_task_session(task);
	if (!session)
		return 0;
	if (note)
		fr_leader_tls_probed(1);
	return session;
}

/* Go's crypto/tls, register ABI (Go 1.17+ on amd64): the receiver in RAX,
 * the slice b in RBX (pointer) and RCX (length); the returned n in RAX; the
 * running goroutine's g in R14. A goroutine may move to another thread
 * inside a call, so calls are keyed by goroutine, not by thread; and Go
 * moves stacks, so returns are caught by uprobes on the function's RET
 * instructions (userspace finds them), never by uretprobes, which rewrite
 * the return address on a stack Go may copy. */
struct go_call_key {
	__u64 g;
	__u32 tgid;
	__u32 pad;
};

struct go_tls_call {
	struct fr_tls_call call;
	/* b on the goroutine's stack: its distance below the stack's top.
	 * A stack that grows is copied whole, top to top (runtime.copystack),
	 * so the buffer is found again from the new top. */
	__u64 below_stack_top;
};

/* LRU: a call that never returns (a panic unwinds past it) leaves a slot
 * behind, and the oldest make room. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct go_call_key);
	__type(value, struct go_tls_call);
} go_tls_calls SEC(".maps");

/* runtime.g begins with its stack bounds {lo, hi}. */
struct go_stack {
	__u64 lo, hi;
};

static __always_inline struct go_stack go_stack_of(__u64 g)
{
	struct go_stack st = {};
	if (bpf_probe_read_user(&st, sizeof(st), (const void *)g) || st.lo >= st.hi)
		st.lo = st.hi = 0;
	return st;
}

/* The socket under a *tls.Conn: its first field is the net.Conn interface
 * {itab, data}; for TCP, data is a *net.TCPConn whose first word is the
 * *netFD, which begins with a poll.FD: fdMutex (16 bytes), then Sysfd.
 * -1 when any step cannot be read or the number is no fd. */
static __always_inline __s32 go_conn_fd(__u64 conn)
{
	__u64 data = 0, netfd = 0;
	__s64 fd = -1;
	if (bpf_probe_read_user(&data, sizeof(data), (const void *)(conn + 8)) || !data ||
	    bpf_probe_read_user(&netfd, sizeof(netfd), (const void *)data) || !netfd ||
	    bpf_probe_read_user(&fd, sizeof(fd), (const void *)(netfd + 16)))
		return -1;
	return fd >= 0 && fd < (1 << 30) ? (__s32)fd : -1;
}

static __always_inline int go_enter(struct pt_regs *ctx, __u32 func, __u32 session)
{
	if (func != FR_TLS_GO_READ && func != FR_TLS_GO_WRITE)
		return 0;  /* a handshake is only noted */
	struct go_call_key key = { .g = ctx->r14, .tgid = bpf_get_current_pid_tgid() >> 32 };
	struct go_tls_call v = {
		.call = {
			.ssl = ctx->ax,
			.buf = ctx->bx,
			.enter_ns = bpf_ktime_get_ns(),
			.func = func,
			.fd = go_conn_fd(ctx->ax),
			.session = session,
		},
	};
	struct go_stack st = go_stack_of(key.g);
	if (v.call.buf >= st.lo && v.call.buf < st.hi)
		v.below_stack_top = st.hi - v.call.buf;
	if (bpf_map_update_elem(&go_tls_calls, &key, &v, BPF_ANY) != 0)
		fr_count_drop(session);
	return 0;
}

/* At one of Go's RETs: the call, and the bytes it read or wrote. */
static __always_inline bool go_return(struct pt_regs *ctx, struct fr_tls_call *out, __u64 *total)
{
	struct go_call_key key = { .g = ctx->r14, .tgid = bpf_get_current_pid_tgid() >> 32 };
	struct go_tls_call *found = bpf_map_lookup_elem(&go_tls_calls, &key);
	if (!found)
		return false;
	struct go_tls_call v = *found;
	bpf_map_delete_elem(&go_tls_calls, &key);
	__s64 n = (__s64)ctx->ax;
	if (n <= 0)
		return false;
	if (v.below_stack_top) {
		struct go_stack st = go_stack_of(key.g);
		if (st.hi - st.lo < v.below_stack_top)
			return false;
		v.call.buf = st.hi - v.below_stack_top;
	}
	*out = v.call;
	*total = (__u64)n;
	return true;
}

/* The length of a TLS 1.3 record's content (RFC 8446 5.2: the inner
 * plaintext is the content, its type, then zeros), or -1 when it is no
 * application data. The type is looked for in the last 32 bytes: stacks
 * pad little or not at all. A global function (scalars in and out, which
 * every kernel takes): the verifier checks it once, not in every state of
 * its callers (most of a session's start-up is verifying these programs). */
__noinline __s64 fr_tls13_content_len(__u64 buf, __u64 len)
{
	__u8 tail[32] = {};
	__u64 n = len;
	if (n > sizeof(tail))
		n = sizeof(tail);
	if (n == 0 || len > FR_TLS_CHUNK_MAX + 256 || bpf_probe_read_user(tail, n, (const void *)(buf + len - n)))
		return -1;
#pragma unroll
	for (int i = sizeof(tail) - 1; i >= 0; i--) {
		if ((__u64)i >= n || tail[i] == 0)
			continue;
		return tail[i] == 0x17 ? (__s64)(len - n + i) : -1;
	}
	return -1;
}

/* Whether an AEAD's additional data is a TLS record header of application
 * data: TLS 1.3's (type, version, length: 5 bytes; the outer type is
 * always application data) or TLS 1.2's (sequence number first: 13). */
static __always_inline bool tls_record_ad(__u64 ad, __u64 ad_len, __u32 *tls13, struct fr_aead_wait *w)
{
	__u8 h[13] = {};
	if (ad_len == 5) {
		*tls13 = 1;
		if (bpf_probe_read_user(h, 5, (const void *)ad) || h[0] != 0x17 || h[1] != 3 || h[2] != 3)
			return false;
		/* The record's header on the wire is the AD itself. */
		__builtin_memcpy(w->wire, h, 5);
		w->wire_len = 5;
		return true;
	}
	if (ad_len == 13) {
		*tls13 = 0;
		if (bpf_probe_read_user(h, 13, (const void *)ad) || h[8] != 0x17 || h[9] != 3 || h[10] < 1 || h[10] > 3)
			return false;
		/* Type and version; the length on the wire adds what the cipher does. */
		__builtin_memcpy(w->wire, h + 8, 3);
		w->wire_len = 3;
		return true;
	}
	return false;
}

/* The connection an AEAD context serves, if known and still open: the
 * socket at the fd it was bound to is the same one (a context freed and
 * its address reused for another connection is not taken for the old). */
static __always_inline bool aead_conn(__u64 ctx, struct fr_aead_conn *out)
{
	struct fr_aead_key key = { .ctx = ctx, .tgid = bpf_get_current_pid_tgid() >> 32 };
	struct fr_aead_conn *c = bpf_map_lookup_elem(&fr_aead_conns, &key);
	if (!c)
		return false;
	*out = *c;
	if (fr_sock_ino(out->fd) == out->ino)
		return true;
	bpf_map_delete_elem(&fr_aead_conns, &key);
	return false;
}

struct tls_chunks {
	struct fr_tls_call call;
	__u64 total, chunk, cap;
};

static long tls_chunk(__u32 i, void *ctx);

static __always_inline void emit_chunks(struct tls_chunks *t)
{
	if (t->total > 0xffffffffULL)
		t->total = 0xffffffffULL;
	t->chunk = fr_tls_chunk < FR_TLS_CHUNK_MAX ? fr_tls_chunk : FR_TLS_CHUNK_MAX;
	t->cap = fr_tls_cap;
	if (t->chunk)
		bpf_loop(FR_TLS_CHUNKS_MAX, tls_chunk, t, 0);
}

/* The seals' and opens' arguments past the sixth are on the stack, above
 * the return address. seal(ctx, out, out_len, max_out, nonce, nonce_len,
 * in, in_len, ad, ad_len); seal_scatter(ctx, out, out_tag, out_tag_len,
 * max_out_tag, nonce, nonce_len, in, in_len, extra_in, extra_in_len, ad,
 * ad_len); open(ctx, out, out_len, max_out, nonce, nonce_len, in, in_len,
 * ad, ad_len); open_gather(ctx, out, nonce, nonce_len, in, in_len, in_tag,
 * in_tag_len, ad, ad_len). */
static __always_inline int aead_enter(struct pt_regs *ctx, __u32 func, __u32 session)
{
	/* Each register read once, here: a choice between two of them must
	 * not become a load through a computed context pointer, which the
	 * verifier refuses. */
	__u64 aead = ctx->di, out = ctx->si, out_len = ctx->dx, r8 = ctx->r8, r9 = ctx->r9, sp = ctx->sp;
	barrier_var(out_len);
	barrier_var(r8);
	barrier_var(r9);
	__u64 stack[7] = {};
	bool scatter = func == FR_TLS_AEAD_SEAL_SCATTER;
	if (bpf_probe_read_user(stack, scatter ? sizeof(stack) : 4 * sizeof(__u64), (const void *)(sp + 8)))
		return 0;
	__u64 ad = scatter ? stack[5] : stack[2], ad_len = scatter ? stack[6] : stack[3];
	__u32 tls13 = 0;
	struct fr_aead_wait wait = { .ctx = aead };
	if (!tls_record_ad(ad, ad_len, &tls13, &wait))
		return 0;
	fr_leader_tls_probed(1);  /* a TLS record: its program's TLS is probed */
	struct fr_aead_conn conn = {};
	bool bound = aead_conn(aead, &conn);
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (func == FR_TLS_AEAD_OPEN || func == FR_TLS_AEAD_OPEN_GATHER) {
		/* The plaintext is there at the return: noted as a C call's. */
		if (!bound) {
			/* The socket its thread read last, when what it opens
			 * came in that read: the record begins in its buffer or
			 * at most one record before (the rest of a record read
			 * in part before). */
			struct task_struct *task = bpf_get_current_task_btf();
			struct fr_task_state *st = bpf_task_storage_get(&fr_tasks, task, 0, 0);
			__u64 in = func == FR_TLS_AEAD_OPEN ? stack[0] : r8;
			bool read_there = st && st->tls_recv_buf && in + (FR_TLS_CHUNK_MAX + 2048) >= st->tls_recv_buf &&
					  in < st->tls_recv_buf + st->tls_recv_len;
			conn.fd = read_there ? st->tls_recv_fd : -1;
			conn.ino = read_there ? fr_sock_ino(conn.fd) : 0;
			if (conn.ino) {
				struct fr_aead_key key = { .ctx = aead, .tgid = bpf_get_current_pid_tgid() >> 32 };
				bpf_map_update_elem(&fr_aead_conns, &key, &conn, BPF_ANY);
				bound = true;
			}
		}
		struct fr_tls_call call = {
			.ssl = bound ? conn.ino : aead,
			.buf = out,
			.len_ptr = func == FR_TLS_AEAD_OPEN ? out_len : r9,
			.enter_ns = bpf_ktime_get_ns(),
			.func = func,
			.fd = bound ? conn.fd : -1,
			.session = session,
			.tls13 = tls13,
			.flags = bound ? 0 : FR_TLS_NO_CONN,
		};
		if (bpf_map_update_elem(&fr_tls_calls, &tid, &call, BPF_ANY) != 0)
			fr_count_drop(session);
		return 0;
	}
	/* A seal: read now, before it encrypts in place. */
	__u64 in = scatter ? stack[1] : stack[0], in_len = scatter ? stack[2] : stack[1];
	__s64 content = (__s64)in_len;
	if (tls13) {
		if (scatter && stack[4]) {  /* the content type passed apart, as extra_in */
			__u8 type = 0;
			if (stack[4] != 1 || bpf_probe_read_user(&type, 1, (const void *)stack[3]) || type != 0x17)
				return 0;
		} else {
			content = fr_tls13_content_len(in, in_len);
		}
	}
	if (content <= 0)
		return 0;
	struct tls_chunks t = {
		.call = {
			.ssl = bound ? conn.ino : aead,
			.buf = in,
			.enter_ns = bpf_ktime_get_ns(),
			.func = func,
			.fd = bound ? conn.fd : -1,
			.session = session,
			.flags = bound ? 0 : FR_TLS_UNBOUND,
		},
		.total = (__u64)content,
	};
	if (!bound) {
		/* Its records wait for the first write that starts with the
		 * first of them (later seals with the same context, before that
		 * write, are bound with it). */
		struct fr_aead_wait *was = bpf_map_lookup_elem(&fr_aead_pending, &tid);
		__u64 now = bpf_ktime_get_ns();
		if (!was || was->ctx != aead || now - was->since_ns > FR_AEAD_WAIT_NS) {
			wait.since_ns = now;
			bpf_map_update_elem(&fr_aead_pending, &tid, &wait, BPF_ANY);
		}
	}
	emit_chunks(&t);
	return 0;
}

static __always_inline int c_enter(void *ssl, const void *buf, __u64 *len_ptr, __u32 func, __u32 session)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	if (func == FR_TLS_HANDSHAKE) {
		/* Only noted (a ClientHello sent inside it is covered): never in
		 * place of a plaintext call in flight, whose slot counts it so
		 * that its return is not taken for the outer call's. */
		struct fr_tls_call *outer = bpf_map_lookup_elem(&fr_tls_calls, &tid);
		if (outer && outer->func != FR_TLS_HANDSHAKE) {
			outer->nested++;
			return 0;
		}
	}
	struct fr_tls_call call = {
		.ssl = (__u64)ssl,
		.buf = (__u64)buf,
		.len_ptr = (__u64)len_ptr,
		.enter_ns = bpf_ktime_get_ns(),
		.func = func,
		.fd = -1,
		.session = session,
	};
	if (bpf_map_update_elem(&fr_tls_calls, &tid, &call, BPF_ANY) != 0)
		fr_count_drop(session);
	return 0;
}

/* At a C library call's return: the call, and the bytes it read or wrote. */
static __always_inline bool c_return(long ret, struct fr_tls_call *out, __u64 *total)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct fr_tls_call *call = bpf_map_lookup_elem(&fr_tls_calls, &tid);
	if (!call)
		return false;
	if (call->nested) {  /* the return of a handshake inside this call */
		call->nested--;
		return false;
	}
	struct fr_tls_call c = *call;
	bpf_map_delete_elem(&fr_tls_calls, &tid);
	int iret = (int)ret;  /* OpenSSL's and NSPR's return int, GnuTLS's ssize_t */
	if (c.func == FR_TLS_HANDSHAKE)
		return false;
	if (c.func == FR_TLS_AEAD_OPEN || c.func == FR_TLS_AEAD_OPEN_GATHER) {
		/* 1 on success; the plaintext's length at *out_len, or the
		 * ciphertext's (kept in len_ptr) for open_gather. */
		__u64 n = c.len_ptr;
		if (iret != 1 || (c.func == FR_TLS_AEAD_OPEN &&
				  (!c.len_ptr || bpf_probe_read_user(&n, sizeof(n), (const void *)c.len_ptr))))
			return false;
		__s64 content = c.tls13 ? fr_tls13_content_len(c.buf, n) : (__s64)n;
		if (content <= 0)
			return false;  /* a handshake message, an alert, or nothing */
		*total = (__u64)content;
		*out = c;
		return true;
	}
	if (c.func == FR_TLS_GNUTLS_RECV || c.func == FR_TLS_GNUTLS_SEND) {
		if (ret <= 0)
			return false;
		*total = ret;
	} else if (c.func == FR_TLS_SSL_READ_EX || c.func == FR_TLS_SSL_WRITE_EX) {
		if (iret != 1 || !c.len_ptr || bpf_probe_read_user(total, sizeof(*total), (const void *)c.len_ptr))
			return false;
	} else {
		if (iret <= 0)
			return false;
		*total = iret;
	}
	*out = c;
	return true;
}

/* Chunk i of a finished call, for bpf_loop; 1 ends the loop. */
static long tls_chunk(__u32 i, void *ctx)
{
	struct tls_chunks *t = ctx;
	__u64 off = (__u64)i * t->chunk;
	if (off >= t->total || off >= t->cap)
		return 1;
	__u32 zero = 0;
	struct tls_scratch *s = bpf_map_lookup_elem(&tls_scratch_map, &zero);
	if (!s)
		return 1;
	struct fr_tls *r = (struct fr_tls *)s->buf;
	__u64 len = t->total - off;
	if (len > t->chunk)
		len = t->chunk;
	if (off + len > t->cap)
		len = t->cap - off;
	__u32 flags = t->call.flags;
	len &= CHUNK_MASK;
	if (len > FR_TLS_CHUNK_MAX)
		len = FR_TLS_CHUNK_MAX;
	if (bpf_probe_read_user(r->data, len, (const void *)(t->call.buf + off))) {
		flags |= FR_TLS_FAULT;
		len = 0;
	}
	__u32 size = sizeof(*r) + (__u32)len;
	fr_fill_header(&r->h, FR_REC_TLS, size, t->call.session);
	r->ssl = t->call.ssl;
	r->enter_ns = t->call.enter_ns;
	r->fd = t->call.fd;
	r->func = t->call.func;
	r->call_bytes = (__u32)t->total;
	r->offset = (__u32)off;
	r->len = (__u32)len;
	r->flags = flags;
	if (size <= sizeof(s->buf))
		fr_output(r, size);
	return 0;
}

/* One return program for every function: uretprobes on the C libraries',
 * uprobes on Go's RET instructions (the cookie says which). */
SEC("uretprobe")
int BPF_KRETPROBE(fr_ssl_ret, long ret)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct tls_chunks t = {};
	bool done = (cookie & FR_TLS_COOKIE_GO) ? go_return(ctx, &t.call, &t.total)
						: c_return(ret, &t.call, &t.total);
	if (!done || t.total == 0)
		return 0;
	emit_chunks(&t);
	return 0;
}

/* One entry program for every function. OpenSSL's _ex variants hand the
 * length back through their fourth argument. gnutls_record_send
 * tail-calls gnutls_record_send2: the inner entry replaces the outer's
 * note with the same buffer, and the outer return then finds none, so a
 * call is recorded once. */
SEC("uprobe")
int BPF_KPROBE(fr_ssl_enter, void *ssl, const void *buf, __u64 num, __u64 *len_out)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 func = (__u32)cookie & 0xff;
	bool go = cookie & FR_TLS_COOKIE_GO;
	if (func > FR_TLS_FUNC_LAST)
		return 0;
	if (!go && (func == FR_TLS_NSPR_READ || func == FR_TLS_NSPR_WRITE)) {
		/* NSPR's calls serve every kind of PRFileDesc; plaintext passes
		 * through a layered one (NSS's SSL layer is pushed on top of the
		 * socket's), never through NSPR's own (identity 0: files, pipes,
		 * bare sockets). The identity follows methods, secret, lower,
		 * higher and dtor (prio.h). */
		__s32 identity = 0;
		if (bpf_probe_read_user(&identity, sizeof(identity), (const char *)ssl + 40) || identity <= 0)
			return 0;
	}
	/* Once, for all stacks: the session lookup is most of what the
	 * verifier walks here. An AEAD's program is noted as probed only at
	 * a TLS record (aead_enter): programs use AEADs for more than TLS. */
	__u32 session = tls_session_noting_probed(func < FR_TLS_AEAD_SEAL);
	if (!session)
		return 0;
	if (go)
		return go_enter(ctx, func, session);
	if (func >= FR_TLS_AEAD_SEAL)
		return aead_enter(ctx, func, session);
	bool ex = func == FR_TLS_SSL_READ_EX || func == FR_TLS_SSL_WRITE_EX;
	return c_enter(ssl, buf, ex ? len_out : 0, func, session);
}
