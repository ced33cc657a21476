/* escape_mount_api: fsopen("tmpfs", 0), the first step of the new mount API.
 * ESCAPED if it returned an fd; BLOCKED on EPERM/EACCES/ENOSYS; anything else is
 * inconclusive. */
#include "escape.h"

#ifndef __NR_fsopen
#define __NR_fsopen 430
#endif

int main(void)
{
	alarm(20);
	long fd = syscall(__NR_fsopen, "tmpfs", 0U);
	if (fd >= 0) {
		close((int)fd);
		verdict(ESCAPED, "fsopen(tmpfs, 0): returned fd %ld", fd);
	}
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "fsopen(tmpfs, 0): %s", strerror(e));
}
