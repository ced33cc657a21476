/* escape_clone_newuser: raw clone(CLONE_NEWUSER|SIGCHLD) whose child _exit(0)s.
 * ESCAPED if clone returned a pid; BLOCKED on EPERM/EACCES/ENOSYS (and ENOSPC:
 * user namespaces limited to 0), or if the process is killed by the sandbox. */
#include "escape.h"
#include <sched.h>

int main(void)
{
	alarm(20);
	long r = syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), NULL, NULL, NULL, 0UL);
	if (r == 0)
		_exit(0);
	if (r < 0) {
		int e = errno;

		verdict(is_refusal(e) || e == ENOSPC ? BLOCKED : INCONCLUSIVE,
			"clone(CLONE_NEWUSER|SIGCHLD): %s", strerror(e));
	}
	waitpid((pid_t)r, NULL, 0);
	verdict(ESCAPED, "clone(CLONE_NEWUSER|SIGCHLD): returned pid %ld", r);
}
