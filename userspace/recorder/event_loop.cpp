#include "recorder/event_loop.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>

#include "common/error.h"
#include "common/system.h"

namespace flightrec::recorder {

EventLoop::EventLoop(probe::Source& source, Recorder& recorder)
    : capture_(source), recorder_(recorder) {
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_ < 0) throw Error(errno_message("epoll_create1", errno));
  watch_fd(capture_.poll_fd(), [] {});
}

EventLoop::~EventLoop() { close(epoll_); }

void EventLoop::watch_fd(int fd, std::function<void()> on_ready) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = handlers_.size();
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0)
    throw Error(errno_message("epoll_ctl", errno));
  handlers_.push_back(std::move(on_ready));
}

void EventLoop::forget_fd(int fd) { epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr); }

void EventLoop::drain() {
  capture_.drain_to_now();
  recorder_.note_drops(capture_.drops_per_cpu(), capture_.program_misses());
  recorder_.flush();
}

void EventLoop::run(const std::function<void()>& tick, int tick_ms) {
  running_ = true;
  uint64_t next_tick = mono_ns();
  epoll_event events[8];
  bool more = false;  // the last read stopped at its budget: the ring has more now
  while (running_) {
    int n = epoll_wait(epoll_, events, 8, more ? 0 : tick_ms);
    if (n < 0 && errno != EINTR) throw Error(errno_message("epoll_wait", errno));
    // The ring is read on every wake-up: the kernel wakes us only when
    // it is filling up, otherwise the tick is what collects records.
    more = capture_.consume() >= probe::Source::kConsumeBudget;
    for (int i = 0; i < n; ++i) handlers_[events[i].data.u64]();
    uint64_t now = mono_ns();
    if (now >= next_tick) {
      next_tick = now + uint64_t(tick_ms) * 1'000'000ull;
      recorder_.note_drops(capture_.drops_per_cpu(), capture_.program_misses());
      recorder_.checkpoint_if_due();
      tick();
    }
    recorder_.flush_if_due();
  }
}

}  // namespace flightrec::recorder
