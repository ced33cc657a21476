#pragma once
// The collector's single thread: waits on the ring buffer and on the
// session's own file descriptors (child pidfd, signalfd), consumes records,
// checks drop counters and commits batches on a short tick.
#include <functional>
#include <vector>

#include "probe/source.h"
#include "recorder/recorder.h"

namespace flightrec::recorder {

class EventLoop {
 public:
  EventLoop(probe::Source& source, Recorder& recorder);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  void watch_fd(int fd, std::function<void()> on_ready);
  void forget_fd(int fd);  // no longer watched (its handler is not called again)
  // Runs until stop(); `tick` runs about every tick_ms.
  void run(const std::function<void()>& tick, int tick_ms = 50);
  void stop() { running_ = false; }
  // Everything the kernel has produced goes into the record.
  void drain();

 private:
  probe::Source& capture_;
  Recorder& recorder_;
  int epoll_ = -1;
  bool running_ = false;
  std::vector<std::function<void()>> handlers_;
};

}  // namespace flightrec::recorder
