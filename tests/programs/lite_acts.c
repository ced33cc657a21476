/* Every kind of call lite mode records, once each, by raw syscall number
 * (so libc cannot pick a sibling call), then calls lite only counts:
 *   lite_acts DIR PORT
 * DIR: an empty directory to work in; PORT: a closed TCP port on
 * 127.0.0.1. The calls that must fail do (bad fds, missing paths), so
 * nothing outside DIR changes. Prints each call's name and result. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_open_tree_attr
#define SYS_open_tree_attr 467  /* Linux 6.15; older headers lack it */
#endif
#ifndef SYS_lsm_set_self_attr
#define SYS_lsm_set_self_attr 460  /* Linux 6.8 */
#endif
#ifndef SYS_file_setattr
#define SYS_file_setattr 469  /* Linux 6.17 */
#endif

static char dir[512];

static const char *at(const char *name)
{
	static char paths[8][600];
	static int next;
	char *p = paths[next++ % 8];
	snprintf(p, sizeof(paths[0]), "%s/%s", dir, name);
	return p;
}

static long show(const char *name, long ret)
{
	printf("%s %ld\n", name, ret < 0 ? -1L : ret);
	return ret;
}

#define CALL(name, ...) show(#name, syscall(SYS_##name, __VA_ARGS__))

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: lite_acts DIR PORT\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "%s", argv[1]);
	int fd = (int)CALL(openat, AT_FDCWD, at("written"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CALL(open, at("written"), O_RDONLY | O_TRUNC | O_CLOEXEC);
	CALL(creat, at("created"), 0600);
	CALL(truncate, at("created"), 0);
	CALL(link, at("created"), at("hard1"));
	CALL(linkat, AT_FDCWD, at("created"), AT_FDCWD, at("hard2"), 0);
	CALL(symlink, at("created"), at("soft1"));
	CALL(symlinkat, at("created"), AT_FDCWD, at("soft2"));
	CALL(rename, at("hard1"), at("moved1"));
	CALL(renameat, AT_FDCWD, at("hard2"), AT_FDCWD, at("moved2"));
	CALL(renameat2, AT_FDCWD, at("moved2"), AT_FDCWD, at("moved3"), 0);
	CALL(chmod, at("created"), 0644);
	CALL(fchmod, fd, 0600);
	CALL(fchmodat, AT_FDCWD, at("created"), 0600);
	CALL(chown, at("created"), 0, 0);
	CALL(fchown, fd, 0, 0);
	CALL(lchown, at("soft1"), 0, 0);
	CALL(fchownat, AT_FDCWD, at("created"), 0, 0, 0);
	CALL(mknod, at("fifo1"), S_IFIFO | 0600, 0);
	CALL(mknodat, AT_FDCWD, at("fifo2"), S_IFIFO | 0600, 0);
	CALL(unlink, at("fifo1"));
	CALL(unlinkat, AT_FDCWD, at("fifo2"), 0);
	CALL(mkdir, at("emptydir"), 0700);
	CALL(rmdir, at("emptydir"));
	CALL(mkdirat, AT_FDCWD, at("emptydir2"), 0700);
	CALL(setxattr, at("created"), "user.flightrec", "1", 1, 0);
	CALL(lsetxattr, at("created"), "user.flightrec", "2", 1, 0);
	CALL(fsetxattr, fd, "user.flightrec", "3", 1, 0);
	CALL(removexattr, at("created"), "user.flightrec");
	CALL(lremovexattr, at("created"), "user.flightrec");
	CALL(fremovexattr, fd, "user.flightrec");
	CALL(utime, at("created"), NULL);
	CALL(utimes, at("created"), NULL);
	CALL(futimesat, AT_FDCWD, at("created"), NULL);
	CALL(utimensat, AT_FDCWD, at("created"), NULL, 0);
	CALL(name_to_handle_at, AT_FDCWD, at("created"), NULL, NULL, 0);
	CALL(open_by_handle_at, -1, NULL, O_RDONLY);
	/* A process's memory, read-only: recorded like ptrace. */
	CALL(open, "/proc/self/mem", O_RDONLY | O_CLOEXEC);
	char *no_args[] = { "lite-acts-missing", NULL };
	CALL(execve, at("no-such-program"), no_args, no_args + 1);

	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[2])) };
	inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
	CALL(connect, s, &addr, sizeof(addr));
	close(s);
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_in any = { .sin_family = AF_INET, .sin_port = 0 };
	inet_pton(AF_INET, "127.0.0.1", &any.sin_addr);
	CALL(bind, s, &any, sizeof(any));
	CALL(listen, s, 1);
	/* One connection to accept: its peer is read from the kernel's socket. */
	socklen_t any_len = sizeof(any);
	getsockname(s, (struct sockaddr *)&any, &any_len);
	int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CALL(connect, client, &any, sizeof(any));
	CALL(accept, s, NULL, NULL);
	close(client);
	CALL(accept4, s, NULL, NULL, SOCK_CLOEXEC);
	close(s);

	CALL(setuid, getuid());
	CALL(setgid, getgid());
	CALL(setreuid, -1, -1);
	CALL(setregid, -1, -1);
	CALL(setresuid, -1, -1, -1);
	CALL(setresgid, -1, -1, -1);
	CALL(setfsuid, getuid());
	CALL(setfsgid, getgid());
	CALL(setgroups, 0, NULL);
	CALL(capset, NULL, NULL);
	CALL(prctl, 3 /* PR_GET_DUMPABLE: counted only */, 0, 0, 0, 0);
	CALL(prctl, 4 /* PR_SET_DUMPABLE: recorded */, 1, 0, 0, 0);
	CALL(seccomp, -1, 0, NULL);
	CALL(add_key, NULL, NULL, NULL, 0, 0);
	CALL(request_key, NULL, NULL, NULL, 0);
	CALL(keyctl, -1, 0, 0, 0, 0);
	CALL(ptrace, 2 /* PTRACE_PEEKDATA */, getppid(), NULL, NULL);
	char src[8] = "lite", dst[8];
	struct iovec local = { dst, sizeof(dst) }, remote = { src, sizeof(src) };
	CALL(process_vm_readv, getpid(), &local, 1, &remote, 1, 0);
	CALL(process_vm_writev, getpid(), &remote, 1, &local, 1, 0);
	CALL(pidfd_getfd, -1, 0, 0);

	CALL(mount, "none", at("no-such-dir"), "tmpfs", 0, NULL);
	CALL(umount2, at("no-such-dir"), 0);
	CALL(pivot_root, at("no-such-dir"), at("no-such-dir"));
	CALL(chroot, at("no-such-dir"));
	CALL(open_tree, -1, "", 0);
	CALL(move_mount, -1, "", -1, "", 0);
	CALL(fsopen, "flightrec-no-such-fs", 0);
	CALL(fsmount, -1, 0, 0);
	CALL(mount_setattr, -1, "", 0, NULL, 0);
	CALL(fsconfig, -1, 0, NULL, NULL, 0);
	CALL(fspick, -1, "", 0);
	CALL(open_tree_attr, -1, "", 0, NULL, 0);
	CALL(swapon, at("no-such-file"), 0);
	CALL(swapoff, at("no-such-file"));
	CALL(quotactl, 0, NULL, 0, NULL);
	CALL(fanotify_init, -1, 0);
	CALL(fanotify_mark, -1, 0, 0, -1, NULL);
	CALL(unshare, 0);
	CALL(setns, -1, 0);

	CALL(bpf, -1, NULL, 0);
	CALL(init_module, NULL, 0, "");
	CALL(finit_module, -1, "", 0);
	CALL(delete_module, "flightrec_no_such_module", O_NONBLOCK);
	CALL(kexec_file_load, -1, -1, 0, "", 0);
	CALL(perf_event_open, NULL, 0, -1, -1, 0);
	CALL(io_uring_setup, 0, NULL);
	CALL(userfaultfd, -1);
	CALL(iopl, 4);
	CALL(ioperm, 0, 0, 0);
	CALL(syslog, -1, NULL, 0);
	CALL(acct, at("no-such-dir/acct"));
	CALL(reboot, 0, 0, 0, NULL);
	CALL(sethostname, NULL, -1);
	CALL(setdomainname, NULL, -1);
	CALL(settimeofday, NULL, NULL);
	CALL(clock_settime, -1, NULL);
	CALL(adjtimex, NULL);
	CALL(clock_adjtime, -1, NULL);
	CALL(lsm_set_self_attr, 0, NULL, 0, 0);  /* no such attribute: EINVAL */
	CALL(file_setattr, -1, "", NULL, 0, 0);  /* no such directory fd */
	/* Namespaces made by clone's flags: the fork entry says so. */
	long child = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, NULL, NULL, 0);
	if (child == 0)
		_exit(0);
	if (child > 0)
		waitpid((pid_t)child, NULL, 0);
	printf("clone-newuser %ld\n", child);

	/* Counted only: reads, and calls lite has no hook for at all. */
	for (int i = 0; i < 200; i++) {
		int r = (int)syscall(SYS_openat, AT_FDCWD, at("written"), O_RDONLY | O_CLOEXEC);
		if (r >= 0)
			close(r);
	}
	for (int i = 0; i < 10000; i++)
		syscall(SYS_getppid);
	close(fd);
	return 0;
}
