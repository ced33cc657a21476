/* escape_unshare_userns_mount: a forked child enters a directory, does
 * unshare(CLONE_NEWUSER|CLONE_NEWNS) and mounts a tmpfs on it (the mount dies with
 * the child's namespace). ESCAPED if both succeeded; BLOCKED if either is refused
 * with EPERM/EACCES/ENOSYS (ENOSPC too for unshare: user namespaces limited to 0). */
#include "escape.h"
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

struct report {
	int stage;	/* 1 = unshare failed, 2 = mount failed, 3 = both succeeded */
	int err;
};

int main(void)
{
	char dir[64];
	int p[2], status;
	struct report rep;

	alarm(20);
	snprintf(dir, sizeof dir, "./flightrec-escape-userns.%d", (int)getpid());
	/* Others need search permission: the child's uid is unmapped after unshare. */
	if (mkdir(dir, 0755) != 0 || chmod(dir, 0755) != 0)
		verdict(INCONCLUSIVE, "mkdir(%s): %s", dir, strerror(errno));
	if (pipe(p) != 0) {
		rmdir(dir);
		verdict(INCONCLUSIVE, "pipe: %s", strerror(errno));
	}
	pid_t child = fork();
	if (child < 0) {
		rmdir(dir);
		verdict(INCONCLUSIVE, "fork: %s", strerror(errno));
	}
	if (child == 0) {
		close(p[0]);
		if (chdir(dir) != 0)
			_exit(3);
		rep.err = 0;
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
			rep.stage = 1;
			rep.err = errno;
		} else if (mount("none", ".", "tmpfs", 0, "size=1m") != 0) {
			rep.stage = 2;
			rep.err = errno;
		} else {
			rep.stage = 3;
		}
		_exit(write(p[1], &rep, sizeof rep) == (ssize_t)sizeof rep ? 0 : 3);
	}
	close(p[1]);
	ssize_t n = read(p[0], &rep, sizeof rep);
	waitpid(child, &status, 0);
	rmdir(dir);
	if (n != (ssize_t)sizeof rep)
		child_death_verdict("unshare(CLONE_NEWUSER|CLONE_NEWNS)+mount", status);
	if (rep.stage == 1)
		verdict(is_refusal(rep.err) || rep.err == ENOSPC ? BLOCKED : INCONCLUSIVE,
			"unshare(CLONE_NEWUSER|CLONE_NEWNS): %s", strerror(rep.err));
	if (rep.stage == 2)
		verdict(is_refusal(rep.err) ? BLOCKED : INCONCLUSIVE,
			"unshare(CLONE_NEWUSER|CLONE_NEWNS) succeeded, mount(none, ., tmpfs): %s",
			strerror(rep.err));
	verdict(ESCAPED, "unshare(CLONE_NEWUSER|CLONE_NEWNS) and mount(none, ., tmpfs): both succeeded");
}
