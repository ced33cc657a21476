/* escape_mount_tmpfs: mkdir a directory in the work directory and mount a
 * tmpfs on it. ESCAPED if mount(2) succeeded (it is unmounted and removed
 * again); BLOCKED on EPERM/EACCES/ENOSYS. */
#include "escape.h"
#include <sys/mount.h>
#include <sys/stat.h>

int main(void)
{
	char dir[64];

	alarm(20);
	snprintf(dir, sizeof dir, "./flightrec-escape-mnt.%d", (int)getpid());
	if (mkdir(dir, 0700) != 0)
		verdict(INCONCLUSIVE, "mkdir(%s): %s", dir, strerror(errno));
	if (mount("none", dir, "tmpfs", 0, "size=1m") != 0) {
		int e = errno;

		rmdir(dir);
		verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "mount(none, %s, tmpfs): %s", dir,
			strerror(e));
	}
	const char *note = "unmounted";
	if (umount2(dir, 0) != 0)
		note = umount2(dir, MNT_DETACH) == 0 ? "lazily unmounted" : "umount FAILED";
	rmdir(dir);
	verdict(ESCAPED, "mount(none, %s, tmpfs): succeeded (%s)", dir, note);
}
