/* escape_pidfd_getfd: fork a child that opens /dev/null, then pidfd_open(2) it
 * and steal that fd with pidfd_getfd(2) (a ptrace-class access). ESCAPED if
 * pidfd_getfd returned an fd; BLOCKED if either call fails with EPERM/EACCES/ENOSYS. */
#include "escape.h"

#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif
#ifndef __NR_pidfd_getfd
#define __NR_pidfd_getfd 438
#endif

static pid_t child;

static void __attribute__((noreturn, format(printf, 2, 3))) finish(int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	kill_child(child);
	verdict(code, "%s", msg);
}

int main(void)
{
	int p[2], target_fd;

	alarm(20);
	child = fork_with_pipe(p);
	if (child == 0) {
		alarm(20);
		close(p[0]);
		target_fd = open("/dev/null", O_RDONLY);
		if (write(p[1], &target_fd, sizeof target_fd) != (ssize_t)sizeof target_fd)
			_exit(3);
		for (;;)
			pause();
	}
	close(p[1]);
	if (read(p[0], &target_fd, sizeof target_fd) != (ssize_t)sizeof target_fd || target_fd < 0)
		finish(INCONCLUSIVE, "child could not open /dev/null");
	long pidfd = syscall(__NR_pidfd_open, child, 0);
	if (pidfd < 0) {
		int e = errno;

		finish(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "pidfd_open(%d): %s", (int)child, strerror(e));
	}
	long fd = syscall(__NR_pidfd_getfd, (int)pidfd, target_fd, 0);
	if (fd < 0) {
		int e = errno;

		finish(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "pidfd_getfd(child %d, fd %d): %s",
		       (int)child, target_fd, strerror(e));
	}
	close((int)fd);
	close((int)pidfd);
	finish(ESCAPED, "pidfd_getfd(child %d, fd %d): got fd %ld", (int)child, target_fd, fd);
}
