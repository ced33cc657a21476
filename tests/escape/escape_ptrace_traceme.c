/* escape_ptrace_traceme: a forked child calls ptrace(PTRACE_TRACEME) and
 * reports the result through a pipe. ESCAPED if it returned 0; BLOCKED on
 * EPERM/EACCES/ENOSYS or if the child was killed by SIGSYS/SIGKILL. */
#include "escape.h"
#include <sys/ptrace.h>

int main(void)
{
	int p[2], res[2], status;

	alarm(20);
	pid_t child = fork_with_pipe(p);
	if (child == 0) {
		close(p[0]);
		long r = ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		res[0] = (int)r;
		res[1] = r == 0 ? 0 : errno;
		_exit(write(p[1], res, sizeof res) == (ssize_t)sizeof res ? 0 : 3);
	}
	close(p[1]);
	ssize_t n = read(p[0], res, sizeof res);
	waitpid(child, &status, 0);
	if (n != (ssize_t)sizeof res)
		child_death_verdict("ptrace(PTRACE_TRACEME)", status);
	if (res[0] == 0)
		verdict(ESCAPED, "ptrace(PTRACE_TRACEME): returned 0 in the child");
	verdict(is_refusal(res[1]) ? BLOCKED : INCONCLUSIVE, "ptrace(PTRACE_TRACEME): %s",
		strerror(res[1]));
}
