/* Egress allowlist for confined sessions: cgroup programs on the session's
 * cgroup (they load on kernels that refuse BPF-LSM). Loaded only when the
 * policy has an allowlist. In allowlist mode the sandbox shares the host's
 * network stack, so every way a packet leaves or arrives is covered:
 * - sock_addr: connect() and unconnected UDP sendmsg() to an address:port
 *   not on the list fail with EPERM (a connect granted at run time, see
 *   fr_egress_tickets, or to an address an allowed name was answered with,
 *   see fr_egress_named, goes on), and so does bind() to anything but
 *   loopback (or the unspecified address with port 0, a client's idiom);
 * - sock_create: only TCP and UDP sockets, the ones those hooks see (an
 *   unprivileged ICMP "ping" socket sends data past connect/sendmsg hooks);
 * - cgroup_skb: every packet out must go to loopback or the allowlist, every
 *   packet in must come from there (a listener autobound by listen() or bound
 *   to 0.0.0.0 takes nothing from elsewhere); what is dropped is counted in
 *   fr_net_drops and turned into violations by userspace;
 * - server names (network.sni): a TCP connection connect() let through by
 *   name alone is marked (fr_egress_conns); its first payload must name a
 *   server (TLS server_name, HTTP Host) the resolver answered with that
 *   address for that port (fr_egress_names), or the connection is cut
 *   before the payload leaves: its packets are dropped and userspace, told
 *   on fr_sni_cuts, aborts the socket. A first payload that passed is read
 *   again if it is sent again, until the server ACKs it. UDP to such an
 *   address is refused (QUIC's names are encrypted).
 * Refused syscalls carry their addresses in the record and the policy judge
 * names the rule. */
#include "lib/egress.bpf.h"
#include <bpf/bpf_endian.h>

/* include/linux/socket.h, include/uapi/linux/if_ether.h, include/linux/net.h */
#define FR_AF_INET 2
#define FR_AF_INET6 10
#define FR_ETH_P_IP 0x0800
#define FR_ETH_P_IPV6 0x86DD
#define FR_SOCK_STREAM 1
#define FR_SOCK_DGRAM 2
#define FR_IP_OFFSET 0x1fff /* include/net/ip.h: fragment offset bits */
#define FR_TCP_SYN 0x02     /* include/net/tcp.h: TCPHDR_* */
#define FR_TCP_ACK 0x10
#define FR_TCP_URG 0x20

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FR_NET_DROP_KINDS);
	__type(key, __u32);
	__type(value, struct fr_net_drop);
} fr_net_drops SEC(".maps");

const volatile __u32 fr_egress_sni_mode = FR_SNI_OFF;  /* fr_sni_mode */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, FR_EGRESS_NAMES_MAX);
	__type(key, struct fr_egress_name);
	__type(value, __u8);
} fr_egress_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct fr_egress_conn);
} fr_egress_conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} fr_sni_cuts SEC(".maps");

#define FR_HTTP_SCAN 4096  /* bytes of an HTTP/1 request searched for Host (a power of 2) */

/* The HTTP/1 search's state, shared by its bpf_loop steps (each verified
 * once, not once per byte). Positions index the copy (sc->http). */
struct http_scan {
	__u32 n;       /* bytes copied */
	__u32 from;    /* where this search starts */
	__u32 at;      /* found: the request line's end ('\n'); Host's field */
	__u32 skip;    /* white space before the Host's name */
	__u32 len;     /* and its length */
	__u32 phase;   /* host_value_step's */
	int result;    /* 1: found, 0: not there (the headers ended), -1: not HTTP, -2: cut */
};

/* A name's check, byte by byte (name_step). */
struct name_check {
	__u32 len;
	__u32 letters, bad;
};

/* Scratch for the name looked up and the request searched: too big for
 * the stack. The bpf_loop steps keep their state here too, not on the
 * stack: 6.1's verifier checks a callback as if it ran once, from the
 * state it was first called in, and would take a value the steps change
 * from one call to the next (on the stack it follows them) for a constant,
 * and prune what follows as dead. It does not follow map memory. */
struct fr_name_scratch {
	struct fr_egress_name n;
	__u8 http[FR_HTTP_SCAN];
	struct http_scan scan;
	struct name_check check;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fr_name_scratch);
} fr_name_scratch SEC(".maps");

static __always_inline void addr4(struct bpf_sock_addr *ctx, __u8 *addr)
{
	__u32 ip = ctx->user_ip4;
	__builtin_memcpy(addr, &ip, 4);
}

static __always_inline void addr6(struct bpf_sock_addr *ctx, __u8 *addr)
{
	__u32 w0 = ctx->user_ip6[0], w1 = ctx->user_ip6[1], w2 = ctx->user_ip6[2], w3 = ctx->user_ip6[3];
	__builtin_memcpy(addr, &w0, 4);
	__builtin_memcpy(addr + 4, &w1, 4);
	__builtin_memcpy(addr + 8, &w2, 4);
	__builtin_memcpy(addr + 12, &w3, 4);
}

/* A connect or send to family/addr/port: on the allowlist, or admitted by
 * an allowed name's answer. By name alone (and network.sni not off), a TCP
 * socket is marked for its server name to be checked, and a UDP one is
 * refused (QUIC's names are encrypted). */
static __always_inline int judge(struct bpf_sock_addr *ctx, __u32 family, const __u8 *addr, __u16 port, int connect)
{
	int stream = ctx->type == FR_SOCK_STREAM && fr_egress_sni_mode != FR_SNI_OFF;
	struct bpf_sock *sk = ctx->sk;
	int allowed = fr_egress_allowed(family, addr, port);
	int named = !allowed && fr_egress_named_ok(family, addr, port, 1);
	if (allowed || (!named && connect && fr_egress_ticket(family, addr, port, 1))) {
		/* A socket connected again (after AF_UNSPEC) starts afresh. */
		struct fr_egress_conn *c = stream && sk ? bpf_sk_storage_get(&fr_egress_conns, sk, 0, 0) : 0;
		if (c)
			c->state = FR_CONN_UNCHECKED;
		return 1;
	}
	if (!named)
		return 0;
	if (fr_egress_sni_mode == FR_SNI_OFF)
		return 1;
	if (ctx->type != FR_SOCK_STREAM)
		return 0;  /* UDP (QUIC: its server name encrypted) could name any server there */
	struct fr_egress_conn *c = sk ? bpf_sk_storage_get(&fr_egress_conns, sk, 0, BPF_SK_STORAGE_GET_F_CREATE) : 0;
	if (!c)
		return 0;  /* by name, unchecked, is not let through */
	c->tgid = bpf_get_current_pid_tgid() >> 32;
	c->state = FR_CONN_PENDING;
	c->reported = 0;
	return 1;
}

/* A connect: on the allowlist, admitted by name, or granted to this thread
 * for this address (the kernel's copy) a moment ago by the grant supervisor. */
SEC("cgroup/connect4")
int fr_egress_connect4(struct bpf_sock_addr *ctx)
{
	__u8 addr[16] = {};
	addr4(ctx, addr);
	return judge(ctx, FR_AF_INET, addr, bpf_ntohs((__u16)ctx->user_port), 1);
}

SEC("cgroup/connect6")
int fr_egress_connect6(struct bpf_sock_addr *ctx)
{
	__u8 addr[16];
	addr6(ctx, addr);
	return judge(ctx, FR_AF_INET6, addr, bpf_ntohs((__u16)ctx->user_port), 1);
}

SEC("cgroup/sendmsg4")
int fr_egress_sendmsg4(struct bpf_sock_addr *ctx)
{
	__u8 addr[16] = {};
	addr4(ctx, addr);
	return judge(ctx, FR_AF_INET, addr, bpf_ntohs((__u16)ctx->user_port), 0);
}

SEC("cgroup/sendmsg6")
int fr_egress_sendmsg6(struct bpf_sock_addr *ctx)
{
	__u8 addr[16];
	addr6(ctx, addr);
	return judge(ctx, FR_AF_INET6, addr, bpf_ntohs((__u16)ctx->user_port), 0);
}

/* Binding: loopback, or the unspecified address with port 0 (a client
 * picking its own port; the skb programs keep strangers from reaching it). */
SEC("cgroup/bind4")
int fr_egress_bind4(struct bpf_sock_addr *ctx)
{
	__u32 ip = bpf_ntohl(ctx->user_ip4);
	return (ip >> 24) == 127 || (ip == 0 && ctx->user_port == 0);
}

SEC("cgroup/bind6")
int fr_egress_bind6(struct bpf_sock_addr *ctx)
{
	__u32 w0 = ctx->user_ip6[0], w1 = ctx->user_ip6[1], w2 = ctx->user_ip6[2], w3 = ctx->user_ip6[3];
	int loopback = w0 == 0 && w1 == 0 && ((w2 == 0 && w3 == bpf_htonl(1)) ||
					      (w2 == bpf_htonl(0xffff) && (bpf_ntohl(w3) >> 24) == 127));
	int any = w0 == 0 && w1 == 0 && w2 == 0 && w3 == 0;
	return loopback || (any && ctx->user_port == 0);
}

SEC("cgroup/sock_create")
int fr_egress_sock_create(struct bpf_sock *sk)
{
	if (sk->family != FR_AF_INET && sk->family != FR_AF_INET6)
		return 1;
	return (sk->type == FR_SOCK_STREAM && sk->protocol == IPPROTO_TCP) ||
	       (sk->type == FR_SOCK_DGRAM && sk->protocol == IPPROTO_UDP);
}

static __always_inline int is_loopback(__u32 family, const __u8 *a)
{
	if (family == FR_AF_INET)
		return a[0] == 127;
	__u32 w[4];
	__builtin_memcpy(w, a, 16);
	if (w[0] || w[1])
		return 0;
	return (w[2] == 0 && w[3] == bpf_htonl(1)) || (w[2] == bpf_htonl(0xffff) && a[12] == 127);
}

/* The far end of a packet (source in, destination out): address, and the
 * port for TCP and UDP (0 otherwise). Returns the family, 0 if not IP. */
static __always_inline __u32 far_end(struct __sk_buff *skb, int in, __u8 *addr, __u16 *port)
{
	__u16 ports[2];
	*port = 0;
	if (skb->protocol == bpf_htons(FR_ETH_P_IP)) {
		struct iphdr ip;
		if (bpf_skb_load_bytes(skb, 0, &ip, sizeof(ip)))
			return FR_AF_INET;  /* unreadable: no port, judged by address 0 */
		__builtin_memcpy(addr, in ? &ip.saddr : &ip.daddr, 4);
		if ((ip.protocol == IPPROTO_TCP || ip.protocol == IPPROTO_UDP) &&
		    !(ip.frag_off & bpf_htons(FR_IP_OFFSET)) &&
		    !bpf_skb_load_bytes(skb, (__u32)ip.ihl * 4, ports, sizeof(ports)))
			*port = bpf_ntohs(in ? ports[0] : ports[1]);
		return FR_AF_INET;
	}
	if (skb->protocol == bpf_htons(FR_ETH_P_IPV6)) {
		struct ipv6hdr ip6;
		if (bpf_skb_load_bytes(skb, 0, &ip6, sizeof(ip6)))
			return FR_AF_INET6;
		__builtin_memcpy(addr, in ? (void *)&ip6.saddr : (void *)&ip6.daddr, 16);
		if ((ip6.nexthdr == IPPROTO_TCP || ip6.nexthdr == IPPROTO_UDP) &&
		    !bpf_skb_load_bytes(skb, sizeof(ip6), ports, sizeof(ports)))
			*port = bpf_ntohs(in ? ports[0] : ports[1]);
		return FR_AF_INET6;
	}
	return 0;
}

#define FR_TLS_EXTENSIONS_MAX 64   /* a ClientHello's extensions walked (browsers send ~20) */

/* One byte of a name in the scratch (bpf_loop: verified once, not once
 * per byte and path): lowercased, and checked to be one a name has. */
static long name_step(__u32 index, void *unused)
{
	__u32 zero = 0;
	__u64 i = index;
	asm volatile("%[i] &= 0xff" : [i] "+r"(i));
	struct fr_name_scratch *sc = bpf_map_lookup_elem(&fr_name_scratch, &zero);
	if (!sc)
		return 1;
	struct name_check *check = &sc->check;
	if (i >= check->len)
		return 1;
	__u8 c = sc->n.name[i];
	if (c >= 'A' && c <= 'Z')
		sc->n.name[i] = c + ('a' - 'A');
	else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_')) {
		check->bad = 1;
		return 1;
	}
	if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))
		check->letters = 1;
	return 0;
}

/* The name at off (len bytes of the packet) into n->name: lowercase, no
 * trailing dot, zero-padded. 1: a DNS name; 0: an address literal (an
 * IPv4 address, or "[" an IPv6 one) or nothing, which names no server;
 * -1: bytes no name has, or too long. */
static __always_inline int load_name(struct __sk_buff *skb, __u32 off, __u64 len, struct fr_egress_name *n)
{
	__builtin_memset(n->name, 0, sizeof(n->name));
	if (len == 0)
		return 0;
	if (len > 253)
		return -1;
	/* 1 to 256 in the register used, as any verifier sees it (clang's
	 * zero-extended copy, and 6.1's "!= 0", lose the bounds); len is
	 * already 1 to 253, so it stays what it is. */
	asm volatile("%[l] += -1; %[l] &= 0xff; %[l] += 1" : [l] "+r"(len));
	if (bpf_skb_load_bytes(skb, off, n->name, len))
		return -1;
	if (n->name[0] == '[')
		return 0;
	if (n->name[(len - 1) & 0xff] == '.')
		n->name[--len & 0xff] = 0;
	struct fr_name_scratch *sc = container_of(n, struct fr_name_scratch, n);
	sc->check.len = (__u32)len;
	sc->check.letters = 0;
	sc->check.bad = 0;
	bpf_loop(253, name_step, 0, 0);
	if (sc->check.bad)
		return -1;  /* spaces, control bytes, "\0": what a server might read otherwise */
	return sc->check.letters && len > 0 ? 1 : 0;  /* an IPv4 literal names no server */
}

static __always_inline int be16_at(struct __sk_buff *skb, __u32 off, __u32 *v)
{
	__u8 b[2];
	if (bpf_skb_load_bytes(skb, off, b, 2))
		return -1;
	*v = ((__u32)b[0] << 8) | b[1];
	return 0;
}

/* A TLS record at off, the first of the connection: 1 and its
 * ClientHello's server_name (offset and length), 0 if the hello has none,
 * -2 if it is not a whole ClientHello within this first record and this
 * segment (a hello in pieces, another record first, malformed): what the
 * server reads next could name anything. Reads stay inside the record, as
 * a server's do, never across record headers. */
static __always_inline int tls_server_name(struct __sk_buff *skb, __u32 off, __u32 *name_off, __u32 *name_len)
{
	__u8 h[11];  /* record header (5), handshake header (4), client_version (2) */
	if (bpf_skb_load_bytes(skb, off, h, sizeof(h)))
		return -2;
	if (h[0] != 22 || h[1] != 3 || h[5] != 1 || h[6] != 0)  /* handshake record, ClientHello, < 64 KiB */
		return -2;
	__u32 record = ((__u32)h[3] << 8) | h[4], hello = ((__u32)h[7] << 8) | h[8];
	__u32 end = off + 5 + record;
	if (4 + hello != record || end > skb->len)
		return -2;  /* the hello shares its record, or goes on in another one, or in a later segment */
	__u32 p = off + 11 + 32;  /* past the random */
	__u32 v;
	__u8 sid;
	if (bpf_skb_load_bytes(skb, p, &sid, 1) || sid > 32)
		return -2;
	p += 1 + sid;
	if (be16_at(skb, p, &v))  /* cipher_suites */
		return -2;
	p += 2 + v;
	__u8 comp;
	if (p >= end || bpf_skb_load_bytes(skb, p, &comp, 1))
		return -2;
	p += 1 + comp;
	if (p == end)
		return 0;  /* no extensions at all */
	if (p + 2 > end || be16_at(skb, p, &v))
		return -2;
	p += 2;
	if (p + v != end)
		return -2;
	for (int i = 0; i < FR_TLS_EXTENSIONS_MAX; i++) {
		if (p == end)
			return 0;
		__u8 e[4];
		if (p + 4 > end || bpf_skb_load_bytes(skb, p, e, 4))
			return -2;
		__u32 type = ((__u32)e[0] << 8) | e[1], len = ((__u32)e[2] << 8) | e[3];
		if (p + 4 + len > end)
			return -2;
		if (type == 0) {  /* server_name: list length (2), type host_name (1), length (2), name: exactly one */
			__u8 sn[5];
			if (len < 5 || bpf_skb_load_bytes(skb, p + 4, sn, 5) || sn[2] != 0)
				return -2;
			__u32 list = ((__u32)sn[0] << 8) | sn[1];
			*name_len = ((__u32)sn[3] << 8) | sn[4];
			*name_off = p + 9;
			return list + 2 == len && *name_len + 3 == list ? 1 : -2;
		}
		p += 4 + len;
	}
	return -2;
}

/* A character of an HTTP token (a method): RFC 9110's tchar. */
static __always_inline int tchar(__u8 c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '!' ||
	       (c >= '#' && c <= '\'') || c == '*' || c == '+' || c == '-' || c == '.' || c == '^' || c == '_' ||
	       c == '`' || c == '|' || c == '~';
}

static __always_inline struct fr_name_scratch *name_scratch(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&fr_name_scratch, &zero);
}

/* The request line: printable ASCII up to its CRLF. A line that goes on
 * past the copy could still be a request's: cut. */
static long request_line_step(__u32 index, void *unused)
{
	struct fr_name_scratch *sc = name_scratch();
	if (!sc)
		return 1;
	struct http_scan *scan = &sc->scan;
	const __u8 *b = sc->http;
	__u64 i = index;
	asm volatile("%[i] &= %[m]" : [i] "+r"(i) : [m] "i"(FR_HTTP_SCAN - 1));
	if (i >= scan->n || i > FR_HTTP_SCAN - 2)
		return 1;  /* result stays -2 */
	__u8 c = b[i];
	if (c == '\r' && i + 1 >= scan->n)
		return 1;  /* its LF may come in the next segment: -2 */
	if (c == '\r') {
		scan->result = b[i + 1] == '\n' ? 1 : -2;  /* a bare CR: cut */
		scan->at = i + 1;
		return 1;
	}
	if (c == '\n') {
		scan->result = 2;  /* a bare LF: the caller looks at the line */
		scan->at = i;
		return 1;
	}
	if (c == '\t') {
		scan->result = -2;  /* what some servers read as a request line's space */
		return 1;
	}
	if (c < 0x20 || c > 0x7e) {
		scan->result = -1;  /* binary: no request line */
		return 1;
	}
	return 0;
}

/* The headers, from scan->from: a Host field (once), up to the blank line,
 * which must be in the copy (a second Host could follow in the next
 * segment). Whatever a server might split into lines otherwise (a bare CR
 * or LF, a NUL, a folded line) is cut. */
static long header_step(__u32 index, void *unused)
{
	struct fr_name_scratch *sc = name_scratch();
	if (!sc)
		return 1;
	struct http_scan *scan = &sc->scan;
	const __u8 *b = sc->http;
	__u64 i = scan->from + index;
	asm volatile("%[i] &= %[m]" : [i] "+r"(i) : [m] "i"(FR_HTTP_SCAN - 1));
	if (i + 4 > scan->n || i > FR_HTTP_SCAN - 8)
		return 1;  /* result stays -2 */
	__u8 c = b[i];
	if (c == 0 || (c == '\n' && (i == 0 || b[i - 1] != '\r')) || (c == '\r' && b[i + 1] != '\n')) {
		scan->result = -2;
		return 1;
	}
	if (c != '\r')
		return 0;
	if (b[i + 2] == ' ' || b[i + 2] == '\t') {
		scan->result = -2;  /* obs-fold: a line that goes on the one before */
		return 1;
	}
	if (b[i + 2] == '\r' && b[i + 3] == '\n') {
		scan->result = scan->at ? 1 : 0;  /* the end of the headers */
		return 1;
	}
	if (i + 7 <= scan->n && b[i + 6] == ':' && (b[i + 2] | 0x20) == 'h' && (b[i + 3] | 0x20) == 'o' &&
	    (b[i + 4] | 0x20) == 's' && (b[i + 5] | 0x20) == 't') {
		if (scan->at) {
			scan->result = -2;  /* a second Host: which one would the server take? */
			return 1;
		}
		scan->at = i + 7;
	}
	return 0;
}

/* One step along a Host header's field from scan->at to the line's end
 * (bpf_loop): white space, the name (skip, len), ":" and a port's digits,
 * white space. Anything else there, and a server might read another name. */
static long host_value_step(__u32 index, void *unused)
{
	struct fr_name_scratch *sc = name_scratch();
	if (!sc)
		return 1;
	struct http_scan *scan = &sc->scan;
	const __u8 *b = sc->http;
	__u64 p = scan->at + index;
	if (p >= scan->n)
		return 1;  /* result stays -2: the line goes on past the copy */
	asm volatile("%[p] &= %[m]" : [p] "+r"(p) : [m] "i"(FR_HTTP_SCAN - 1));
	__u8 c = b[p];
	int space = c == ' ' || c == '\t';
	if (c == '\r') {
		scan->result = 1;
		return 1;
	}
	switch (scan->phase) {
	case 0:  /* white space before the name */
		if (space) {
			scan->skip++;
			return 0;
		}
		scan->phase = 1;
		/* fall through */
	case 1:  /* the name */
		if (c == ':')
			scan->phase = 2;
		else if (space)
			scan->phase = 3;
		else
			scan->len++;
		return 0;
	case 2:  /* the port */
		if (c >= '0' && c <= '9')
			return 0;
		if (space) {
			scan->phase = 3;
			return 0;
		}
		return 1;
	default:  /* white space after it */
		return space ? 0 : 1;
	}
}

/* A payload at off that may be an HTTP/1 request (it starts with a token
 * character): 1 and its Host's name (port left out), 0 if its headers end
 * without one, -1 if its first line is no HTTP/1.0 or 1.1 request line,
 * -2 to cut: a request in absolute or authority form (to a proxy: the
 * server takes the name from there, not Host), HTTP/2's preface, lines a
 * server might split otherwise, a second Host, a start that goes on past
 * the copy. */
static __always_inline int http_host(struct __sk_buff *skb, __u32 off, struct fr_name_scratch *sc,
				     __u32 *name_off, __u32 *name_len)
{
	__u64 n = skb->len > off ? skb->len - off : 0;
	if (n > FR_HTTP_SCAN)
		n = FR_HTTP_SCAN;
	if (n < 1)
		return -2;
	/* 1 to FR_HTTP_SCAN in the register used, as 6.1's verifier sees it too (as in load_name). */
	asm volatile("%[n] += -1; %[n] &= %[m]; %[n] += 1" : [n] "+r"(n) : [m] "i"(FR_HTTP_SCAN - 1));
	if (bpf_skb_load_bytes(skb, off, sc->http, n))
		return -2;
	const __u8 *b = sc->http;
	/* A method (a token of up to 23 characters), then a space: else no
	 * request, unless the payload ends first (a request's start, maybe). */
	int target = 0;
	for (int i = 1; i < 24; i++) {
		if (i >= n)
			return -2;
		if (b[i] == ' ') {
			target = i + 1;
			break;
		}
		if (!tchar(b[i]))
			return -1;
	}
	if (!target)
		return -1;
	struct http_scan *scan = &sc->scan;
	__builtin_memset(scan, 0, sizeof(*scan));
	scan->n = (__u32)n;
	scan->result = -2;
	bpf_loop(FR_HTTP_SCAN, request_line_step, 0, 0);
	int line = scan->result;
	if (line != 1 && line != 2)
		return line;
	/* "METHOD TARGET HTTP/1.x": the version at the line's end, the target after the first space. */
	__u32 end = scan->at;  /* its '\n' */
	if (end < 12 || end >= FR_HTTP_SCAN)
		return -1;
	__u32 v = end - (line == 1 ? 10 : 9);  /* " HTTP/1.x" before "\r\n", or a bare "\n" */
	if (b[v & (FR_HTTP_SCAN - 1)] != ' ' || b[(v + 1) & (FR_HTTP_SCAN - 1)] != 'H' ||
	    b[(v + 2) & (FR_HTTP_SCAN - 1)] != 'T' || b[(v + 3) & (FR_HTTP_SCAN - 1)] != 'T' ||
	    b[(v + 4) & (FR_HTTP_SCAN - 1)] != 'P' || b[(v + 5) & (FR_HTTP_SCAN - 1)] != '/')
		return -1;
	if (line == 2 || b[(v + 6) & (FR_HTTP_SCAN - 1)] != '1' || b[(v + 7) & (FR_HTTP_SCAN - 1)] != '.' ||
	    (b[(v + 8) & (FR_HTTP_SCAN - 1)] != '0' && b[(v + 8) & (FR_HTTP_SCAN - 1)] != '1'))
		return -2;  /* a request line ended by a bare LF, HTTP/2's preface ("PRI * HTTP/2.0"), another version */
	if (b[target] != '/' && b[target] != '*')
		return -2;
	scan->from = end - 1;
	scan->at = 0;
	scan->result = -2;
	bpf_loop(FR_HTTP_SCAN, header_step, 0, 0);
	if (scan->result <= 0)
		return scan->result;
	/* The field: white space, the name, a port, white space. */
	scan->result = -2;
	bpf_loop(256 + 8, host_value_step, 0, 0);
	if (scan->result != 1)
		return -2;
	*name_off = off + scan->at + scan->skip;
	*name_len = scan->len;
	return 1;
}

static __always_inline void report_cut(struct __sk_buff *skb, struct fr_egress_conn *c, __u8 reason, __u8 proto,
					const struct fr_egress_name *n, __u32 family, const __u8 *addr, __u16 port)
{
	c->reason = reason;
	c->proto = proto;
	struct fr_sni_cut *e = bpf_ringbuf_reserve(&fr_sni_cuts, sizeof(*e), 0);
	if (!e)
		return;  /* told with the next packet (a retransmit) */
	e->cookie = bpf_get_socket_cookie(skb);
	e->tgid = c->tgid;
	e->family = family;
	__builtin_memcpy(e->addr, addr, 16);
	e->port = port;
	e->reason = reason;
	e->proto = proto;
	e->name_len = 0;
	/* The socket's own end: the packet's source address and port. */
	__builtin_memset(e->local_addr, 0, 16);
	e->local_port = 0;
	__u8 ihl = 0;
	__u16 sport = 0;
	if (family == FR_AF_INET) {
		if (!bpf_skb_load_bytes(skb, 0, &ihl, 1) && !bpf_skb_load_bytes(skb, 12, e->local_addr, 4) &&
		    !bpf_skb_load_bytes(skb, (ihl & 0xf) * 4, &sport, 2))
			e->local_port = bpf_ntohs(sport);
	} else if (!bpf_skb_load_bytes(skb, 8, e->local_addr, 16) && !bpf_skb_load_bytes(skb, 40, &sport, 2)) {
		e->local_port = bpf_ntohs(sport);
	}
	__builtin_memset(e->name, 0, sizeof(e->name));
	if (n) {
		__builtin_memcpy(e->name, n->name, sizeof(e->name));
		for (int i = 0; i < 253; i++)
			if (!e->name[i]) {
				e->name_len = i;
				break;
			}
	}
	bpf_ringbuf_submit(e, 0);
	c->reported = 1;
}

/* A packet out of a socket whose connect was let through by name alone
 * (fr_egress_conns): 1 to pass, 0 to drop. Without payload it passes; the
 * first payload decides: a server name answered with this address, or
 * none (network.sni's choice), passes, and so does every later packet
 * but a resending of that payload, read again (note_ack takes the mark
 * off once it is ACKed); a name that was not, or what cannot be read
 * whole, is cut: this and every later packet dropped. Urgent data, which
 * a server takes out of the stream the program reads, is cut too. */
static __always_inline int server_name_ok(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	if (!sk || !(sk = bpf_sk_fullsock(sk)))
		return 1;
	struct fr_egress_conn *c = bpf_sk_storage_get(&fr_egress_conns, sk, 0, 0);
	if (!c || c->state == FR_CONN_UNCHECKED)
		return 1;
	__u8 addr[16] = {};
	__u16 port;
	__u32 family = far_end(skb, 0, addr, &port);
	if (c->state == FR_CONN_CUT) {
		if (!c->reported)  /* the ring was full: told now, without the name */
			report_cut(skb, c, c->reason, c->proto, 0, family, addr, port);
		return 0;
	}
	__u32 tcp;  /* where the TCP header starts */
	if (family == FR_AF_INET) {
		__u8 vihl;
		if (bpf_skb_load_bytes(skb, 0, &vihl, 1))
			goto unreadable;
		tcp = (vihl & 0xf) * 4;
	} else {
		__u8 next;
		if (bpf_skb_load_bytes(skb, 6, &next, 1) || next != IPPROTO_TCP)
			goto unreadable;  /* extension headers: not what a TCP socket of ours sends */
		tcp = 40;
	}
	__u8 th[14];  /* ports, sequence number, ack number, data offset, flags */
	if (bpf_skb_load_bytes(skb, tcp, th, sizeof(th)))
		goto unreadable;
	if (th[13] & FR_TCP_URG)
		goto unreadable;  /* urgent data: a server takes a byte out of the stream the program reads */
	__u32 payload = tcp + (th[12] >> 4) * 4;
	if (payload >= skb->len)
		return 1;  /* the handshake, an ACK, a FIN */
	__u32 seq = ((__u32)th[4] << 24 | (__u32)th[5] << 16 | (__u32)th[6] << 8 | th[7]) + !!(th[13] & FR_TCP_SYN);
	if (c->state == FR_CONN_PASSED) {
		if ((__s32)(seq - c->seq_end) >= 0)
			return 1;  /* past what was read */
		if (seq != c->seq_start)
			goto unreadable;  /* a piece of it sent again: read whole, or not at all */
	}

	__u32 zero = 0, name_off = 0, name_len = 0;
	struct fr_name_scratch *sc = bpf_map_lookup_elem(&fr_name_scratch, &zero);
	if (!sc)
		goto unreadable;
	struct fr_egress_name *n = &sc->n;
	/* What the first payload is, by its first bytes: a TLS record, a
	 * request line (a token's character first), or another protocol. */
	__u8 proto = FR_SNI_OTHER;
	__u8 first[2] = {};
	if (bpf_skb_load_bytes(skb, payload, first, skb->len - payload >= 2 ? 2 : 1))
		goto unreadable;
	__u8 b0 = first[0];
	if (b0 >= 20 && b0 <= 23 && (skb->len - payload < 2 || first[1] == 3))
		proto = FR_SNI_TLS;  /* it must be the whole ClientHello */
	else if (b0 == '\r' || b0 == '\n' || tchar(b0))
		proto = FR_SNI_HTTP;  /* a blank line first (servers skip it) is read as one, and cut */
	int found = 0;
	if (proto == FR_SNI_TLS) {
		found = tls_server_name(skb, payload, &name_off, &name_len);
	} else if (proto == FR_SNI_HTTP) {
		found = b0 == '\r' || b0 == '\n' ? -2 : http_host(skb, payload, sc, &name_off, &name_len);
		if (found == -1) {
			proto = FR_SNI_OTHER;  /* no request line: another protocol */
			found = 0;
		}
	}
	if (found == 1) {
		found = load_name(skb, name_off, name_len, n);
		if (found == 0 && proto == FR_SNI_TLS)
			found = -2;  /* a server name that is an address, or empty: TLS has none such */
		else if (found < 0)
			found = -2;
	}
	if (found == -2) {
		report_cut(skb, c, FR_SNI_UNREADABLE, proto, 0, family, addr, port);
		goto cut;
	}
	if (found == 0) {
		if (fr_egress_sni_mode != FR_SNI_REQUIRED)
			goto passed;
		report_cut(skb, c, FR_SNI_MISSING, proto, 0, family, addr, port);
		goto cut;
	}
	struct fr_egress_endpoint e = {};
	fr_endpoint(&e, family, addr, port);
	__builtin_memcpy(n->addr, e.addr, 16);
	n->family = e.family;
	n->port = port;
	n->pad = 0;
	if (bpf_map_lookup_elem(&fr_egress_names, n))
		goto passed;
	n->port = 0;  /* a rule for any port */
	if (port != 53 && port != 853 && bpf_map_lookup_elem(&fr_egress_names, n))
		goto passed;
	report_cut(skb, c, FR_SNI_MISMATCH, proto, n, family, addr, port);
	goto cut;
passed:
	/* Until the server has ACKed it, what was read may be sent again
	 * (retransmitted, its pages rewritten under sendfile or zerocopy):
	 * read again then. */
	if (c->state == FR_CONN_PENDING) {
		c->seq_start = seq;
		c->seq_end = seq + (skb->len - payload);
		c->state = FR_CONN_PASSED;
	}
	return 1;
cut:
	c->state = FR_CONN_CUT;
	return 0;
unreadable:
	report_cut(skb, c, FR_SNI_UNREADABLE, FR_SNI_OTHER, 0, family, addr, port);
	c->state = FR_CONN_CUT;
	return 0;
}

/* A packet in: an ACK of all a checked connection's first payload ends
 * its checks (the mark goes: no cost per packet from then on). */
static __always_inline void note_ack(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	if (!sk || !(sk = bpf_sk_fullsock(sk)))
		return;
	struct fr_egress_conn *c = bpf_sk_storage_get(&fr_egress_conns, sk, 0, 0);
	if (!c || c->state != FR_CONN_PASSED)
		return;
	__u32 tcp = 40;
	if (skb->protocol == bpf_htons(FR_ETH_P_IP)) {
		__u8 vihl;
		if (bpf_skb_load_bytes(skb, 0, &vihl, 1))
			return;
		tcp = (vihl & 0xf) * 4;
	}
	__u8 th[14];
	if (bpf_skb_load_bytes(skb, tcp, th, sizeof(th)) || !(th[13] & FR_TCP_ACK))
		return;
	__u32 ack = (__u32)th[8] << 24 | (__u32)th[9] << 16 | (__u32)th[10] << 8 | th[11];
	if ((__s32)(ack - c->seq_end) >= 0)
		bpf_sk_storage_delete(&fr_egress_conns, sk);
}

static __always_inline int packet_allowed(struct __sk_buff *skb, __u32 kind)
{
	__u8 addr[16] = {};
	__u16 port;
	if (kind == FR_NET_DROP_OUT && fr_egress_sni_mode != FR_SNI_OFF && !server_name_ok(skb))
		return 0;  /* reported on fr_sni_cuts */
	if (kind == FR_NET_DROP_IN && fr_egress_sni_mode != FR_SNI_OFF)
		note_ack(skb);
	__u32 family = far_end(skb, kind == FR_NET_DROP_IN, addr, &port);

	if (!family || is_loopback(family, addr) || fr_egress_allowed(family, addr, port) ||
	    fr_egress_named_ok(family, addr, port, 0) || fr_egress_was_granted(family, addr, port))
		return 1;
	struct fr_net_drop *d = bpf_map_lookup_elem(&fr_net_drops, &kind);
	if (d) {
		d->count++;
		__builtin_memcpy(d->addr, addr, 16);
		d->family = family;
		d->port = port;
	}
	return 0;
}

SEC("cgroup_skb/egress")
int fr_egress_skb_out(struct __sk_buff *skb) { return packet_allowed(skb, FR_NET_DROP_OUT); }

SEC("cgroup_skb/ingress")
int fr_egress_skb_in(struct __sk_buff *skb) { return packet_allowed(skb, FR_NET_DROP_IN); }
