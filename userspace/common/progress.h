#pragma once
// A one-line progress report for long reads (verify, export): shown on a
// terminal only, from the 4096th entry on, at most five times a second,
// and erased when done, so pipes and logs never see it.
#include <chrono>
#include <cstdint>
#include <string>

namespace flightrec {

class Progress {
 public:
  // total: the work expected, in entries (0: unknown, no percentage).
  Progress(std::string what, int64_t total);
  ~Progress();  // erases the line
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Erases the line now (before writing to the same terminal); it comes back at the next update.
  void clear();
  // Shows nothing from now on (e.g. the output itself goes to the terminal).
  void disable() {
    clear();
    tty_ = false;
  }

  // Cheap to call for every entry: it looks at the clock every 4096 calls.
  void update(int64_t done) {
    if (!tty_) return;
    if ((++calls_ & 4095) == 0) draw(done);
  }

 private:
  void draw(int64_t done);

  std::string what_;
  int64_t total_;
  bool tty_;
  bool shown_ = false;
  uint64_t calls_ = 0;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace flightrec
