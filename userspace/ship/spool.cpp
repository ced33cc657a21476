#include "ship/spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <algorithm>
#include <fstream>

#include "common/error.h"
#include "common/system.h"

namespace flightrec::ship {

namespace {

uint64_t file_size(const std::string& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
}

}  // namespace

std::string Spool::segment_path(uint64_t segment) const {
  char name[32];
  snprintf(name, sizeof(name), "/%016llu.spool", (unsigned long long)segment);
  return dir_ + name;
}

Spool::Spool(std::string dir, uint64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes), segment_bytes_(std::clamp<uint64_t>(max_bytes / 8, 1 << 20, kSegmentBytes)) {
  if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) throw Error(errno_message("spool " + dir_, errno));
  struct stat st{};
  if (lstat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw Error("spool " + dir_ + " is not a directory");
  std::vector<uint64_t> segments;
  if (DIR* d = opendir(dir_.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() == 22 && n.ends_with(".spool") && n.find_first_not_of("0123456789") == 16)
        segments.push_back(std::stoull(n.substr(0, 16)));
    }
    closedir(d);
  }
  std::sort(segments.begin(), segments.end());
  std::ifstream cursor(dir_ + "/cursor");
  if (!(cursor >> acked_.segment >> acked_.offset)) acked_ = {segments.empty() ? 1 : segments.front(), 0};
  // Segments before the cursor are spent (removed before a crash could).
  for (uint64_t s : segments)
    if (s < acked_.segment) unlink(segment_path(s).c_str());
  std::erase_if(segments, [&](uint64_t s) { return s < acked_.segment; });
  if (segments.empty() || segments.front() != acked_.segment) acked_ = {segments.empty() ? acked_.segment : segments.front(), 0};
  // Count the records not acknowledged; cut a torn record at the very end.
  for (size_t i = 0; i < segments.size(); ++i) {
    std::string path = segment_path(segments[i]);
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(errno_message("spool " + path, errno));
    uint64_t size = file_size(path), at = segments[i] == acked_.segment ? acked_.offset : 0, valid = 0;
    for (uint64_t pos = 0; pos < size;) {
      uint32_t len = 0;
      if (pos + 4 > size || !pread_full(fd, &len, 4, pos) || pos + 4 + len > size) break;
      pos += 4 + len;
      valid = pos;
      if (pos > at) ++records_;
    }
    close(fd);
    if (valid < size) {
      if (truncate(path.c_str(), off_t(valid)) != 0) throw Error(errno_message("spool " + path, errno));
      size = valid;
    }
    bytes_ += size;
    end_ = {segments[i], size};
  }
  if (segments.empty()) end_ = acked_;
  read_ = acked_;
  acked_in_first_ = acked_.offset;
  write_fd_ = open(segment_path(end_.segment).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (write_fd_ < 0) throw Error(errno_message("spool " + segment_path(end_.segment), errno));
}

Spool::~Spool() {
  if (cursor_dirty_) write_cursor();
  if (write_fd_ >= 0) close(write_fd_);
  if (read_fd_ >= 0) close(read_fd_);
}

void Spool::frame(std::string& out, std::string_view record) {
  uint32_t len = uint32_t(record.size());
  out.append(reinterpret_cast<const char*>(&len), 4);
  out.append(record);
}

bool Spool::append(const std::vector<std::string>& records) {
  std::string framed;
  for (const auto& r : records) frame(framed, r);
  return append_framed(framed, records.size());
}

bool Spool::append_framed(std::string_view framed, size_t count) {
  std::lock_guard lock(mu_);
  if (bytes_ - acked_in_first_ + framed.size() > max_bytes_) return false;
  if (end_.offset >= segment_bytes_) {
    int fd = open(segment_path(end_.segment + 1).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    close(write_fd_);
    write_fd_ = fd;
    end_ = {end_.segment + 1, 0};
  }
  std::string_view rest = framed;
  while (!rest.empty()) {
    ssize_t n = write(write_fd_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // A short write leaves a torn record: cut it, and refuse the batch.
      uint64_t written = framed.size() - rest.size();
      if (written && ftruncate(write_fd_, off_t(end_.offset)) != 0) {
        end_.offset += written;  // cannot cut it: the reader stops at it
        bytes_ += written;
      }
      return false;
    }
    rest.remove_prefix(size_t(n));
  }
  end_.offset += framed.size();
  bytes_ += framed.size();
  records_ += count;
  return true;
}

size_t Spool::read(std::vector<std::string_view>& out, size_t n, size_t max_bytes) {
  Position end;
  {
    std::lock_guard lock(mu_);
    end = end_;
  }
  size_t got = 0, used = 0;
  std::vector<std::pair<size_t, size_t>> at;  // (offset in read_buf_, length) of each record
  while (got < n && (read_.segment < end.segment || read_.offset < end.offset)) {
    if (read_fd_ < 0 || read_fd_segment_ != read_.segment) {
      if (read_fd_ >= 0) close(read_fd_);
      read_fd_ = open(segment_path(read_.segment).c_str(), O_RDONLY | O_CLOEXEC);
      read_fd_segment_ = read_.segment;
      read_fd_size_ = 0;
      if (read_fd_ < 0) break;
    }
    // A segment before the last one is complete: its size, once.
    if (read_.segment < end.segment && !read_fd_size_) {
      struct stat st{};
      read_fd_size_ = fstat(read_fd_, &st) == 0 ? uint64_t(st.st_size) : 0;
    }
    uint64_t limit = read_.segment < end.segment ? read_fd_size_ : end.offset;
    if (read_.offset >= limit) {  // this segment is done: the next one
      read_ = {read_.segment + 1, 0};
      continue;
    }
    uint32_t len = 0;
    if (read_.offset + 4 > limit || !pread_full(read_fd_, &len, 4, read_.offset) || read_.offset + 4 + len > limit) break;
    if (got && used + len > max_bytes) break;
    if (read_buf_.size() < used + len) read_buf_.resize(std::max<size_t>(used + len, read_buf_.size() * 2));
    if (!pread_full(read_fd_, read_buf_.data() + used, len, read_.offset + 4)) break;
    at.emplace_back(used, len);
    used += len;
    read_.offset += 4 + len;
    ++got;
  }
  for (const auto& [o, l] : at) out.emplace_back(read_buf_.data() + o, l);
  read_records_ += got;
  return got;
}

void Spool::rewind() {
  read_ = acked_;
  read_records_ = 0;
}

void Spool::ack() {
  uint64_t first = acked_.segment;
  acked_ = read_;
  // A file written per batch was most of what acknowledging cost: at most every 200 ms.
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t ns = uint64_t(now.tv_sec) * 1'000'000'000 + uint64_t(now.tv_nsec);
  cursor_dirty_ = true;
  if (ns - cursor_written_ns_ >= 200'000'000 || acked_.segment != first) {
    write_cursor();
    cursor_written_ns_ = ns;
    cursor_dirty_ = false;
  }
  std::lock_guard lock(mu_);
  records_ -= std::min(records_, read_records_);
  read_records_ = 0;
  for (uint64_t s = first; s < acked_.segment; ++s) {
    std::string path = segment_path(s);
    bytes_ -= std::min(bytes_, file_size(path));
    unlink(path.c_str());
  }
  acked_in_first_ = acked_.offset;
  // Everything written is acknowledged and the segment written into holds
  // more than kCompactBytes: the writer goes on in a new one and this one
  // goes (else up to a segment of acknowledged records stays on disk while
  // the output is quiet). The cursor names the new one before the old is
  // removed, so a crash between the two loses nothing.
  if (acked_.segment == end_.segment && acked_.offset == end_.offset && end_.offset >= kCompactBytes) {
    int fd = open(segment_path(end_.segment + 1).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return;  // kept; the next ack tries again
    std::string spent = segment_path(end_.segment);
    close(write_fd_);
    write_fd_ = fd;
    if (read_fd_ >= 0 && read_fd_segment_ == end_.segment) {
      close(read_fd_);
      read_fd_ = -1;
    }
    end_ = {end_.segment + 1, 0};
    acked_ = read_ = end_;
    write_cursor();
    cursor_written_ns_ = ns;
    cursor_dirty_ = false;
    bytes_ -= std::min(bytes_, file_size(spent));
    unlink(spent.c_str());
    acked_in_first_ = 0;
  }
}

void Spool::write_cursor() {
  std::string tmp = dir_ + "/cursor.tmp";
  FILE* f = fopen(tmp.c_str(), "we");
  if (!f) return;  // the next ack tries again; a restart re-reads a little more
  fprintf(f, "%llu %llu\n", (unsigned long long)acked_.segment, (unsigned long long)acked_.offset);
  if (fclose(f) == 0) rename(tmp.c_str(), (dir_ + "/cursor").c_str());
}

uint64_t Spool::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_ - std::min(bytes_, acked_in_first_);
}

uint64_t Spool::pending() const {
  std::lock_guard lock(mu_);
  return records_;
}

}  // namespace flightrec::ship
