/* exec_race PATH_A PATH_B N: calls execve() through one path buffer while a
 * second thread keeps rewriting it between PATH_A and PATH_B (same length):
 * the TOCTOU race against a supervisor that decides on the path it read
 * from this process's memory. The first execve that succeeds replaces this
 * program (the new one says which it is); after N failures it prints
 * "none ran". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[4096];
static const char *a, *b;
static size_t len;

static void *flip(void *arg)
{
	(void)arg;
	for (;;) {
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
		fprintf(stderr, "usage: exec_race PATH_A PATH_B N (paths of one length)\n");
		return 2;
	}
	a = argv[1];
	b = argv[2];
	len = strlen(a);
	memcpy(path, a, len);
	pthread_t t;
	if (pthread_create(&t, NULL, flip, NULL) != 0)
		return 1;
	char *args[] = {path, NULL};
	for (int i = 0, n = atoi(argv[3]); i < n; i++)
		execve(path, args, NULL);
	printf("none ran\n");
	return 0;
}
