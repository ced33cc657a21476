/* Egress allowlist for confined sessions: cgroup sock_addr programs on the
 * session's cgroup (they load on kernels that refuse BPF-LSM). connect()
 * and unconnected UDP sendmsg() to an address:port not on the list fail
 * with EPERM, as does bind() to anything but loopback; the recorded syscall
 * carries the address and the policy judge names the rule. Loaded only
 * when the policy has an allowlist. */
#include "lib/common.bpf.h"
#include <bpf/bpf_endian.h>

static __always_inline int check4(struct bpf_sock_addr *ctx)
{
	__u8 addr[16] = {};
	__u32 ip = ctx->user_ip4;
	__builtin_memcpy(addr, &ip, 4);
	return fr_egress_allowed(2, addr, bpf_ntohs((__u16)ctx->user_port));
}

static __always_inline int check6(struct bpf_sock_addr *ctx)
{
	__u8 addr[16];
	__u32 w0 = ctx->user_ip6[0], w1 = ctx->user_ip6[1], w2 = ctx->user_ip6[2], w3 = ctx->user_ip6[3];
	__builtin_memcpy(addr, &w0, 4);
	__builtin_memcpy(addr + 4, &w1, 4);
	__builtin_memcpy(addr + 8, &w2, 4);
	__builtin_memcpy(addr + 12, &w3, 4);
	return fr_egress_allowed(10, addr, bpf_ntohs((__u16)ctx->user_port));
}

SEC("cgroup/connect4")
int fr_egress_connect4(struct bpf_sock_addr *ctx) { return check4(ctx); }

SEC("cgroup/connect6")
int fr_egress_connect6(struct bpf_sock_addr *ctx) { return check6(ctx); }

SEC("cgroup/sendmsg4")
int fr_egress_sendmsg4(struct bpf_sock_addr *ctx) { return check4(ctx); }

SEC("cgroup/sendmsg6")
int fr_egress_sendmsg6(struct bpf_sock_addr *ctx) { return check6(ctx); }

/* Binding a listening address: loopback or port 0 (an ephemeral client
 * port) only. In allowlist mode the sandbox shares the host's network
 * stack, and a socket bound to a public address would take connections
 * from anywhere. */
SEC("cgroup/bind4")
int fr_egress_bind4(struct bpf_sock_addr *ctx)
{
	__u32 ip = bpf_ntohl(ctx->user_ip4);
	return (ip >> 24) == 127 || ctx->user_port == 0;
}

SEC("cgroup/bind6")
int fr_egress_bind6(struct bpf_sock_addr *ctx)
{
	int loopback = ctx->user_ip6[0] == 0 && ctx->user_ip6[1] == 0 && ctx->user_ip6[2] == 0 &&
		       ctx->user_ip6[3] == bpf_htonl(1);
	return loopback || ctx->user_port == 0;
}
