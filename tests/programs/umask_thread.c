/* umask_thread DIR: creates DIR/a with umask 022; a second thread (sharing
 * the umask, as threads do) sets 077 and waits; the first creates DIR/b;
 * the second creates DIR/c itself and ends. Prints the three files' modes:
 * "644 600 600" when whoever creates them uses the umask of the moment, as
 * the kernel does, even one another thread changed. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *dir;
static int to_main[2], to_thread[2];

static int create(const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0) {
		perror(path);
		return -1;
	}
	close(fd);
	return 0;
}

static void *second(void *arg)
{
	char c = 0;
	(void)arg;
	umask(077);
	if (write(to_main[1], &c, 1) != 1 || read(to_thread[0], &c, 1) != 1)
		return (void *)1;
	return create("c") == 0 ? NULL : (void *)1;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: umask_thread DIR\n");
		return 2;
	}
	dir = argv[1];
	umask(022);
	if (pipe(to_main) != 0 || pipe(to_thread) != 0 || create("a") != 0)
		return 1;
	pthread_t t;
	void *failed = NULL;
	char c = 0;
	if (pthread_create(&t, NULL, second, NULL) != 0 || read(to_main[0], &c, 1) != 1)
		return 1;
	int b = create("b");
	if (write(to_thread[1], &c, 1) != 1 || pthread_join(t, &failed) != 0 || b != 0 || failed)
		return 1;
	const char *names[] = {"a", "b", "c"};
	for (int i = 0; i < 3; i++) {
		char path[4096];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (stat(path, &st) != 0)
			return 1;
		printf("%s%o", i ? " " : "", st.st_mode & 0777);
	}
	printf("\n");
	return 0;
}
