/* escape_perf_event_open: perf_event_open(PERF_COUNT_SW_CPU_CLOCK) on this
 * process, any cpu. ESCAPED if it returned an fd; BLOCKED on EPERM/EACCES/ENOSYS
 * (a perf_event_paranoid refusal counts too); anything else is inconclusive. */
#include "escape.h"
#include <linux/perf_event.h>

int main(void)
{
	struct perf_event_attr attr;

	alarm(20);
	memset(&attr, 0, sizeof attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.size = sizeof attr;
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.disabled = 1;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0UL);
	if (fd >= 0) {
		close((int)fd);
		verdict(ESCAPED, "perf_event_open(SW_CPU_CLOCK, self): returned fd %ld", fd);
	}
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "perf_event_open(SW_CPU_CLOCK, self): %s",
		strerror(e));
}
