/* escape_open_tree: open_tree(AT_FDCWD, "/", OPEN_TREE_CLONE), a detached copy
 * of the root mount. ESCAPED if it returned an fd (closed again, which frees the
 * copy); BLOCKED on EPERM/EACCES/ENOSYS; anything else is inconclusive. */
#include "escape.h"

#ifndef __NR_open_tree
#define __NR_open_tree 428
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif

int main(void)
{
	alarm(20);
	long fd = syscall(__NR_open_tree, AT_FDCWD, "/", (unsigned)OPEN_TREE_CLONE);
	if (fd >= 0) {
		close((int)fd);
		verdict(ESCAPED, "open_tree(AT_FDCWD, /, OPEN_TREE_CLONE): returned fd %ld", fd);
	}
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "open_tree(AT_FDCWD, /, OPEN_TREE_CLONE): %s",
		strerror(e));
}
