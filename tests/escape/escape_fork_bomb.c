/* escape_fork_bomb: fork up to 1500 children that pause(). ESCAPED if all 1500
 * were created; BLOCKED if fork failed first with EAGAIN/ENOMEM/EPERM/EACCES/
 * ENOSYS (pids limit). All children are killed and reaped in every path. */
#include "escape.h"

#define TARGET 1500

static pid_t kids[TARGET];
static volatile sig_atomic_t nkids;

static void kill_all(void)
{
	for (int i = 0; i < nkids; i++)
		kill(kids[i], SIGKILL);
	for (int i = 0; i < nkids; i++)
		waitpid(kids[i], NULL, 0);
}

static void on_alarm(int sig)
{
	(void)sig;
	kill_all();
	signal_verdict(INCONCLUSIVE, "fork: still forking after 20 s (children killed)");
}

int main(void)
{
	signal(SIGALRM, on_alarm);
	alarm(20);
	while (nkids < TARGET) {
		pid_t pid = fork();

		if (pid == 0) {
			signal(SIGALRM, SIG_DFL);	/* not the parent's handler */
			alarm(30);			/* safety net if the parent dies */
			for (;;)
				pause();
		}
		if (pid < 0) {
			int e = errno;
			int made = nkids;

			kill_all();
			verdict(is_refusal(e) || e == EAGAIN || e == ENOMEM ? BLOCKED : INCONCLUSIVE,
				"fork #%d: %s (after %d children; all killed)", made + 1, strerror(e), made);
		}
		kids[nkids] = pid;
		nkids = nkids + 1;
	}
	alarm(0);
	kill_all();
	verdict(ESCAPED, "fork: created all %d children (all killed and reaped)", TARGET);
}
