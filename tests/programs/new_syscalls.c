/* The newest path-taking syscalls, by number (libc has no wrappers yet):
 *   new_syscalls FILE
 * calls setxattrat, getxattrat, listxattrat, removexattrat, file_getattr,
 * file_setattr and open_tree_attr on FILE and prints "NAME RESULT" for
 * each (RESULT: ok, or the errno's name). The kernel may not have them: a
 * record must name the path whatever the result. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct xattr_args_v0 {
	uint64_t value;
	uint32_t size;
	uint32_t flags;
};

struct file_attr_v0 {
	uint32_t fa_xflags, fa_extsize, fa_nextents, fa_projid, fa_cowextsize;
};

static void report(const char *name, long ret)
{
	printf("%s %s\n", name, ret >= 0 ? "ok" : strerrorname_np(errno));
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: new_syscalls FILE\n");
		return 2;
	}
	const char *file = argv[1];
	char value[] = "v";
	struct xattr_args_v0 args = { .value = (uintptr_t)value, .size = 1 };
	struct file_attr_v0 fa = { 0 };
	char list[256];

	report("setxattrat", syscall(463, AT_FDCWD, file, 0, "user.flightrec", &args, sizeof(args)));
	args.size = sizeof(value);
	report("getxattrat", syscall(464, AT_FDCWD, file, 0, "user.flightrec", &args, sizeof(args)));
	report("listxattrat", syscall(465, AT_FDCWD, file, 0, list, sizeof(list)));
	report("removexattrat", syscall(466, AT_FDCWD, file, 0, "user.flightrec"));
	report("file_getattr", syscall(468, AT_FDCWD, file, &fa, sizeof(fa), 0));
	report("file_setattr", syscall(469, AT_FDCWD, file, &fa, sizeof(fa), 0));
	long fd = syscall(467, AT_FDCWD, file, 1 /* OPEN_TREE_CLONE */, NULL, 0);
	report("open_tree_attr", fd);
	if (fd >= 0)
		close((int)fd);
	return 0;
}
