/* escape_finit_module: finit_module on an fd of /dev/null (never loadable).
 * ESCAPED on any result but EPERM/EACCES/ENOSYS; BLOCKED on those;
 * INCONCLUSIVE if /dev/null cannot be opened. */
#include "escape.h"

int main(void)
{
	alarm(20);
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		verdict(INCONCLUSIVE, "open(/dev/null): %s", strerror(errno));
	long r = syscall(SYS_finit_module, fd, "", 0);
	kernel_checks_verdict("finit_module(/dev/null, \"\", 0)", r, errno);
}
