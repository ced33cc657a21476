/* Makes marker calls whose record headers have known answers: who made
 * them (process, thread, parent, uid, gid, name) and in which cgroup.
 *
 *   header_probe
 *
 * Prints "cgroup <id> main <pid> thread <tid> child <pid>" and makes
 * getpgid(4242001) in a thread renamed "hdr-thread", and getpgid(4242002)
 * in a child that dropped to uid 4321, gid 1234 first. The cgroup id is
 * the inode number of its cgroup v2 directory, read while it runs. */
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
	printf("cgroup %llu main %d thread %d child %d\n", cgroup, (int)getpid(), (int)thread_tid, (int)child);
	return 0;
}
