/* The one definition of the maps and settings all flightrec BPF programs
 * share (declared in lib/common.bpf.h); bpftool links the objects. */
#define FR_SHARED
#include "lib/common.bpf.h"

const volatile __u32 fr_self_tgid = 0;
const volatile __u32 fr_tls_enabled = 0;
const volatile __u32 fr_exit_only = 0;
const volatile __u32 fr_hidden_rules = 0;
const volatile __u32 fr_exec_rules = 0;
const volatile __u32 fr_egress_count = 0;
const volatile __u32 fr_egress_lsm = 0;
const volatile __u64 fr_tls_chunk = 16384;
const volatile __u64 fr_tls_cap = 262144;
const volatile __u64 fr_wakeup_bytes = 256 * 1024;
const volatile __u64 fr_highwater_bytes = 0;
volatile __u32 fr_session_gen = 0;

char LICENSE[] SEC("license") = "GPL";
