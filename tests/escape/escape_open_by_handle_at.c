/* escape_open_by_handle_at ("shocker"): name_to_handle_at("/") then
 * open_by_handle_at() with that handle, which bypasses path checks. ESCAPED if
 * open_by_handle_at returned an fd; BLOCKED if either call fails with
 * EPERM/EACCES/ENOSYS; anything else (e.g. EOPNOTSUPP) is inconclusive. */
#include "escape.h"

int main(void)
{
	int mount_id;

	alarm(20);
	struct file_handle *fh = malloc(sizeof *fh + MAX_HANDLE_SZ);
	if (fh == NULL)
		verdict(INCONCLUSIVE, "malloc: %s", strerror(errno));
	fh->handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(AT_FDCWD, "/", fh, &mount_id, 0) != 0) {
		int e = errno;

		verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "name_to_handle_at(/): %s", strerror(e));
	}
	int mount_fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mount_fd < 0) {
		int e = errno;

		verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "open(/): %s", strerror(e));
	}
	int fd = open_by_handle_at(mount_fd, fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		verdict(ESCAPED, "open_by_handle_at(handle of /, type %d, %u bytes): returned fd %d",
			fh->handle_type, fh->handle_bytes, fd);
	}
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "open_by_handle_at(handle of /): %s", strerror(e));
}
