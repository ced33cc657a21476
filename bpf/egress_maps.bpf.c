/* The definitions of the egress maps and setting (lib/egress.bpf.h) for
 * the egress programs loaded on their own (probe/egress_filter.h): one
 * confined session's filter, whichever process records the session. */
#define FR_SHARED
#include "lib/egress.bpf.h"

const volatile __u32 fr_egress_count = 0;

char LICENSE[] SEC("license") = "GPL";
