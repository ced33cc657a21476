#include "recorder/watchdog.h"

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <utility>

#include "common/error.h"

namespace flightrec::recorder {

Watchdog::Watchdog(std::chrono::milliseconds period, std::function<void(const std::string&)> on_error)
    : period_(period), on_error_(std::move(on_error)) {
  event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (event_fd_ < 0 || stop_fd_ < 0 || epoll_fd_ < 0 || epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_, &ev) != 0) {
    int err = errno;
    for (int fd : {event_fd_, stop_fd_, epoll_fd_})
      if (fd >= 0) close(fd);
    throw Error(errno_message("the watchdog's eventfd and epoll", err));
  }
}

Watchdog::~Watchdog() {
  stop();
  for (int fd : {event_fd_, stop_fd_, epoll_fd_}) close(fd);
}

void Watchdog::add(Check check) { checks_.push_back(std::move(check)); }

void Watchdog::wake_on(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;  // each wake-up once, however much stays readable
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) throw Error(errno_message("epoll_ctl", errno));
}

void Watchdog::start() { thread_ = std::thread([this] { run(); }); }

void Watchdog::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));
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
  // Its checks pause a storm before the ring fills: on a woken storm's
  // cores a normal thread may wait milliseconds to run, a real-time one
  // does not, and it runs for microseconds at a time. Where
  // the kernel refuses (no CAP_SYS_NICE), it runs as a normal thread.
  sched_param rt{};
  rt.sched_priority = 1;
  (void)pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt);
  // A wake-up runs the checks at once; the period still bounds the wait.
  auto next = std::chrono::steady_clock::now() + period_;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - std::chrono::steady_clock::now());
    epoll_event ev[2];
    int n = epoll_wait(epoll_fd_, ev, 2, int(std::max<int64_t>(0, left.count())));
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
    }
    if (n == 0 || std::chrono::steady_clock::now() >= next) next = std::chrono::steady_clock::now() + period_;
    for (auto& check : checks_) {
      try {
        check();
      } catch (const std::exception& e) {
        post([this, what = std::string(e.what())] { on_error_(what); });
      }
    }
  }
}

}  // namespace flightrec::recorder
