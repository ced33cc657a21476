/* Makes marker calls whose record headers have known answers: who made
 * them (process, thread, parent, uid, gid, name) and in which cgroup.
 *
 *   header_probe
 *
 * Prints "cgroup <id> main <pid> thread <tid> child <pid>" and makes
 * getpgid(4242001) in a thread renamed "hdr-thread", and getpgid(4242002)
 * in a child that dropped to uid 4321, gid 1234 first. The cgroup id is
 * the inode number of its cgroup v2 directory, read while it runs.
 *
 * Then it moves itself (the whole process, as cgroup.procs does) into a
 * new cgroup below its own, "hdr-sub", and makes getpgid(4242003) there,
 * and a thread that made getpgid(4242005) before the move makes
 * getpgid(4242004) after it; then it moves back and removes hdr-sub, and
 * adds "sub <id>" to what it prints.
 *
 * Last, a child sets its uid to 4322 through the 32-bit entry (int 0x80,
 * setuid32) and makes getpgid(4242006) the usual way; "compat <pid>" names
 * it (0 where the kernel has no 32-bit entry). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t thread_tid;

static void *thread_main(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "hdr-thread");
	thread_tid = (pid_t)syscall(SYS_gettid);
	syscall(SYS_getpgid, 4242001);
	return NULL;
}

static int moved_pipe[2];

/* Makes its marker before the move and after it, when main says so. */
static void *mover_thread(void *arg)
{
	(void)arg;
	char byte;
	syscall(SYS_getpgid, 4242005);
	if (read(moved_pipe[0], &byte, 1) != 1)
		return NULL;
	syscall(SYS_getpgid, 4242004);
	return NULL;
}

static char own_dir[8192];  /* its cgroup v2 directory, set by own_cgroup_id() */

/* The inode number of the cgroup v2 directory this process is in. */
static unsigned long long own_cgroup_id(void)
{
	char line[4096], mount[4096] = "", path[8192];
	FILE *f = fopen("/proc/self/mounts", "r");
	while (f && fgets(line, sizeof(line), f)) {
		char dev[256], dir[4096], type[64];
		if (sscanf(line, "%255s %4095s %63s", dev, dir, type) == 3 && strcmp(type, "cgroup2") == 0) {
			strcpy(mount, dir);
			break;
		}
	}
	if (f)
		fclose(f);
	char own[4096] = "";
	f = fopen("/proc/self/cgroup", "r");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0) {
			strcpy(own, line + 3);
			own[strcspn(own, "\n")] = 0;
		}
	if (f)
		fclose(f);
	struct stat st;
	snprintf(path, sizeof(path), "%s%s", mount, own);
	snprintf(own_dir, sizeof(own_dir), "%s", path);
	if (!mount[0] || !own[0] || stat(path, &st) != 0) {
		fprintf(stderr, "header_probe: no cgroup v2 directory found\n");
		exit(2);
	}
	return (unsigned long long)st.st_ino;
}

int main(void)
{
	unsigned long long cgroup = own_cgroup_id();
	pthread_t t;
	if (pthread_create(&t, NULL, thread_main, NULL) != 0 || pthread_join(t, NULL) != 0)
		return 2;
	pid_t child = fork();
	if (child < 0)
		return 2;
	if (child == 0) {
		if (setresgid(1234, 1234, 1234) != 0 || setresuid(4321, 4321, 4321) != 0)
			_exit(3);
		syscall(SYS_getpgid, 4242002);
		_exit(0);
	}
	int status;
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 3;
	// The move: the whole process into hdr-sub, a thread of it waiting.
	pthread_t mover;
	char sub[8300], procs[8400], pid_text[32];
	if (pipe(moved_pipe) != 0 || pthread_create(&mover, NULL, mover_thread, NULL) != 0)
		return 2;
	usleep(100 * 1000);  /* (its first marker made, it waits on the pipe) */
	snprintf(sub, sizeof(sub), "%s/hdr-sub", own_dir);
	snprintf(pid_text, sizeof(pid_text), "%d", (int)getpid());
	struct stat st;
	if (mkdir(sub, 0755) != 0 || stat(sub, &st) != 0)
		return 4;
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", sub);
	FILE *f = fopen(procs, "w");
	if (!f || fputs(pid_text, f) < 0 || fclose(f) != 0)
		return 4;
	syscall(SYS_getpgid, 4242003);
	if (write(moved_pipe[1], "m", 1) != 1 || pthread_join(mover, NULL) != 0)
		return 2;
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", own_dir);
	f = fopen(procs, "w");
	if (!f || fputs(pid_text, f) < 0 || fclose(f) != 0 || rmdir(sub) != 0)
		return 4;
	// A uid changed through the 32-bit entry, whose call numbers are i386's.
	pid_t compat = fork();
	if (compat < 0)
		return 2;
	if (compat == 0) {
		long r;
		__asm__ volatile("int $0x80" : "=a"(r) : "a"(213L), "b"(4322L) : "memory");
		if (r != 0)
			_exit(5);
		syscall(SYS_getpgid, 4242006);
		_exit(0);
	}
	if (waitpid(compat, &status, 0) != compat)
		return 2;
	if (WIFSIGNALED(status))
		compat = 0;  /* no 32-bit entry in this kernel (SIGSEGV) */
	else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 5;
	printf("cgroup %llu main %d thread %d child %d sub %llu compat %d\n", cgroup, (int)getpid(), (int)thread_tid,
	       (int)child, (unsigned long long)st.st_ino, (int)compat);
	return 0;
}
