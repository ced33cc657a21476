/* escape_acct: acct(NULL), which switches process accounting off. ESCAPED on
 * any result but EPERM/EACCES/ENOSYS (0 = it ran); BLOCKED on those. */
#include "escape.h"

int main(void)
{
	alarm(20);
	long r = syscall(SYS_acct, NULL);
	kernel_checks_verdict("acct(NULL)", r, errno);
}
