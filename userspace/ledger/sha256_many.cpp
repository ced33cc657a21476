#include "ledger/sha256_many.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace flightrec::ledger {

#if defined(__x86_64__)
namespace {

bool cpu_has_sha_extensions() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  bool ssse3 = c & (1u << 9), sse41 = c & (1u << 19);
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return ssse3 && sse41 && (b & (1u << 29));
}

alignas(16) constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t kInitial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

// One 64-byte block into each of N states, the N lanes' rounds interleaved.
// The SHA extensions keep the state as ABEF/CDGH halves and take the
// message schedule four words at a time (Intel's SHA extensions paper).
template <int N>
__attribute__((target("sha,sse4.1,ssse3"))) void compress(uint32_t* const state[], const uint8_t* const block[]) {
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i abef[N], cdgh[N], abef0[N], cdgh0[N], w[N][4];
  for (int j = 0; j < N; ++j) {
    __m128i dcba = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state[j])), 0xB1);
    __m128i efgh = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state[j] + 4)), 0x1B);
    abef[j] = abef0[j] = _mm_alignr_epi8(dcba, efgh, 8);
    cdgh[j] = cdgh0[j] = _mm_blend_epi16(efgh, dcba, 0xF0);
  }
  // Sixteen groups of four rounds; w[j][g % 4] holds the group's four words.
  // Both loops unrolled, so that every value stays in a register.
#pragma GCC unroll 16
  for (int g = 0; g < 16; ++g) {
    const __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(kRound + 4 * g));
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      __m128i m;
      if (g < 4) {
        m = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block[j] + 16 * g)), byte_swap);
      } else {
        // W[t] = W[t-16] + s0(W[t-15]) + W[t-7] + s1(W[t-2]), four at a time.
        m = _mm_sha256msg1_epu32(w[j][g & 3], w[j][(g + 1) & 3]);
        m = _mm_add_epi32(m, _mm_alignr_epi8(w[j][(g + 3) & 3], w[j][(g + 2) & 3], 4));
        m = _mm_sha256msg2_epu32(m, w[j][(g + 3) & 3]);
      }
      w[j][g & 3] = m;
      __m128i x = _mm_add_epi32(m, k);
      cdgh[j] = _mm_sha256rnds2_epu32(cdgh[j], abef[j], x);
      abef[j] = _mm_sha256rnds2_epu32(abef[j], cdgh[j], _mm_shuffle_epi32(x, 0x0E));
    }
  }
  for (int j = 0; j < N; ++j) {
    __m128i feba = _mm_shuffle_epi32(_mm_add_epi32(abef[j], abef0[j]), 0x1B);
    __m128i dchg = _mm_shuffle_epi32(_mm_add_epi32(cdgh[j], cdgh0[j]), 0xB1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(state[j]), _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(state[j] + 4), _mm_alignr_epi8(dchg, feba, 8));
  }
}

// A digest's bytes: its state words, big-endian.
void digest_bytes(const uint32_t state[8], Hash& out) {
  for (int i = 0; i < 8; ++i) {
    uint32_t be = __builtin_bswap32(state[i]);
    std::memcpy(out.data() + 4 * i, &be, 4);
  }
}

// One message being hashed in a lane.
struct Lane {
  const HashInput* in;
  Hash* out;
  size_t pos;     // bytes of the padded message compressed so far
  size_t length;  // of prefix || body
  size_t padded;  // length + 0x80 + zeros + the 64-bit bit count, a multiple of 64
  uint32_t state[8];
  uint8_t scratch[64];

  void start(const HashInput* m, Hash* o) {
    in = m;
    out = o;
    pos = 0;
    length = m->prefix.size() + m->body.size();
    padded = (length + 9 + 63) / 64 * 64;
    std::memcpy(state, kInitial, sizeof(state));
  }

  // The next block: straight from the body where it lies wholly inside,
  // otherwise assembled (the prefix, the message's end, the padding).
  const uint8_t* block() {
    const size_t p = in->prefix.size();
    if (pos >= p && pos + 64 <= length) return reinterpret_cast<const uint8_t*>(in->body.data()) + (pos - p);
    size_t n = 0;
    if (pos < length) {
      const size_t end = std::min(length, pos + 64);
      if (pos < p) {
        n = std::min(p, end) - pos;
        std::memcpy(scratch, in->prefix.data() + pos, n);
      }
      if (end > p) {
        const size_t from = std::max(pos, p) - p;
        std::memcpy(scratch + n, in->body.data() + from, end - p - from);
        n += end - p - from;
      }
    }
    std::memset(scratch + n, 0, 64 - n);
    if (length >= pos && length < pos + 64) scratch[length - pos] = 0x80;
    if (pos + 64 == padded) {
      const uint64_t bits = uint64_t(length) * 8;
      for (int i = 0; i < 8; ++i) scratch[56 + i] = uint8_t(bits >> (56 - 8 * i));
    }
    return scratch;
  }

  // Past the block just compressed; true when the digest is out.
  bool advance() {
    pos += 64;
    if (pos < padded) return false;
    digest_bytes(state, *out);
    return true;
  }
};

void sha256_interleaved(std::span<const HashInput> in, Hash* out) {
  constexpr int kLanes = 4;
  Lane lanes[kLanes];
  Lane* active[kLanes];
  int n = 0;
  size_t next = 0;
  while (n < kLanes && next < in.size()) {
    lanes[n].start(&in[next], &out[next]);
    active[n] = &lanes[n];
    ++n, ++next;
  }
  uint32_t* states[kLanes];
  const uint8_t* blocks[kLanes];
  while (n > 0) {
    for (int j = 0; j < n; ++j) {
      states[j] = active[j]->state;
      blocks[j] = active[j]->block();
    }
    switch (n) {
      case 4: compress<4>(states, blocks); break;
      case 3: compress<3>(states, blocks); break;
      case 2: compress<2>(states, blocks); break;
      default: compress<1>(states, blocks); break;
    }
    for (int j = 0; j < n;) {
      if (!active[j]->advance()) {
        ++j;
      } else if (next < in.size()) {
        active[j]->start(&in[next], &out[next]);
        ++next, ++j;
      } else {
        active[j] = active[--n];  // the lane retires; its slot takes the last one
      }
    }
  }
}

const bool kInterleave = cpu_has_sha_extensions();

// A 65-byte message's two blocks: prefix, 64 bytes, then its padding.
struct PairBlocks {
  uint8_t first[64], second[64];
  void fill(char prefix, const uint8_t* pair) {
    first[0] = uint8_t(prefix);
    std::memcpy(first + 1, pair, 63);
    std::memset(second, 0, sizeof(second));
    second[0] = pair[63];
    second[1] = 0x80;
    second[62] = (65 * 8) >> 8;
    second[63] = (65 * 8) & 0xff;
  }
};

template <int N>
void pairs_group(char prefix, const Hash* hashes, Hash* out) {
  PairBlocks blocks[N];
  uint32_t state[N][8];
  uint32_t* states[N];
  const uint8_t* firsts[N];
  const uint8_t* seconds[N];
  for (int j = 0; j < N; ++j) {
    blocks[j].fill(prefix, hashes[2 * j].data());
    std::memcpy(state[j], kInitial, sizeof(kInitial));
    states[j] = state[j];
    firsts[j] = blocks[j].first;
    seconds[j] = blocks[j].second;
  }
  compress<N>(states, firsts);
  compress<N>(states, seconds);
  for (int j = 0; j < N; ++j) digest_bytes(state[j], out[j]);
}

Hash of_two_interleaved(const Hash& a, const Hash& b) {
  // The second block of any 64-byte message: 0x80, zeros, its length in bits.
  static constexpr auto kPadding = [] {
    std::array<uint8_t, 64> b{};
    b[0] = 0x80;
    b[62] = (64 * 8) >> 8;
    return b;
  }();
  uint8_t message[64];
  std::memcpy(message, a.data(), 32);
  std::memcpy(message + 32, b.data(), 32);
  uint32_t state[8];
  std::memcpy(state, kInitial, sizeof(state));
  uint32_t* states[1] = {state};
  const uint8_t* first[1] = {message};
  const uint8_t* second[1] = {kPadding.data()};
  compress<1>(states, first);
  compress<1>(states, second);
  Hash out;
  digest_bytes(state, out);
  return out;
}

}  // namespace
#else
namespace {
constexpr bool kInterleave = false;
}  // namespace
#endif

// Each public function: interleaved where the CPU can, otherwise one
// digest at a time by OpenSSL.

bool sha256_many_interleaves() { return kInterleave; }

void sha256_many(std::span<const HashInput> in, Hash* out) {
#if defined(__x86_64__)
  if (kInterleave) return sha256_interleaved(in, out);
#endif
  for (size_t i = 0; i < in.size(); ++i) out[i] = sha256_parts(in[i].prefix, in[i].body);
}

void sha256_pairs(char prefix, std::span<const Hash> hashes, Hash* out) {
  static_assert(sizeof(Hash) == 32, "two adjacent hashes are one 64-byte pair");
  const size_t n = hashes.size() / 2;
#if defined(__x86_64__)
  if (kInterleave) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) pairs_group<4>(prefix, &hashes[2 * i], &out[i]);
    switch (n - i) {
      case 3: pairs_group<3>(prefix, &hashes[2 * i], &out[i]); break;
      case 2: pairs_group<2>(prefix, &hashes[2 * i], &out[i]); break;
      case 1: pairs_group<1>(prefix, &hashes[2 * i], &out[i]); break;
      default: break;
    }
    return;
  }
#endif
  for (size_t i = 0; i < n; ++i)
    out[i] = sha256_parts(std::string_view(&prefix, 1),
                          std::string_view(reinterpret_cast<const char*>(hashes[2 * i].data()), 64));
}

Hash sha256_of_two(const Hash& a, const Hash& b) {
#if defined(__x86_64__)
  if (kInterleave) return of_two_interleaved(a, b);
#endif
  return sha256_parts(as_bytes(a), as_bytes(b));
}

}  // namespace flightrec::ledger
