/* Syscall workloads for tools/bench/run.sh:
 *   bench_syscalls getppid N        N getppid() calls; prints ns per call
 *   bench_syscalls rate R SECONDS   getppid() at R calls/s for SECONDS (paced)
 *   bench_syscalls forkexec N       N fork + exec of /bin/true, waited for; prints ms
 *   bench_syscalls write MB PATH    write MB MiB to PATH in 64 KiB writes + fsync; prints ms
 *   bench_syscalls open N PATH      N open() + close() of PATH; prints ns per pair
 *   bench_syscalls openw N PATH     the same, opened for writing (created if need be)
 *   bench_syscalls connect N PORT   N TCP connect()s to 127.0.0.1:PORT (socket, connect,
 *                                   close each); prints ns per connect() call alone */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: see the comment in syscalls.c\n");
		return 2;
	}
	if (!strcmp(argv[1], "getppid")) {
		long n = atol(argv[2]);
		double t = now();
		for (long i = 0; i < n; i++)
			getppid();
		printf("%.1f\n", (now() - t) * 1e9 / n);
	} else if (!strcmp(argv[1], "rate") && argc == 4) {
		double rate = atof(argv[2]), secs = atof(argv[3]);
		double start = now();
		long done = 0;
		for (;;) {
			double elapsed = now() - start;
			if (elapsed >= secs)
				break;
			long due = (long)(elapsed * rate);
			while (done < due) {
				getppid();
				done++;
			}
			struct timespec pause = { 0, 100000 };
			nanosleep(&pause, NULL);
		}
		printf("%ld\n", done);
	} else if (!strcmp(argv[1], "forkexec")) {
		long n = atol(argv[2]);
		double t = now();
		for (long i = 0; i < n; i++) {
			pid_t p = fork();
			if (p == 0) {
				execl("/bin/true", "true", (char *)NULL);
				_exit(127);
			}
			waitpid(p, NULL, 0);
		}
		printf("%.3f\n", (now() - t) * 1e3);
	} else if (!strcmp(argv[1], "write") && argc == 4) {
		long mb = atol(argv[2]);
		static char buf[65536];
		memset(buf, 'x', sizeof(buf));
		double t = now();
		int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0)
			return 1;
		for (long i = 0; i < mb * 16; i++)
			if (write(fd, buf, sizeof(buf)) != sizeof(buf))
				return 1;
		fsync(fd);
		close(fd);
		printf("%.3f\n", (now() - t) * 1e3);
	} else if ((!strcmp(argv[1], "open") || !strcmp(argv[1], "openw")) && argc == 4) {
		long n = atol(argv[2]);
		int flags = !strcmp(argv[1], "open") ? O_RDONLY : O_WRONLY | O_CREAT;
		double t = now();
		for (long i = 0; i < n; i++) {
			int fd = open(argv[3], flags | O_CLOEXEC, 0644);
			if (fd < 0)
				return 1;
			close(fd);
		}
		printf("%.1f\n", (now() - t) * 1e9 / n);
	} else if (!strcmp(argv[1], "connect") && argc == 4) {
		long n = atol(argv[2]);
		struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[3]))};
		inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
		double in_connect = 0;
		for (long i = 0; i < n; i++) {
			int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			double t = now();
			if (s < 0 || connect(s, (struct sockaddr *)&to, sizeof(to)) != 0)
				return 1;
			in_connect += now() - t;
			close(s);
		}
		printf("%.1f\n", in_connect * 1e9 / n);
	} else {
		fprintf(stderr, "unknown workload %s\n", argv[1]);
		return 2;
	}
	return 0;
}
