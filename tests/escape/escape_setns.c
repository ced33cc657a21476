/* escape_setns: open /proc/1/ns/mnt and setns(fd, CLONE_NEWNS) into pid 1's
 * mount namespace. ESCAPED if setns returned 0; BLOCKED if the open fails with
 * EACCES/EPERM or setns with EPERM/EACCES/ENOSYS. */
#include "escape.h"
#include <sched.h>

int main(void)
{
	alarm(20);
	int fd = open("/proc/1/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		verdict(e == EACCES || e == EPERM ? BLOCKED : INCONCLUSIVE, "open(/proc/1/ns/mnt): %s",
			strerror(e));
	}
	if (setns(fd, CLONE_NEWNS) == 0)
		verdict(ESCAPED, "setns(/proc/1/ns/mnt, CLONE_NEWNS): joined pid 1's mount namespace");
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "setns(/proc/1/ns/mnt, CLONE_NEWNS): %s",
		strerror(e));
}
