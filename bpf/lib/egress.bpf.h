/* The egress allowlist's maps and checks: shared by the cgroup programs
 * (egress.bpf.c, also loaded on their own for one confined session: see
 * egress_maps.bpf.c) and lsm/socket_connect. FR_SHARED as in common.bpf.h. */
#ifndef FLIGHTREC_BPF_EGRESS_H
#define FLIGHTREC_BPF_EGRESS_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "flightrec/abi/events.h"

#ifndef FR_SHARED
#define FR_SHARED extern
#endif

extern const volatile __u32 fr_egress_count;  /* allowlist entries in fr_egress */

FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FR_EGRESS_MAX);
	__type(key, __u32);
	__type(value, struct fr_egress_rule);
} fr_egress SEC(".maps");

static __always_inline int fr_prefix_matches(const __u8 *a, const __u8 *b, __u32 bits)
{
	for (int i = 0; i < 16; i++) {
		if (bits == 0)
			return 1;
		__u8 mask = bits >= 8 ? 0xff : (__u8)(0xff << (8 - bits));
		if ((a[i] ^ b[i]) & mask)
			return 0;
		bits = bits >= 8 ? bits - 8 : 0;
	}
	return 1;
}

FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, FR_EGRESS_GRANTED_MAX);
	__type(key, struct fr_egress_endpoint);
	__type(value, __u8);
} fr_egress_granted SEC(".maps");

FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, FR_EGRESS_TICKETS_MAX);
	__type(key, struct fr_egress_ticket);
	__type(value, __u64);
} fr_egress_tickets SEC(".maps");

FR_SHARED struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FR_EGRESS_NAMED_MAX);
	__type(key, struct fr_egress_endpoint);
	__type(value, __u64);
} fr_egress_named SEC(".maps");

/* family/addr/port as the grant maps key them: IPv4-mapped IPv6 as IPv4. */
static __always_inline void fr_endpoint(struct fr_egress_endpoint *e, __u32 family, const __u8 *addr, __u16 port)
{
	__u32 w[4];
	__builtin_memcpy(w, addr, 16);
	e->port = port;
	e->pad = 0;
	if (family == 10 && w[0] == 0 && w[1] == 0 && w[2] == bpf_htonl(0xffff)) {
		__builtin_memset(e->addr, 0, 16);
		__builtin_memcpy(e->addr, &w[3], 4);
		e->family = 2;
		return;
	}
	__builtin_memcpy(e->addr, addr, 16);
	e->family = family;
}

/* The current thread's connect ticket to family/addr/port, if it has one in
 * time; `take` consumes it (only one caller can delete it). */
static __always_inline int fr_egress_ticket(__u32 family, const __u8 *addr, __u16 port, int take)
{
	struct fr_egress_ticket t = {};
	fr_endpoint(&t.to, family, addr, port);
	t.tid = (__u32)bpf_get_current_pid_tgid();
	__u64 *deadline = bpf_map_lookup_elem(&fr_egress_tickets, &t);
	if (!deadline)
		return 0;
	int in_time = bpf_ktime_get_ns() < *deadline;
	if (take && bpf_map_delete_elem(&fr_egress_tickets, &t) != 0)
		return 0;
	return in_time;
}

/* Whether packets to or from family/addr/port belong to a granted endpoint. */
static __always_inline int fr_egress_was_granted(__u32 family, const __u8 *addr, __u16 port)
{
	struct fr_egress_endpoint e = {};
	fr_endpoint(&e, family, addr, port);
	return bpf_map_lookup_elem(&fr_egress_granted, &e) != 0;
}

/* Was family/addr/port admitted by an allowed name's answer? `fresh`: and
 * may a connection start there now (the answer's TTL has not run out). */
static __always_inline int fr_egress_named_ok(__u32 family, const __u8 *addr, __u16 port, int fresh)
{
	struct fr_egress_endpoint e = {};
	fr_endpoint(&e, family, addr, port);
	__u64 *until = bpf_map_lookup_elem(&fr_egress_named, &e);
	if (until && (!fresh || bpf_ktime_get_ns() < *until))
		return 1;
	/* A rule for any port (key port 0), but never another resolver's
	 * ports (DNS, DNS over TLS): names are asked of the session's own. */
	if (port == 53 || port == 853)
		return 0;
	e.port = 0;
	until = bpf_map_lookup_elem(&fr_egress_named, &e);
	return until && (!fresh || bpf_ktime_get_ns() < *until);
}

/* Is family/addr (network order, 16 bytes)/port (host order) on the egress allowlist? */
static __always_inline int fr_egress_allowed(__u32 family, const __u8 *addr, __u16 port)
{
	for (__u32 i = 0; i < FR_EGRESS_MAX; i++) {
		if (i >= fr_egress_count)
			break;
		__u32 key = i;
		struct fr_egress_rule *r = bpf_map_lookup_elem(&fr_egress, &key);
		if (!r)
			break;
		if (r->family != family || (r->port && r->port != port))
			continue;
		if (fr_prefix_matches(addr, r->addr, r->prefix))
			return 1;
	}
	return 0;
}

#endif
