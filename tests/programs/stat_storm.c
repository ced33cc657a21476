/* A storm of stat() calls from 4 threads while a fifth opens a marker file
 * in the middle of it (the record must hold that open):
 *   stat_storm MARKER MS
 * The storm runs MS milliseconds before the open and as long after it. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop;

static void *storm(void *arg)
{
	struct stat st;
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		stat("/etc/hostname", &st);
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: stat_storm MARKER MS\n");
		return 2;
	}
	long ms = atol(argv[2]);
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, storm, NULL);
	sleep_ms(ms);
	int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	sleep_ms(ms);
	atomic_store(&stop, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return fd >= 0 ? 0 : 1;
}
