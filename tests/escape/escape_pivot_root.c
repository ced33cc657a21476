/* escape_pivot_root: in a new private mount namespace, call pivot_root("/", "/"),
 * which the kernel always rejects (EBUSY/EINVAL) after its capability and LSM
 * checks, so the root can never move. ESCAPED on any result but EPERM/EACCES/ENOSYS;
 * BLOCKED if unshare(CLONE_NEWNS) or the MS_PRIVATE remount is refused. */
#include "escape.h"
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

int main(void)
{
	struct stat before, after;

	alarm(20);
	int have_before = stat("/proc/self/ns/mnt", &before) == 0;
	if (unshare(CLONE_NEWNS) != 0) {
		int e = errno;

		verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "unshare(CLONE_NEWNS): %s", strerror(e));
	}
	/* Safety: pivot_root is only called once we know we are in a new namespace. */
	if (!have_before || stat("/proc/self/ns/mnt", &after) != 0)
		verdict(INCONCLUSIVE, "unshare(CLONE_NEWNS) returned 0 but /proc/self/ns/mnt cannot "
			"confirm a new namespace; pivot_root not attempted");
	if (before.st_dev == after.st_dev && before.st_ino == after.st_ino)
		verdict(INCONCLUSIVE, "unshare(CLONE_NEWNS) returned 0 but the mount namespace did not "
			"change; pivot_root not attempted");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		int e = errno;

		verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "mount(/, MS_REC|MS_PRIVATE) in a new "
			"mount namespace: %s; pivot_root not attempted", strerror(e));
	}
	long r = syscall(SYS_pivot_root, "/", "/");
	int e = errno;
	if (r == 0)
		verdict(ESCAPED, "pivot_root(/, /): returned 0 in a private mount namespace");
	verdict(is_refusal(e) ? BLOCKED : ESCAPED, "pivot_root(/, /) in a private mount namespace: %s%s",
		strerror(e), is_refusal(e) ? "" : " (reached the kernel's own checks)");
}
