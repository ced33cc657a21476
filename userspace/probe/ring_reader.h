#pragma once
// The reading end of a BPF ring buffer, with its data pages mapped once.
// libbpf's ring_buffer maps them twice, back to back, so that a record that
// wraps around the end reads as one piece; the kernel maps every page when
// the mapping is made, so the recorder's RSS carried twice the ring (16 MB
// of `run`'s 31 MB; 128 MB for flightrecd's 64 MiB default). Here a record
// that wraps (at most one per lap) is copied into one piece instead.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace flightrec::probe {

class RingReader {
 public:
  // `map_fd`: a BPF_MAP_TYPE_RINGBUF of `size` data bytes (a power of two,
  // a multiple of the page size). Throws Error when it cannot be mapped.
  RingReader(int map_fd, size_t size);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  using Handler = std::function<void(const void* data, size_t size)>;
  // Hands the committed records, in order, to `handler`, at most `budget`
  // of them; stops early at a record still being written. Returns how
  // many were handed over (discarded records are skipped, not counted).
  int consume(int budget, const Handler& handler);

  // Readable (EPOLLIN) when the kernel wakes the ring's readers.
  int epoll_fd() const { return epoll_fd_; }
  size_t size() const { return size_; }
  uint64_t consumer_pos() const { return __atomic_load_n(consumer_pos_, __ATOMIC_ACQUIRE); }
  uint64_t producer_pos() const { return __atomic_load_n(producer_pos_, __ATOMIC_ACQUIRE); }

 private:
  size_t size_;
  size_t page_;
  unsigned long* consumer_pos_ = nullptr;             // page 0, the one the reader may write
  const unsigned long* producer_pos_ = nullptr;       // page 1, then the data once
  const uint8_t* data_ = nullptr;
  int epoll_fd_ = -1;
  std::vector<uint8_t> wrapped_;                      // a record that wraps, in one piece
};

}  // namespace flightrec::probe
