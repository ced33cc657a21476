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
 *   fr_net_drops and turned into violations by userspace.
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

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FR_NET_DROP_KINDS);
	__type(key, __u32);
	__type(value, struct fr_net_drop);
} fr_net_drops SEC(".maps");

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

static __always_inline int check4(struct bpf_sock_addr *ctx)
{
	__u8 addr[16] = {};
	addr4(ctx, addr);
	__u16 port = bpf_ntohs((__u16)ctx->user_port);
	return fr_egress_allowed(FR_AF_INET, addr, port) || fr_egress_named_ok(FR_AF_INET, addr, port, 1);
}

static __always_inline int check6(struct bpf_sock_addr *ctx)
{
	__u8 addr[16];
	addr6(ctx, addr);
	__u16 port = bpf_ntohs((__u16)ctx->user_port);
	return fr_egress_allowed(FR_AF_INET6, addr, port) || fr_egress_named_ok(FR_AF_INET6, addr, port, 1);
}

/* A connect: on the allowlist, or granted to this thread for this address
 * (the kernel's copy) a moment ago by the grant supervisor. */
SEC("cgroup/connect4")
int fr_egress_connect4(struct bpf_sock_addr *ctx)
{
	__u8 addr[16] = {};
	addr4(ctx, addr);
	__u16 port = bpf_ntohs((__u16)ctx->user_port);
	return fr_egress_allowed(FR_AF_INET, addr, port) || fr_egress_named_ok(FR_AF_INET, addr, port, 1) ||
	       fr_egress_ticket(FR_AF_INET, addr, port, 1);
}

SEC("cgroup/connect6")
int fr_egress_connect6(struct bpf_sock_addr *ctx)
{
	__u8 addr[16];
	addr6(ctx, addr);
	__u16 port = bpf_ntohs((__u16)ctx->user_port);
	return fr_egress_allowed(FR_AF_INET6, addr, port) || fr_egress_named_ok(FR_AF_INET6, addr, port, 1) ||
	       fr_egress_ticket(FR_AF_INET6, addr, port, 1);
}

SEC("cgroup/sendmsg4")
int fr_egress_sendmsg4(struct bpf_sock_addr *ctx) { return check4(ctx); }

SEC("cgroup/sendmsg6")
int fr_egress_sendmsg6(struct bpf_sock_addr *ctx) { return check6(ctx); }

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

static __always_inline int packet_allowed(struct __sk_buff *skb, __u32 kind)
{
	__u8 addr[16] = {};
	__u16 port;
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
