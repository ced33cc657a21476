#include "inspect/kept_diff.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string_view>

#include "common/text.h"
#include "policy/judge.h"

namespace flightrec::inspect {
namespace {

bool binary_fd(int fd) {
  char buf[8192];
  ssize_t n = pread(fd, buf, sizeof(buf), 0);
  return n > 0 && std::string_view(buf, size_t(n)).find('\0') != std::string_view::npos;
}

// diff -u of two open files (diffutils is Essential on Debian: no diff of
// our own), each line escaped: the agent wrote these bytes, and terminal
// escapes in them could hide lines from the reviewer.
void unified_diff(std::string& out, int before, int after, const std::string& label_a, const std::string& label_b,
                  size_t max_bytes) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    out += "    (diff could not be run)\n";
    return;
  }
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (dup2(before >= 0 ? before : null, 3) < 0 || dup2(after >= 0 ? after : null, 4) < 0 || dup2(pipe_fds[1], 1) < 0)
      _exit(127);
    execlp("diff", "diff", "-u", "--label", label_a.c_str(), "--label", label_b.c_str(), "/dev/fd/3", "/dev/fd/4",
           static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  // Streamed, a line at a time (a line longer than 1 MiB is cut there).
  std::string line;
  size_t shown = 0;
  char buf[65536];
  for (ssize_t n; pid > 0 && (n = read(pipe_fds[0], buf, sizeof(buf))) > 0;)
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != '\n' && line.size() < (1u << 20)) line += buf[i];
      if (buf[i] != '\n') continue;
      if (shown <= max_bytes) out += printable(line) + "\n";
      shown += line.size() + 1;
      line.clear();
    }
  if (!line.empty() && shown <= max_bytes) out += printable(line) + "\n";
  if (shown > max_bytes) out += "    (the diff goes on: " + std::to_string(shown) + " bytes in all)\n";
  close(pipe_fds[0]);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) > 1) {
    out += "    (diff could not be run)\n";
    return;
  }
}

// A regular file only: a FIFO or a device (a hostile record can name one)
// would block the open or the read.
int open_regular(const sandbox::Layer& layer, const std::string& rel) {
  int fd = layer.open_at(rel, O_RDONLY | O_NONBLOCK);
  struct stat st {};
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

std::string kept_change_text(const sandbox::FileChange& c, const std::string& work_dir, const sandbox::Layer& host,
                             const sandbox::Layer& kept, size_t max_bytes) {
  std::string out;
  if (c.path == work_dir || !policy::path_under(c.path, work_dir))
    return "=== " + c.change + " " + printable(c.path) + " (outside the work directory " + printable(work_dir) + ")\n";
  std::string rel = c.path.substr(work_dir == "/" ? 0 : work_dir.size());
  std::string name = rel.substr(1);
  char mode[8];
  snprintf(mode, sizeof(mode), "%04o", c.mode & 07777);
  out += "=== " + c.change + " " + printable(name) + " (" + c.kind + (c.kind == "dir" ? "" : ", " + std::to_string(c.size) + " bytes") +
         ", mode " + mode + ")\n";
  if (c.kind == "symlink" && c.change != "deleted") out += "    -> " + printable(c.link_target) + "\n";
  if (c.kind != "file" || c.change == "deleted") return out;
  int before = -1;
  if (c.change == "modified") {
    if (host.sha256(rel) != c.sha256_before) {
      out += "    (the host's file changed since the session began: apply will refuse it)\n";
    } else {
      before = open_regular(host, rel);
    }
  }
  int after = open_regular(kept, rel);
  if (after < 0) {
    out += "    (the kept file is missing or not a regular file)\n";
  } else if ((c.mode & 0111) == 0 && (binary_fd(after) || (before >= 0 && binary_fd(before)))) {
    // (An executable is shown as text whatever bytes it holds: a script
    // with a NUL in it still runs.)
    out += "    binary: sha256 " + (c.sha256_before.empty() ? std::string("-") : c.sha256_before.substr(0, 12)) + " -> " +
           c.sha256_after.substr(0, 12) + "\n";
  } else if (c.change == "created" || before >= 0) {
    unified_diff(out, before, after, c.change == "created" ? "/dev/null" : "a/" + printable(name), "b/" + printable(name),
                 max_bytes);
  }
  for (int fd : {before, after})
    if (fd >= 0) close(fd);
  return out;
}


}  // namespace flightrec::inspect
