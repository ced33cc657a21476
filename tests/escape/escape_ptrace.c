/* escape_ptrace: fork a sleeping child and PTRACE_ATTACH to it. ESCAPED if the
 * attach succeeded (the child is detached and killed); BLOCKED on
 * EPERM/EACCES/ENOSYS. */
#include "escape.h"
#include <sys/ptrace.h>

int main(void)
{
	alarm(20);
	pid_t child = fork();
	if (child < 0)
		verdict(INCONCLUSIVE, "fork: %s", strerror(errno));
	if (child == 0) {
		alarm(20);
		for (;;)
			pause();
	}
	long r = ptrace(PTRACE_ATTACH, child, NULL, NULL);
	int e = errno;
	if (r != 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, __WALL);
		verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "ptrace(PTRACE_ATTACH, %d): %s",
			(int)child, strerror(e));
	}
	int status;
	waitpid(child, &status, __WALL);	/* the attach stop */
	ptrace(PTRACE_DETACH, child, NULL, NULL);
	kill(child, SIGKILL);
	waitpid(child, NULL, __WALL);
	verdict(ESCAPED, "ptrace(PTRACE_ATTACH, %d): attached (detached and killed the child)",
		(int)child);
}
