#include "common/progress.h"

#include <unistd.h>

#include <cstdio>

namespace flightrec {

Progress::Progress(std::string what, int64_t total)
    : what_(std::move(what)), total_(total), tty_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()), last_(start_) {}

Progress::~Progress() { clear(); }

void Progress::clear() {
  if (!shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

void Progress::draw(int64_t done) {
  auto now = std::chrono::steady_clock::now();
  if (last_ != start_ && now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  shown_ = true;
  double secs = std::chrono::duration<double>(now - start_).count();
  if (total_ > 0 && done <= total_)
    std::fprintf(stderr, "\r\033[K%s: %lld of %lld entries (%d%%), %.0f s", what_.c_str(), (long long)done,
                 (long long)total_, int(done * 100 / total_), secs);
  else
    std::fprintf(stderr, "\r\033[K%s: %lld entries, %.0f s", what_.c_str(), (long long)done, secs);
  std::fflush(stderr);
}

}  // namespace flightrec
