/* escape_process_vm_readv: fork a child that stores a value only it knows and
 * read it with process_vm_readv(2). ESCAPED if bytes were read (> 0); BLOCKED on
 * EPERM/EACCES/ENOSYS. The child is killed and reaped in every path. */
#include "escape.h"
#include <stdint.h>
#include <sys/uio.h>

#define MAGIC 0x5EC2E75EC2E70000ULL

static volatile uint64_t target;

int main(void)
{
	int p[2];

	alarm(20);
	pid_t child = fork_with_pipe(p);
	if (child == 0) {
		alarm(20);
		close(p[0]);
		target = MAGIC ^ (uint64_t)getpid();
		if (write(p[1], "r", 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	wait_child_ready(p, child);
	uint64_t value = 0;
	struct iovec local = { &value, sizeof value };
	struct iovec remote = { (void *)&target, sizeof target };
	ssize_t n = process_vm_readv(child, &local, 1, &remote, 1, 0);
	int e = errno;
	kill_child(child);
	if (n > 0)
		verdict(ESCAPED, "process_vm_readv(%d): read %zd bytes (%s the child's value)", (int)child,
			n, value == (MAGIC ^ (uint64_t)child) ? "matching" : "not matching");
	if (n == 0)
		verdict(INCONCLUSIVE, "process_vm_readv(%d): read 0 bytes", (int)child);
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "process_vm_readv(%d): %s", (int)child,
		strerror(e));
}
