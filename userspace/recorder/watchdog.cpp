#include "recorder/watchdog.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <utility>

#include "common/error.h"

namespace flightrec::recorder {

Watchdog::Watchdog(std::chrono::milliseconds period, std::function<void(const std::string&)> on_error)
    : period_(period), on_error_(std::move(on_error)) {
  event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ < 0) throw Error(errno_message("eventfd", errno));
}

Watchdog::~Watchdog() {
  stop();
  close(event_fd_);
}

void Watchdog::add(Check check) { checks_.push_back(std::move(check)); }

void Watchdog::start() { thread_ = std::thread([this] { run(); }); }

void Watchdog::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::post(std::function<void()> record) {
  {
    std::lock_guard lock(mu_);
    posted_.push_back(std::move(record));
  }
  uint64_t one = 1;
  (void)!write(event_fd_, &one, sizeof(one));
}

void Watchdog::run_posted() {
  uint64_t count;
  (void)!read(event_fd_, &count, sizeof(count));
  std::vector<std::function<void()>> work;
  {
    std::lock_guard lock(mu_);
    work.swap(posted_);
  }
  for (auto& w : work) w();
}

void Watchdog::run() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, period_, [&] { return stop_; })) {
    lock.unlock();
    for (auto& check : checks_) {
      try {
        check();
      } catch (const std::exception& e) {
        post([this, what = std::string(e.what())] { on_error_(what); });
      }
    }
    lock.lock();
  }
}

}  // namespace flightrec::recorder
