#pragma once
// Checks that must act on time whatever the recording thread is doing
// (decoding a flood, waiting for the disk, hashing a file): the policy's
// circuit breakers and --on-loss. They run every period on a thread of
// their own and act there (freeze, kill); what they want in the record
// they post, and the recording thread runs it when fd() is readable (the
// recorder is that thread's alone).
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace flightrec::recorder {

class Watchdog {
 public:
  using Check = std::function<void()>;
  // on_error runs on the recording thread with what a check threw.
  Watchdog(std::chrono::milliseconds period, std::function<void(const std::string&)> on_error);
  ~Watchdog();  // stops
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void add(Check check);  // before start()
  // Before start(): run the checks also whenever fd's waiters are woken
  // (edge-triggered), not only every period.
  void wake_on(int fd);
  void start();
  void stop();            // returns once no check runs any more
  // From a check: work for the recording thread (e.g. writing an entry).
  void post(std::function<void()> record);
  int fd() const { return event_fd_; }
  void run_posted();      // on the recording thread

 private:
  void run();
  std::chrono::milliseconds period_;
  std::function<void(const std::string&)> on_error_;
  std::vector<Check> checks_;
  int event_fd_ = -1;
  int stop_fd_ = -1;   // written by stop()
  int epoll_fd_ = -1;  // stop_fd_ and the wake_on() fd
  std::mutex mu_;
  bool stop_ = false;
  std::vector<std::function<void()>> posted_;
  std::thread thread_;
};

// Stops a watchdog when it goes out of scope: declared after the objects
// its checks use, it is destroyed (and the checks stopped) before them.
struct StopFirst {
  Watchdog& watchdog;
  ~StopFirst() { watchdog.stop(); }
};

}  // namespace flightrec::recorder
