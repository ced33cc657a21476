/* escape_init_module: init_module with 64 bytes of garbage (never loadable).
 * ESCAPED on any result but EPERM/EACCES/ENOSYS (ENOEXEC, EINVAL, EFAULT, ...
 * mean the kernel's own checks ran); BLOCKED on those. */
#include "escape.h"

int main(void)
{
	static unsigned char garbage[64];

	alarm(20);
	memset(garbage, 0x41, sizeof garbage);
	long r = syscall(SYS_init_module, garbage, sizeof garbage, "");
	kernel_checks_verdict("init_module(garbage, 64, \"\")", r, errno);
}
