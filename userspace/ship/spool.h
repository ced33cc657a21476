#pragma once
// An append-only queue on disk: what an output took but the remote has not
// acknowledged yet. Writers append records (any thread); one reader reads
// them in order, and acknowledges what it read once the remote has it.
// The acknowledged position is kept in a file beside the segments, so a
// restart (of the daemon or of the remote) resumes where the remote left
// off: records read but not acknowledged are read again (the remote drops
// what it had, by their ids).
//
//   DIR/0000000000000001.spool ...   segments (64 MiB, or an eighth of the bound if
//                                    smaller); records: u32 length, bytes
//   DIR/cursor                       "SEGMENT OFFSET": the first record not acknowledged
//
// Writes are not fsync'ed: what the kernel took survives the daemon's
// death, not the machine's (the record itself says what was lost then).
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace flightrec::ship {

class Spool {
 public:
  static constexpr uint64_t kSegmentBytes = 64ull << 20;
  static constexpr uint64_t kCompactBytes = 1ull << 20;  // acknowledged bytes a quiet spool may keep on disk
  // Opens (or makes, 0700) dir; a record cut short at the end (a crash
  // mid-write) is dropped. max_bytes bounds what is not acknowledged yet
  // (the disk holds at most one segment more). Throws Error.
  Spool(std::string dir, uint64_t max_bytes);
  ~Spool();
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  // Appends records (each framed here); false, appending none, when what
  // is not acknowledged would pass max_bytes. Any thread.
  bool append(const std::vector<std::string>& records);
  // The same for records framed already (frame() each into one buffer): one copy less.
  static void frame(std::string& out, std::string_view record);
  bool append_framed(std::string_view framed, size_t count);

  // The reader's side (one thread). Up to n records (max_bytes in all,
  // at least one) from the read position, which moves past them; views
  // into a buffer of the spool's, valid until the next read.
  size_t read(std::vector<std::string_view>& out, size_t n, size_t max_bytes);
  void rewind();  // the read position back to the first record not acknowledged
  // Everything read is acknowledged: spent segments removed (and the one
  // written into, once all of it is acknowledged and it holds more than
  // kCompactBytes), and the position kept (in the cursor file at most
  // every 200 ms, and by the destructor: a restart after a crash reads
  // again at most that much).
  void ack();

  uint64_t bytes() const;    // not acknowledged
  uint64_t pending() const;  // records not acknowledged
  const std::string& dir() const { return dir_; }

 private:
  struct Position {
    uint64_t segment = 1, offset = 0;
  };
  std::string segment_path(uint64_t segment) const;
  void write_cursor();

  std::string dir_;
  uint64_t max_bytes_, segment_bytes_;
  mutable std::mutex mu_;      // the writers' side and the counters
  int write_fd_ = -1;
  Position end_;               // where the next record goes
  uint64_t bytes_ = 0;         // of every segment on disk
  uint64_t acked_in_first_ = 0;  // of those, acknowledged (the first segment's part before the cursor)
  uint64_t records_ = 0;       // appended and not acknowledged
  // The reader's side.
  Position acked_, read_;
  uint64_t read_records_ = 0;  // read since the last ack or rewind
  int read_fd_ = -1;
  uint64_t read_fd_segment_ = 0, read_fd_size_ = 0;
  std::vector<char> read_buf_;     // what read() returned views into (kept: no allocation per read)
  uint64_t cursor_written_ns_ = 0;
  bool cursor_dirty_ = false;
};

}  // namespace flightrec::ship
