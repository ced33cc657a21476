/* escape_process_vm_writev: fork a child holding a variable and overwrite it
 * with process_vm_writev(2). ESCAPED if bytes were written (> 0); BLOCKED on
 * EPERM/EACCES/ENOSYS. The child is killed and reaped in every path. */
#include "escape.h"
#include <stdint.h>
#include <sys/uio.h>

#define ORIGINAL 0x1111111111111111ULL
#define INJECTED 0x5EC2E75EC2E75EC2ULL

static volatile uint64_t target = ORIGINAL;

int main(void)
{
	int p[2];

	alarm(20);
	pid_t child = fork_with_pipe(p);
	if (child == 0) {
		alarm(20);
		close(p[0]);
		if (write(p[1], "r", 1) != 1)
			_exit(3);
		while (target != INJECTED)
			usleep(1000);
		_exit(42);	/* saw the injected value */
	}
	wait_child_ready(p, child);
	uint64_t value = INJECTED;
	struct iovec local = { &value, sizeof value };
	struct iovec remote = { (void *)&target, sizeof target };
	ssize_t n = process_vm_writev(child, &local, 1, &remote, 1, 0);
	int e = errno;
	int status = 0, seen = 0;
	if (n > 0) {
		for (int i = 0; i < 200 && !seen; i++) {	/* up to 2 s for the child to notice */
			if (waitpid(child, &status, WNOHANG) == child)
				seen = WIFEXITED(status) && WEXITSTATUS(status) == 42 ? 1 : -1;
			else
				usleep(10000);
		}
	}
	if (seen == 0)
		kill_child(child);
	if (n > 0)
		verdict(ESCAPED, "process_vm_writev(%d): wrote %zd bytes (child %s the new value)",
			(int)child, n, seen == 1 ? "saw" : "did not confirm");
	if (n == 0)
		verdict(INCONCLUSIVE, "process_vm_writev(%d): wrote 0 bytes", (int)child);
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "process_vm_writev(%d): %s", (int)child,
		strerror(e));
}
