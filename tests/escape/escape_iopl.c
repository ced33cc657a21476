/* escape_iopl: iopl(3), raw I/O port access (no port is touched). ESCAPED if it
 * returned 0 (iopl(0) restores the level); BLOCKED on EPERM/EACCES/ENOSYS;
 * anything else is inconclusive. */
#include "escape.h"

int main(void)
{
	alarm(20);
	if (syscall(SYS_iopl, 3) == 0) {
		syscall(SYS_iopl, 0);
		verdict(ESCAPED, "iopl(3): succeeded (reset to 0)");
	}
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "iopl(3): %s", strerror(e));
}
