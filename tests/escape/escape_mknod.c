/* escape_mknod: mknod("./null2", S_IFCHR|0666, makedev(1, 3)), a device node in
 * the work directory. ESCAPED if it returned 0 (the node is removed); BLOCKED on
 * EPERM/EACCES/ENOSYS. */
#include "escape.h"
#include <sys/stat.h>
#include <sys/sysmacros.h>

int main(void)
{
	alarm(20);
	unlink("./null2");
	if (mknod("./null2", S_IFCHR | 0666, makedev(1, 3)) == 0) {
		unlink("./null2");
		verdict(ESCAPED, "mknod(./null2, S_IFCHR, 1:3): succeeded (node removed)");
	}
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "mknod(./null2, S_IFCHR, 1:3): %s", strerror(e));
}
