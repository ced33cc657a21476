#pragma once
// Lines for stderr, written by a thread of their own: the command shares
// flightrec's terminal and can stop its output (tcflow), which must not
// stall the recorder. Never destroyed: a writer blocked for good does not
// hold up flightrec's exit.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>

namespace flightrec::session {

class StderrLog {
 public:
  static StderrLog& get();
  // One line; what the session named in it (paths, process names) is
  // escaped, so it cannot move the cursor, rewrite or hide other lines.
  void line(std::string_view text);
  // Waits up to `ms` for queued lines to be written.
  void flush(int ms);

 private:
  StderrLog();
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  bool writing_ = false;
};

}  // namespace flightrec::session
