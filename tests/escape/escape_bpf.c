/* escape_bpf: bpf(BPF_MAP_CREATE) of a one-entry array map. ESCAPED if it
 * returned an fd; BLOCKED on EPERM/EACCES/ENOSYS; anything else is inconclusive. */
#include "escape.h"
#include <linux/bpf.h>

int main(void)
{
	union bpf_attr attr;

	alarm(20);
	memset(&attr, 0, sizeof attr);
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = 4;
	attr.value_size = 4;
	attr.max_entries = 1;
	long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr);
	if (fd >= 0) {
		close((int)fd);
		verdict(ESCAPED, "bpf(BPF_MAP_CREATE, array): returned fd %ld", fd);
	}
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "bpf(BPF_MAP_CREATE, array): %s", strerror(e));
}
