/* TLS plaintext: uprobes on OpenSSL's SSL_write/SSL_read and their _ex
 * forms, and on GnuTLS's gnutls_record_send/recv (and _send2/_recv_seq,
 * which take the same first three arguments). Entry probes remember the
 * buffer; return probes read what was actually written or read, in chunks,
 * for the session's tasks only. The socket fd is learned from the
 * read/write syscall the call makes (syscalls.bpf.c). Userspace attaches
 * these per library file. BPF_KPROBE is libbpf 1.1's argument accessor for
 * uprobes too. */
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

static __always_inline int tls_enter(void *ssl, const void *buf, __u64 *len_ptr, __u32 func)
{
	if (!fr_tls_enabled)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 session = fr_task_session(task);
	if (!session)
		return 0;
	/* The program uses a probed library (syscalls.bpf.c: TLS hellos);
	 * until it execs. */
	struct fr_task_state *lead = bpf_task_storage_get(&fr_tasks, task->group_leader, 0, 0);
	if (lead && !lead->tls_probed)
		lead->tls_probed = 1;
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
		fr_count_drop();
	return 0;
}

static __always_inline int tls_exit(long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct fr_tls_call *call = bpf_map_lookup_elem(&fr_tls_calls, &tid);
	if (!call)
		return 0;
	if (call->nested) {  /* the return of a handshake inside this call */
		call->nested--;
		return 0;
	}
	struct fr_tls_call c = *call;
	bpf_map_delete_elem(&fr_tls_calls, &tid);
	if (c.func == FR_TLS_HANDSHAKE)
		return 0;

	__u64 total = 0;
	int iret = (int)ret;  /* OpenSSL's return int, GnuTLS's ssize_t */
	if (c.func == FR_TLS_GNUTLS_RECV || c.func == FR_TLS_GNUTLS_SEND) {
		if (ret <= 0)
			return 0;
		total = ret;
	} else if (c.func == FR_TLS_SSL_READ || c.func == FR_TLS_SSL_WRITE) {
		if (iret <= 0)
			return 0;
		total = iret;
	} else {
		if (iret != 1 || !c.len_ptr)
			return 0;
		if (bpf_probe_read_user(&total, sizeof(total), (const void *)c.len_ptr))
			return 0;
	}
	if (total == 0)
		return 0;
	if (total > 0xffffffffULL)
		total = 0xffffffffULL;

	__u32 zero = 0;
	struct tls_scratch *s = bpf_map_lookup_elem(&tls_scratch_map, &zero);
	if (!s)
		return 0;
	struct fr_tls *r = (struct fr_tls *)s->buf;
	__u64 chunk = fr_tls_chunk;
	__u64 cap = fr_tls_cap;
	if (chunk > FR_TLS_CHUNK_MAX)
		chunk = FR_TLS_CHUNK_MAX;
	for (__u32 i = 0; i < FR_TLS_CHUNKS_MAX; i++) {
		__u64 off = (__u64)i * chunk;
		if (off >= total || off >= cap)
			break;
		__u64 len = total - off;
		if (len > chunk)
			len = chunk;
		if (off + len > cap)
			len = cap - off;
		__u32 flags = 0;
		len &= CHUNK_MASK;
		if (len > FR_TLS_CHUNK_MAX)
			len = FR_TLS_CHUNK_MAX;
		if (bpf_probe_read_user(r->data, len, (const void *)(c.buf + off))) {
			flags |= FR_TLS_FAULT;
			len = 0;
		}
		__u32 size = sizeof(*r) + (__u32)len;
		fr_fill_header(&r->h, FR_REC_TLS, size, c.session);
		r->ssl = c.ssl;
		r->enter_ns = c.enter_ns;
		r->fd = c.fd;
		r->func = c.func;
		r->call_bytes = (__u32)total;
		r->offset = (__u32)off;
		r->len = (__u32)len;
		r->flags = flags;
		if (size <= sizeof(s->buf))
			fr_output(r, size);
	}
	return 0;
}

/* One return probe for all the functions: the entry probe noted which
 * call it was. One program, so the verifier walks the chunk loop once. */
SEC("uretprobe")
int BPF_KRETPROBE(fr_ssl_ret, long ret)
{
	return tls_exit(ret);
}

/* One entry probe for all the functions, told apart by the attach cookie
 * (enum fr_tls_func): one program to verify, and where the kernel has
 * uprobe_multi, one link per library for all of them, removed with one
 * wait instead of one per probe. OpenSSL's _ex variants hand the length
 * back through their fourth argument. gnutls_record_send tail-calls
 * gnutls_record_send2: the inner entry replaces the outer's note with the
 * same buffer, and the outer return then finds none, so a call is
 * recorded once. */
SEC("uprobe")
int BPF_KPROBE(fr_ssl_enter, void *ssl, const void *buf, __u64 num, __u64 *len_out)
{
	__u32 func = (__u32)bpf_get_attach_cookie(ctx);
	if (func > FR_TLS_HANDSHAKE)
		return 0;
	bool ex = func == FR_TLS_SSL_READ_EX || func == FR_TLS_SSL_WRITE_EX;
	return tls_enter(ssl, buf, ex ? len_out : 0, func);
}
