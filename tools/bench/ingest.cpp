// Ingest benchmark: how many kernel records per second the collector turns
// into stored, hash-chained entries on one core, stage by stage. Records are
// built in the exact ring-buffer layout (a mix like a real agent's: mostly
// plain syscalls, a quarter with a path, a few process events) and fed
// through the same code the collector runs.
//   ingest [N]      default N = 1000000
#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "events/decode.h"
#include "ledger/block.h"
#include "ledger/checkpoint.h"
#include "ledger/hash.h"
#include "ledger/keys.h"
#include "ledger/merkle.h"
#include "ledger/sha256_many.h"
#include "ledger/store.h"
#include "ledger/verify.h"
#include "ledger/writer.h"
#include "recorder/recorder.h"

extern "C" {
#include "flightrec/abi/events.h"
}

using namespace flightrec;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<std::vector<uint8_t>> make_records(size_t n) {
  std::vector<std::vector<uint8_t>> out;
  out.reserve(n);
  const std::string path = "/usr/lib/python3.11/encodings/__init__.py";
  for (size_t i = 0; i < n; ++i) {
    fr_header h{};
    h.ts_mono_ns = 1'000'000'000ull + i * 1000;
    h.cgroup_id = 4242;
    h.pid = h.tid = 1000 + uint32_t(i % 7);
    h.ppid = 999;
    std::memcpy(h.comm, "python3", 7);
    if (i % 20 == 19) {
      fr_fork f{};
      f.h = h;
      f.h.type = FR_REC_FORK;
      f.h.size = sizeof(f);
      f.child_pid = f.child_tid = 5000 + uint32_t(i);
      std::vector<uint8_t> b(sizeof(f));
      std::memcpy(b.data(), &f, sizeof(f));
      out.push_back(std::move(b));
      continue;
    }
    fr_syscall s{};
    s.h = h;
    s.h.type = FR_REC_SYSCALL;
    s.enter_ns = h.ts_mono_ns - 300;
    for (int a = 0; a < 6; ++a) s.args[a] = int64_t(0x7ffd0000 + i * 8 + a);
    bool with_path = i % 4 == 1;
    s.nr = with_path ? 257 : 0;
    s.ret = with_path ? 3 : 832;
    size_t size = sizeof(s);
    if (with_path) {
      s.flags = FR_SC_HAS_DATA;
      s.str_len[0] = uint16_t(path.size());
      size += sizeof(fr_syscall_data) + path.size();
    }
    s.h.size = uint32_t(size);
    std::vector<uint8_t> b(size, 0);
    std::memcpy(b.data(), &s, sizeof(s));
    if (with_path) std::memcpy(b.data() + sizeof(s) + sizeof(fr_syscall_data), path.data(), path.size());
    out.push_back(std::move(b));
  }
  return out;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// CPU seconds this process has used (all threads, user + system).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Every record through the collector's own code into a new store at db:
// decoding and JSON on this thread, sealing on the writer's.
void run_pipeline(const std::vector<std::vector<uint8_t>>& records, const std::string& db, double* wall_s,
                  double* cpu_s) {
  ledger::Store store(db, ledger::Store::Mode::Write);
  recorder::SessionMeta meta;
  meta.mode = "run";
  meta.command = {"bench"};
  recorder::Recorder rec(store, meta);
  auto t = Clock::now();
  double cpu0 = cpu_seconds();
  // The event loop reads the ring in runs and looks at the clock once a
  // run (at most Source::kConsumeBudget records; at a high rate, thousands).
  size_t in_run = 0;
  for (const auto& r : records) {
    rec.on_record(r.data(), r.size());
    if (++in_run == 1024) {
      rec.flush_if_due();
      in_run = 0;
    }
  }
  rec.flush();
  *wall_s = seconds_since(t);
  *cpu_s = cpu_seconds() - cpu0;
  rec.finish(0, "bench");
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  // For profiling one stage: "pipeline" skips the stage-by-stage runs,
  // "decode" runs only decode + canonical JSON, as the collector thread does.
  std::string stage = argc > 2 ? argv[2] : "";
  auto records = make_records(n);
  if (stage == "pipeline") {
    char dir[] = "/tmp/flightrec-ingest-XXXXXX";
    std::string db = std::string(mkdtemp(dir)) + "/ingest.db";
    double wall_s, cpu_s;
    run_pipeline(records, db, &wall_s, &cpu_s);
    std::filesystem::remove_all(dir);
    std::printf("full pipeline to SQLite : %9.0f entries/s; %.2f us of CPU each\n", n / wall_s, cpu_s / n * 1e6);
    return 0;
  }
  events::DecodeContext ctx;
  if (stage == "decode") {
    std::string out;
    events::Entry entry;  // kept across records, as the recorder keeps its own
    auto t0 = Clock::now();
    for (const auto& r : records) {
      out.clear();
      events::decode_record(r.data(), r.size(), ctx, entry);
      entry.append_canonical(out);
    }
    double s = seconds_since(t0);
    std::printf("decode + canonical JSON : %9.0f entries/s (%.2f us each)\n", n / s, s / n * 1e6);
    return 0;
  }

  auto t = Clock::now();
  size_t bytes = 0;
  {
    events::Entry entry;
    for (const auto& r : records) {
      events::decode_record(r.data(), r.size(), ctx, entry);
      bytes += entry.canonical().size();
    }
  }
  double decode_s = seconds_since(t);

  std::vector<std::string> bodies;
  bodies.reserve(n);
  for (const auto& r : records) bodies.push_back(events::decode_record(r.data(), r.size(), ctx).canonical());
  t = Clock::now();
  ledger::Hash head = ledger::kChainStart;
  for (const auto& b : bodies) head = ledger::chain_next(head, ledger::leaf_hash(b));
  double hash_s = seconds_since(t);

  t = Clock::now();
  ledger::CompactTree tree;
  head = ledger::kChainStart;
  for (const auto& b : bodies) {
    ledger::Hash leaf = ledger::leaf_hash(b);
    head = ledger::chain_next(head, leaf);
    tree.append(leaf);
  }
  double merkle_s = seconds_since(t);

  // The same as the writer does it: a batch's leaves, then its tree
  // nodes, hashed several at a time (sha256_many); the chain one by one.
  t = Clock::now();
  {
    ledger::CompactTree batched;
    head = ledger::kChainStart;
    std::vector<ledger::HashInput> inputs;
    std::vector<ledger::Hash> leaves;
    const size_t kBatch = ledger::SessionWriter::kBatch;
    for (size_t from = 0; from < bodies.size(); from += kBatch) {
      size_t count = std::min(kBatch, bodies.size() - from);
      inputs.clear();
      for (size_t i = from; i < from + count; ++i) inputs.push_back({ledger::kLeafPrefix, bodies[i]});
      leaves.resize(count);
      ledger::sha256_many(inputs, leaves.data());
      for (const auto& leaf : leaves) head = ledger::chain_next(head, leaf);
      batched.append_all(leaves);
    }
    if (batched.root() != tree.root()) {
      std::fprintf(stderr, "bench: the batched tree differs from the one built leaf by leaf\n");
      return 1;
    }
  }
  double batched_s = seconds_since(t);

  // Packing into blocks and compressing them, as the writer thread does.
  t = Clock::now();
  size_t packed = 0;
  {
    ledger::BlockBuilder builder;
    ledger::Hash leaf{};
    for (const auto& b : bodies) {
      builder.add("syscall", 1000, 1, leaf, b, {}, false);  // (paths hashed: in the full pipeline below)
      if (builder.full()) packed += builder.seal(1, 1, leaf).data.size();
    }
    if (!builder.empty()) packed += builder.seal(1, 1, leaf).data.size();
  }
  double block_s = seconds_since(t);

  // Checkpoint signing and checking, one at a time.
  auto key = ledger::SigningKey::generate("bench");
  ledger::Checkpoint cp{"flightrec/bench/0", n, tree.root(), head};
  const int kSigs = 2000;
  std::string note;
  t = Clock::now();
  for (int i = 0; i < kSigs; ++i) note = ledger::sign_checkpoint(cp, &key);
  double sign_s = seconds_since(t) / kSigs;
  std::string why;
  auto parsed = ledger::parse_note(note, &why);
  t = Clock::now();
  for (int i = 0; i < kSigs; ++i)
    if (!ledger::check_signature(*parsed, key.verifier()).empty()) return 1;
  double check_s = seconds_since(t) / kSigs;

  char dir[] = "/tmp/flightrec-ingest-XXXXXX";
  std::string db = std::string(mkdtemp(dir)) + "/ingest.db";
  double all_s, all_cpu_s;
  run_pipeline(records, db, &all_s, &all_cpu_s);
  auto db_bytes = std::filesystem::file_size(db);

  // Verification as of a bundle: every body checked (canonical form, seq,
  // session), hashed, chained and added to the tree; checkpoints every 1000.
  double verify_s = 0;
  int64_t verified = 0;
  {
    ledger::Store store(db, ledger::Store::Mode::Read);
    std::vector<std::string> stored;
    ledger::EntryFilter f;
    f.session = 1;
    store.for_each_entry(f, [&](const ledger::EntryRow& e) {
      stored.push_back(e.body);
      return true;
    });
    auto checkpoints = store.checkpoints(1);
    t = Clock::now();
    ledger::SessionVerifier v(1, nullptr, nullptr);
    size_t next = 0;
    for (const auto& b : stored) {
      if (!v.add_entry(b)) break;
      while (next < checkpoints.size() && checkpoints[next].tree_size == v.entries())
        v.add_checkpoint(checkpoints[next++].note);
    }
    bool ok = v.finish().ok;
    verify_s = seconds_since(t);
    verified = v.entries();
    if (!ok) {
      std::fprintf(stderr, "bench: verification failed: %s\n", v.verdict().reason.c_str());
      return 1;
    }
  }
  // Filtered queries: fork entries are in every block (each is read);
  // there are no exec entries (the block index skips every block).
  auto query = [&](const char* type, size_t* hits) {
    ledger::Store store(db, ledger::Store::Mode::Read);
    ledger::EntryFilter f;
    f.types = {type};
    auto t0 = Clock::now();
    store.for_each_entry(f, [&](const ledger::EntryRow&) { return ++*hits; });
    return seconds_since(t0);
  };
  size_t fork_hits = 0, exec_hits = 0;
  double fork_s = query("fork", &fork_hits), exec_s = query("exec", &exec_hits);
  // By path: a quarter of the entries open a file under /usr/lib (every
  // block holds some); none names /etc (the path index skips the blocks
  // but those its filter cannot tell apart).
  auto query_path = [&](const char* path, size_t* hits, size_t* blocks) {
    ledger::Store store(db, ledger::Store::Mode::Read);
    ledger::EntryFilter f;
    f.path = path;
    int64_t last_block = -1;
    auto t0 = Clock::now();
    store.for_each_entry(f, [&](const ledger::EntryRow& e) {
      if (e.block->first_seq != last_block) ++*blocks;
      last_block = e.block->first_seq;
      *hits += e.body.find(path) != std::string::npos;
      return true;
    });
    return seconds_since(t0);
  };
  size_t lib_hits = 0, lib_blocks = 0, etc_hits = 0, etc_blocks = 0;
  double lib_s = query_path("/usr/lib", &lib_hits, &lib_blocks), etc_s = query_path("/etc", &etc_hits, &etc_blocks);
  int64_t all_blocks = 0;
  {
    ledger::Store store(db, ledger::Store::Mode::Read);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(store.handle(), "SELECT count(*) FROM blocks", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      all_blocks = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  std::filesystem::remove_all(dir);

  std::printf("records: %zu, mean entry %zu bytes, database %.0f bytes/entry\n", n, bytes / n,
              double(db_bytes) / double(n));
  std::printf("decode + canonical JSON : %9.0f entries/s (%.2f us each)\n", n / decode_s, decode_s / n * 1e6);
  std::printf("leaf + chain hashing    : %9.0f entries/s (%.2f us each)\n", n / hash_s, hash_s / n * 1e6);
  std::printf("+ Merkle tree update    : %9.0f entries/s (%.2f us each)\n", n / merkle_s, merkle_s / n * 1e6);
  std::printf("  the same, batched     : %9.0f entries/s (%.2f us each; %s)\n", n / batched_s,
              batched_s / n * 1e6, ledger::sha256_many_interleaves() ? "interleaved" : "one at a time");
  std::printf("blocks (zstd)           : %9.0f entries/s (%.2f us each; %.1f bytes/entry compressed)\n",
              n / block_s, block_s / n * 1e6, double(packed) / double(n));
  std::printf("full pipeline to SQLite : %9.0f entries/s (%.2f us each; writer thread hashes and stores)\n",
              n / all_s, all_s / n * 1e6);
  std::printf("  CPU, all threads      : %9.0f entries per CPU-second (%.2f us each)\n", n / all_cpu_s,
              all_cpu_s / n * 1e6);
  std::printf("read, type filter       : %.3f s for %zu fork entries (every block read), %.3f s for %zu exec (every block skipped)\n",
              fork_s, fork_hits, exec_s, exec_hits);
  std::printf("read, path filter       : %.3f s for %zu entries under /usr/lib (%zu of %lld blocks read), %.3f s for %zu under /etc (%zu read)\n",
              lib_s, lib_hits, lib_blocks, static_cast<long long>(all_blocks), etc_s, etc_hits, etc_blocks);
  std::printf("verify (as a bundle)    : %9.0f entries/s (%.2f us each)\n", verified / verify_s,
              verify_s / double(verified) * 1e6);
  std::printf("checkpoint: sign %.1f us, verify %.1f us (one per 1000 entries: %.3f us per entry)\n",
              sign_s * 1e6, check_s * 1e6, sign_s * 1e6 / 1000);
  return 0;
}
