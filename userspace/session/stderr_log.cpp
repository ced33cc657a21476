#include "session/stderr_log.h"

#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/text.h"

namespace flightrec::session {

StderrLog& StderrLog::get() {
  static StderrLog* log = new StderrLog();
  return *log;
}

StderrLog::StderrLog() { std::thread([this] { run(); }).detach(); }

void StderrLog::line(std::string_view text) {
  std::lock_guard lock(mu_);
  if (queue_.size() >= 1000) return;  // the record has them all
  queue_.push_back(printable(text) + "\n");
  cv_.notify_one();
}

void StderrLog::flush(int ms) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return queue_.empty() && !writing_; });
}

void StderrLog::run() {
  for (;;) {
    std::string text;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty(); });
      text = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
    }
    (void)!write(2, text.data(), text.size());
    std::lock_guard lock(mu_);
    writing_ = false;
    cv_.notify_all();
  }
}

}  // namespace flightrec::session
