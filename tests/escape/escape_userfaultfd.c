/* escape_userfaultfd: userfaultfd(O_CLOEXEC) without UFFD_USER_MODE_ONLY (needs
 * privilege or vm.unprivileged_userfaultfd). ESCAPED if it returned an fd; BLOCKED
 * on EPERM/EACCES/ENOSYS; anything else is inconclusive. */
#include "escape.h"

#ifndef __NR_userfaultfd
#define __NR_userfaultfd 323
#endif

int main(void)
{
	alarm(20);
	long fd = syscall(__NR_userfaultfd, O_CLOEXEC);
	if (fd >= 0) {
		close((int)fd);
		verdict(ESCAPED, "userfaultfd(O_CLOEXEC): returned fd %ld", fd);
	}
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "userfaultfd(O_CLOEXEC): %s", strerror(e));
}
