/* A program whose syscalls the runtime tests know in advance:
 *   known_syscalls PORT MARKER_PATH
 * opens MARKER_PATH, connects to 127.0.0.1:PORT, calls getsockname with a
 * 4-byte buffer, forks a child that forks a
 * grandchild which execs `true grandchild-marker`, and exits with 7 (the
 * child with 5). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: known_syscalls PORT MARKER_PATH\n");
		return 2;
	}
	int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		close(fd);

	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[1])) };
	inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
	if (connect(s, (struct sockaddr *)&addr, sizeof(addr)) != 0)
		return 3;
	/* A 4-byte buffer: the kernel says 16 bytes; only 4 are the caller's. */
	char small[8] = { 0 };
	socklen_t small_len = 4;
	getsockname(s, (struct sockaddr *)small, &small_len);
	close(s);

	pid_t child = fork();
	if (child == 0) {
		pid_t grandchild = fork();
		if (grandchild == 0) {
			execl("/bin/true", "true", "grandchild-marker", (char *)NULL);
			_exit(100);
		}
		waitpid(grandchild, NULL, 0);
		_exit(5);
	}
	waitpid(child, NULL, 0);
	getppid();
	return 7;
}
