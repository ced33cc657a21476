#pragma once
// A directory tree flightrec reads or changes as host root on behalf of a
// sandbox (an overlay's layer, the host's work directory), without ever
// leaving it: below its root only, no symlink followed on any component,
// no other mount entered, no magic link, no open that can block. What is in
// such a tree was made or named by the sandbox (a symlink "L -> /" means
// the host's / to a host lookup), so every path under it is opened this
// way and never by a plain open of a joined path.
#include <sys/stat.h>

#include <string>
#include <vector>

namespace flightrec::sandbox {

class Layer {
 public:
  explicit Layer(const std::string& root);
  ~Layer();
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;
  bool ok() const { return fd_ >= 0; }
  bool is(dev_t dev, ino_t ino) const;  // the same directory as one seen before

  // rel: "" for the root, or "/a/b". An fd, or -1 with errno set.
  int open_at(const std::string& rel, int flags) const;
  // The directory holding rel (O_PATH), and rel's last component.
  int open_parent(const std::string& rel, std::string* name) const;
  bool stat_at(const std::string& rel, struct stat* st) const;
  std::string sha256(const std::string& rel) const;  // regular files only; "" otherwise
  std::string link(const std::string& rel) const;
  std::vector<std::string> list(const std::string& rel) const;  // sorted
  // overlayfs marks a directory that replaced a lower one as opaque.
  bool opaque_dir(const std::string& rel) const;

 private:
  int fd_;
};

// A regular file's SHA-256 (hex), read up to the size it had when looked
// at, so a file that grows while it is read (or never ends) cannot hold
// flightrec up; "" for anything else, on error, or when it shrank meanwhile.
std::string sha256_fd(int fd);

}  // namespace flightrec::sandbox
