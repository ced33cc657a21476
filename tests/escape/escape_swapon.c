/* escape_swapon: swapon("/nonexistent-swap", 0). ESCAPED on any result but
 * EPERM/EACCES/ENOSYS (ENOENT = the kernel looked the path up after its
 * CAP_SYS_ADMIN check); BLOCKED on those. */
#include "escape.h"

int main(void)
{
	alarm(20);
	long r = syscall(SYS_swapon, "/nonexistent-swap", 0);
	kernel_checks_verdict("swapon(/nonexistent-swap, 0)", r, errno);
}
