/* escape_chroot: chroot(".") in the work directory (the first step of the
 * classic chroot breakout). ESCAPED if it returned 0; BLOCKED on
 * EPERM/EACCES/ENOSYS. */
#include "escape.h"

int main(void)
{
	alarm(20);
	if (chroot(".") == 0)
		verdict(ESCAPED, "chroot(.): succeeded");
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "chroot(.): %s", strerror(e));
}
