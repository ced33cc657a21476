#include "probe/ring_reader.h"

#include <linux/bpf.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace flightrec::probe {

RingReader::RingReader(int map_fd, size_t size) : size_(size), page_(size_t(sysconf(_SC_PAGESIZE))) {
  if (size_ == 0 || (size_ & (size_ - 1)) || size_ % page_)
    throw Error("a ring buffer's size must be a power of two and a multiple of the page size");
  void* cons = mmap(nullptr, page_, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
  if (cons == MAP_FAILED) throw Error(errno_message("cannot map the ring buffer's consumer position", errno));
  // The producer position's page and the data, once (the kernel would map
  // the data a second time after the first if asked for 2 * size).
  void* prod = mmap(nullptr, page_ + size_, PROT_READ, MAP_SHARED, map_fd, off_t(page_));
  if (prod == MAP_FAILED) {
    int err = errno;
    munmap(cons, page_);
    throw Error(errno_message("cannot map the ring buffer", err));
  }
  consumer_pos_ = static_cast<unsigned long*>(cons);
  producer_pos_ = static_cast<const unsigned long*>(prod);
  data_ = static_cast<const uint8_t*>(prod) + page_;
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (epoll_fd_ < 0 || epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, map_fd, &ev) != 0) {
    int err = errno;
    if (epoll_fd_ >= 0) close(epoll_fd_);
    munmap(cons, page_);
    munmap(prod, page_ + size_);
    throw Error(errno_message("cannot wait on the ring buffer", err));
  }
}

RingReader::~RingReader() {
  close(epoll_fd_);
  munmap(consumer_pos_, page_);
  munmap(const_cast<unsigned long*>(producer_pos_), page_ + size_);
}

int RingReader::consume(int budget, const Handler& handler) {
  int handed = 0;
  uint64_t mask = size_ - 1;
  uint64_t cons = __atomic_load_n(consumer_pos_, __ATOMIC_ACQUIRE);
  uint64_t prod = __atomic_load_n(producer_pos_, __ATOMIC_ACQUIRE);
  while (handed < budget) {
    if (cons >= prod) {  // caught up: more may have come meanwhile
      prod = __atomic_load_n(producer_pos_, __ATOMIC_ACQUIRE);
      if (cons >= prod) break;
    }
    // The header is 8-aligned and 8 bytes long: it never wraps.
    const auto* header = reinterpret_cast<const uint32_t*>(data_ + (cons & mask));
    uint32_t len = __atomic_load_n(header, __ATOMIC_ACQUIRE);
    if (len & BPF_RINGBUF_BUSY_BIT) break;  // reserved, not yet submitted
    bool discarded = len & BPF_RINGBUF_DISCARD_BIT;
    len &= ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
    // A length the kernel cannot have written (more than the ring) would
    // make this reader run off its mapping: stop rather than read it.
    if (len > size_ - BPF_RINGBUF_HDR_SZ) throw Error("the ring buffer holds a record longer than itself");
    uint64_t start = (cons + BPF_RINGBUF_HDR_SZ) & mask;
    if (!discarded) {
      const uint8_t* record = data_ + start;
      if (start + len > size_) {  // wraps around the end: in one piece
        wrapped_.resize(len);
        size_t first = size_ - start;
        memcpy(wrapped_.data(), data_ + start, first);
        memcpy(wrapped_.data() + first, data_, len - first);
        record = wrapped_.data();
      }
      handler(record, len);
      ++handed;
    }
    cons += (uint64_t(len) + BPF_RINGBUF_HDR_SZ + 7) & ~uint64_t(7);
    // Each record's space goes back to the kernel once it is handled.
    __atomic_store_n(consumer_pos_, cons, __ATOMIC_RELEASE);
  }
  return handed;
}

}  // namespace flightrec::probe
