// tests/test_zstd_groups.cpp — zstd groups (format 2.11, docs/wcodec-format.md
// §6.2): small tensors of one dtype stored as one zstd frame, chunk method 3.
// The encoder's choice on the real stories260K quantized files (smaller than
// one frame each, byte for byte), the reader's rules (members give one
// stored size, a group within 1 MiB, the frame decodes to the members'
// bytes), damaged frames (every member refused, nothing else), and
// concurrent reads through the group cache.
#include <gtest/gtest.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <nlohmann/json.hpp>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "bytes.h"
#include "checksums.h"
#include "gguf_quant_util.h"
#include "testutil.h"
#include "wcodec/encode.h"
#include "wcodec/format.h"
#include "wcodec/reader.h"

namespace {

namespace fs = std::filesystem;
using wcodec::ChunkEntry;
using wcodec::Code;
using wcodec::Reader;
using wcodec::Status;

const fs::path& scratch() {
  static const wctest::ScratchDir dir;
  return dir.path();
}

void store_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void store_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

std::vector<uint8_t> encode(const std::vector<uint8_t>& orig, bool groups, const std::string& name) {
  wcodec::EncodeConfig cfg;
  cfg.threads = 2;
  cfg.zstd_groups = groups;
  auto r = wcodec::encode_safetensors(orig.data(), orig.size(), cfg, name);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : std::vector<uint8_t>{};
}

std::unique_ptr<Reader> open_bytes(const std::string& name, const std::vector<uint8_t>& b, Status* st = nullptr) {
  const fs::path p = scratch() / name;
  wctest::write_file(p, b);
  auto r = Reader::open(p.string());
  if (st) *st = r.ok() ? Status::OK() : r.status();
  return r.ok() ? std::move(r).value() : nullptr;
}

// The groups of a reader: frame offset -> its members (global chunk indexes).
std::map<uint64_t, std::vector<size_t>> groups_of(const Reader& rd) {
  std::map<uint64_t, std::vector<size_t>> g;
  for (size_t i = 0; i < rd.num_chunks(); ++i)
    if (rd.chunk(i).method == 3) g[rd.chunk(i).file_offset].push_back(i);
  return g;
}

uint16_t minor_version(const std::vector<uint8_t>& b) { return static_cast<uint16_t>(b[6] | b[7] << 8); }

// A container's index section, decompressed, and the container rebuilt
// around an edited one (header, index and footer CRCs made valid).
struct Index {
  std::vector<uint8_t> raw;
  uint64_t off = 0;
};
Index read_index(const std::vector<uint8_t>& b) {
  Index ix;
  ix.off = wcodec::load_u64le(b.data() + 32);
  const uint64_t size = wcodec::load_u64le(b.data() + 40);
  ix.raw.resize(wcodec::load_u64le(b.data() + ix.off));
  const size_t n = ZSTD_decompress(ix.raw.data(), ix.raw.size(), b.data() + ix.off + 8, size - 8);
  EXPECT_EQ(n, ix.raw.size());
  return ix;
}
std::vector<uint8_t> with_index(const std::vector<uint8_t>& b, const Index& ix) {
  std::vector<uint8_t> z(ZSTD_compressBound(ix.raw.size()));
  const size_t zn = ZSTD_compress(z.data(), z.size(), ix.raw.data(), ix.raw.size(), 1);
  std::vector<uint8_t> f(b.begin(), b.begin() + static_cast<ptrdiff_t>(ix.off));
  std::vector<uint8_t> sec(8);
  store_u64(sec.data(), ix.raw.size());
  sec.insert(sec.end(), z.begin(), z.begin() + static_cast<ptrdiff_t>(zn));
  f.insert(f.end(), sec.begin(), sec.end());
  const uint32_t index_crc = wcodec::crc32_of(sec.data(), sec.size());
  store_u64(f.data() + 40, sec.size());
  store_u32(f.data() + 80, index_crc);
  store_u32(f.data() + 124, wcodec::crc32_of(f.data(), 124));
  uint8_t foot[32];
  store_u64(foot, ix.off);
  store_u64(foot + 8, sec.size());
  store_u32(foot + 16, index_crc);
  std::memcpy(foot + 20, f.data() + 124, 4);
  store_u32(foot + 24, wcodec::crc32_of(f.data(), f.size()));
  std::memcpy(foot + 28, "CDCW", 4);
  f.insert(f.end(), foot, foot + 32);
  return f;
}
// The position of chunk e's 25-byte entry in the raw index.
size_t entry_pos(const Index& ix, const ChunkEntry& e) {
  uint8_t pat[25];
  store_u64(pat, e.file_offset);
  store_u32(pat + 8, e.stored_size);
  store_u32(pat + 12, e.decoded_size);
  pat[16] = e.method;
  store_u64(pat + 17, e.xxh3);
  auto it = std::search(ix.raw.begin(), ix.raw.end(), pat, pat + 25);
  EXPECT_NE(it, ix.raw.end()) << "chunk entry not found in the index";
  return static_cast<size_t>(it - ix.raw.begin());
}

std::string tensor_at(const Reader& rd, uint64_t off) {
  for (const auto& t : rd.header().tensors)
    if (off >= rd.data_start() + t.begin && off < rd.data_start() + t.end) return t.name;
  return {};
}

wcodec::DType dtype_at(const Reader& rd, uint64_t off) {
  for (const auto& t : rd.header().tensors)
    if (off >= rd.data_start() + t.begin && off < rd.data_start() + t.end) return t.dtype;
  ADD_FAILURE() << "no tensor at " << off;
  return wcodec::DType::kU8;
}

// Every chunk read alone, compared with the original.
void check_every_chunk(const Reader& rd, const std::vector<uint8_t>& orig) {
  for (size_t i = 0; i < rd.num_chunks(); ++i) {
    const ChunkEntry& c = rd.chunk(i);
    std::vector<uint8_t> out(c.decoded_size);
    const Status st = rd.decode_chunk(i, out.data());
    ASSERT_TRUE(st.ok()) << "chunk " << i << ": " << st.ToString();
    ASSERT_TRUE(std::equal(out.begin(), out.end(), orig.begin() + static_cast<ptrdiff_t>(c.decoded_offset)))
        << "chunk " << i << " decoded wrong bytes";
  }
}

// A safetensors file of `n` I8 tensors of 6 KiB each that zstd codes better
// than any model: each is a block of 256 codes (real weights, stories260K's
// F32 values quantized to int8, a different slice per tensor) repeated.
std::vector<uint8_t> many_small_tensors(int n) {
  const auto w = wctest::real_weights(WCODEC_DATA_DIR);
  EXPECT_FALSE(w.empty());
  if (w.empty()) return {};
  float mx = 0;
  for (float v : w) mx = std::max(mx, std::fabs(v));
  constexpr size_t kBlock = 256, kRepeat = 24;
  nlohmann::json h = nlohmann::json::object();
  std::vector<uint8_t> data;
  for (int k = 0; k < n; ++k) {
    const size_t at = data.size();
    for (size_t r = 0; r < kRepeat; ++r)
      for (size_t j = 0; j < kBlock; ++j) {
        const float v = w[(static_cast<size_t>(k) * kBlock + j) % w.size()];
        data.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::lround(v / mx * 127))));
      }
    h["t" + std::to_string(1000 + k)] = {{"dtype", "I8"}, {"shape", {kBlock * kRepeat}}, {"data_offsets", {at, data.size()}}};
  }
  std::string js = h.dump();
  while (js.size() % 8) js += ' ';
  std::vector<uint8_t> f(8);
  store_u64(f.data(), js.size());
  f.insert(f.end(), js.begin(), js.end());
  f.insert(f.end(), data.begin(), data.end());
  return f;
}

// A file encoded with groups, opened, with its groups; fails the calling
// test (and leaves rd null) if any step fails.
struct Grouped {
  std::vector<uint8_t> orig, enc;
  std::unique_ptr<Reader> rd;
  std::map<uint64_t, std::vector<size_t>> groups;
};
Grouped grouped(std::vector<uint8_t> orig, const std::string& name) {
  Grouped g;
  g.orig = std::move(orig);
  g.enc = encode(g.orig, true, name);
  g.rd = open_bytes(name + ".wcodec", g.enc);
  if (g.rd) g.groups = groups_of(*g.rd);
  EXPECT_FALSE(g.groups.empty()) << name << ": no zstd group";
  return g;
}
Grouped grouped_file(const std::string& file) { return grouped(wctest::read_file(wctest::data_dir() / file), file); }

TEST(ZstdGroups, StoriesQuantizedFilesGroupTheirSmallTensors) {
  for (const char* f : {"stories260K.rtn-int8.safetensors", "stories260K.rtn-int4.safetensors",
                        "stories260K.rtn-ternary.safetensors"}) {
    SCOPED_TRACE(f);
    const auto orig = wctest::read_file(wctest::data_dir() / f);
    const auto with = encode(orig, true, f);
    const auto without = encode(orig, false, f);
    ASSERT_FALSE(with.empty());
    ASSERT_FALSE(without.empty());
    EXPECT_LT(with.size(), without.size()) << "groups are kept only where they are smaller";
    EXPECT_EQ(minor_version(with), 11);
    EXPECT_LT(minor_version(without), 11);
    auto rd = open_bytes("groups.wcodec", with);
    ASSERT_TRUE(rd);
    auto rd0 = open_bytes("nogroups.wcodec", without);
    ASSERT_TRUE(rd0);
    EXPECT_TRUE(groups_of(*rd0).empty());
    const auto groups = groups_of(*rd);
    ASSERT_FALSE(groups.empty());
    for (const auto& [off, members] : groups) {
      ASSERT_GE(members.size(), 2u) << "a group of one chunk is its own frame";
      // Members in chunk order, back to back from 0, one dtype.
      uint32_t at = 0;
      const auto dtype = dtype_at(*rd, rd->chunk(members[0]).decoded_offset);
      for (size_t gi : members) {
        const ChunkEntry& c = rd->chunk(gi);
        EXPECT_EQ(c.group_offset, at);
        at += c.decoded_size;
        EXPECT_EQ(dtype_at(*rd, c.decoded_offset), dtype);
        EXPECT_EQ(c.stored_size, rd->chunk(members[0]).stored_size);
      }
      for (size_t gi : members) EXPECT_EQ(rd->chunk(gi).group_size, at);
      EXPECT_LE(at, 64u * 1024);
    }
    // The shares of the frames add up to the stored payloads.
    uint64_t payloads = 0, shares = 0;
    std::set<uint64_t> seen;
    for (size_t i = 0; i < rd->num_chunks(); ++i)
      if (seen.insert(rd->chunk(i).file_offset).second) payloads += rd->chunk(i).stored_size;
    for (size_t t = 0; t < rd->num_tensors(); ++t) shares += rd->tensor_summary(t).stored_bytes;
    EXPECT_EQ(shares, payloads);
    check_every_chunk(*rd, orig);
    std::vector<uint8_t> back(orig.size());
    ASSERT_TRUE(rd->read(0, back.size(), back.data()).ok());
    EXPECT_TRUE(back == orig);
    EXPECT_TRUE(rd->verify(true).ok());
  }
}

TEST(ZstdGroups, MembersOfOneGroupGiveOneStoredSize) {
  const Grouped g = grouped_file("stories260K.rtn-int8.safetensors");
  ASSERT_TRUE(g.rd && !g.groups.empty());
  const auto& enc = g.enc;
  const auto& rd = g.rd;
  const auto& groups = g.groups;
  const size_t second = groups.begin()->second[1];
  const ChunkEntry e = rd->chunk(second);
  Index ix = read_index(enc);
  const size_t at = entry_pos(ix, e);
  store_u32(ix.raw.data() + at + 8, e.stored_size - 1);
  Status st;
  EXPECT_FALSE(open_bytes("sizes.wcodec", with_index(enc, ix), &st));
  EXPECT_EQ(st.code(), Code::kCorruption);
  const std::string name = tensor_at(*rd, e.decoded_offset);
  EXPECT_NE(st.message().find("tensor \"" + name + "\" chunk 0 stored size = " + std::to_string(e.stored_size - 1)),
            std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("zstd group"), std::string::npos) << st.ToString();
}

TEST(ZstdGroups, MethodFourIsRefused) {
  const Grouped g = grouped_file("stories260K.rtn-int8.safetensors");
  ASSERT_TRUE(g.rd && !g.groups.empty());
  const auto& enc = g.enc;
  const auto& rd = g.rd;
  const auto& groups = g.groups;
  Index ix = read_index(enc);
  ix.raw[entry_pos(ix, rd->chunk(groups.begin()->second[0])) + 16] = 4;
  Status st;
  EXPECT_FALSE(open_bytes("method4.wcodec", with_index(enc, ix), &st));
  EXPECT_NE(st.message().find("method = 4 (allowed 0..3)"), std::string::npos) << st.ToString();
}

// Two groups made one (the second's members pointed at the first's frame):
// the frame decodes to fewer bytes than the members announce, so every
// member is refused, naming it; nothing else changes.
TEST(ZstdGroups, FrameThatDoesNotDecodeToItsMembersIsRefused) {
  const Grouped g = grouped_file("stories260K.rtn-int8.safetensors");
  ASSERT_TRUE(g.rd && !g.groups.empty());
  const auto &orig = g.orig, &enc = g.enc;
  const auto& rd = g.rd;
  const auto& groups = g.groups;
  ASSERT_GE(groups.size(), 2u);
  auto g0 = groups.begin(), g1 = std::next(g0);
  Index ix = read_index(enc);
  for (size_t gi : g1->second) {
    const size_t at = entry_pos(ix, rd->chunk(gi));
    store_u64(ix.raw.data() + at, g0->first);
    store_u32(ix.raw.data() + at + 8, rd->chunk(g0->second[0]).stored_size);
  }
  Status st;
  auto bad = open_bytes("merged.wcodec", with_index(enc, ix), &st);
  ASSERT_TRUE(bad) << st.ToString();
  std::set<size_t> merged(g0->second.begin(), g0->second.end());
  merged.insert(g1->second.begin(), g1->second.end());
  for (size_t i = 0; i < bad->num_chunks(); ++i) {
    const ChunkEntry& c = bad->chunk(i);
    std::vector<uint8_t> out(c.decoded_size);
    const Status s = bad->read(c.decoded_offset, c.decoded_size, out.data());
    if (merged.count(i)) {
      ASSERT_FALSE(s.ok()) << "chunk " << i;
      EXPECT_EQ(s.code(), Code::kCorruption);
      EXPECT_NE(s.message().find("tensor \"" + tensor_at(*bad, c.decoded_offset) + "\" chunk 0: its zstd group's "
                                 "frame does not decode to " + std::to_string(c.group_size) + " bytes"),
                std::string::npos)
          << s.ToString();
    } else {
      ASSERT_TRUE(s.ok()) << "chunk " << i << ": " << s.ToString();
      EXPECT_TRUE(std::equal(out.begin(), out.end(), orig.begin() + static_cast<ptrdiff_t>(c.decoded_offset)));
    }
  }
  EXPECT_FALSE(bad->verify(true).ok());
}

TEST(ZstdGroups, DamagedFrameFailsItsMembersOnly) {
  const Grouped gr = grouped_file("stories260K.rtn-ternary.safetensors");
  ASSERT_TRUE(gr.rd && !gr.groups.empty());
  const auto &orig = gr.orig, &enc = gr.enc;
  const auto& rd = gr.rd;
  const auto& groups = gr.groups;
  // The group with the most members.
  auto g = std::max_element(groups.begin(), groups.end(),
                            [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  const std::set<size_t> members(g->second.begin(), g->second.end());
  // Flips at several places of the frame: one that leaves the frame
  // decodable changes some members' bytes, which their checksums refuse;
  // the other members decode as before. One that breaks the frame fails
  // every member. No chunk outside the group changes.
  int refused = 0;
  for (uint32_t frac : {2u, 3u, 5u, 7u, 11u}) {
    SCOPED_TRACE("byte " + std::to_string(frac) + "th into the frame");
    std::vector<uint8_t> b = enc;
    b[g->first + rd->chunk(g->second[0]).stored_size / frac] ^= 0x40;
    auto bad = open_bytes("damaged.wcodec", b);
    ASSERT_TRUE(bad);
    EXPECT_FALSE(bad->verify(false).ok());
    EXPECT_FALSE(bad->verify(true).ok());
    int refused_here = 0;
    for (size_t i = 0; i < bad->num_chunks(); ++i) {
      const ChunkEntry& c = bad->chunk(i);
      std::vector<uint8_t> out(c.decoded_size);
      const Status s = bad->decode_chunk(i, out.data());
      if (!s.ok()) {
        EXPECT_TRUE(members.count(i)) << "chunk " << i << " outside the damaged group: " << s.ToString();
        EXPECT_EQ(s.code(), Code::kCorruption);
        EXPECT_NE(s.message().find("tensor \"" + tensor_at(*bad, c.decoded_offset) + "\" chunk 0:"),
                  std::string::npos)
            << s.ToString();
        ++refused_here;
        continue;
      }
      EXPECT_TRUE(std::equal(out.begin(), out.end(), orig.begin() + static_cast<ptrdiff_t>(c.decoded_offset)))
          << "chunk " << i << " decoded wrong bytes";
    }
    EXPECT_GE(refused_here, 1) << "a damaged frame refused no member";
    refused += refused_here;
  }
  EXPECT_GT(refused, 0);
}

// Many groups (more than the reader keeps decoded), read from several
// threads in an order that keeps evicting them.
TEST(ZstdGroups, ConcurrentReadsAcrossMoreGroupsThanTheCacheHolds) {
  const Grouped g = grouped(many_small_tensors(200), "many");
  ASSERT_TRUE(g.rd && !g.groups.empty());
  const auto& orig = g.orig;
  const auto& rd = g.rd;
  const auto& groups = g.groups;
  ASSERT_GT(groups.size(), 8u) << "the test needs more groups than the reader's cache holds";
  check_every_chunk(*rd, orig);
  std::vector<size_t> order;
  for (size_t k = 0; k < 8; ++k)
    for (const auto& [off, members] : groups)
      if (k < members.size()) order.push_back(members[k]);
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> th;
  for (int t = 0; t < 6; ++t)
    th.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(t));
      for (int rep = 0; rep < 20; ++rep) {
        for (size_t j = 0; j < order.size(); ++j) {
          const size_t gi = order[(j + rng() % 7) % order.size()];
          const ChunkEntry& c = rd->chunk(gi);
          std::vector<uint8_t> out(c.decoded_size);
          if (!rd->decode_chunk(gi, out.data()).ok()) ++failed;
          else if (!std::equal(out.begin(), out.end(), orig.begin() + static_cast<ptrdiff_t>(c.decoded_offset)))
            ++wrong;
        }
      }
    });
  for (auto& x : th) x.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(failed.load(), 0);
}

// A group beyond 1 MiB (the members of every group pointed at one frame) is
// refused at open, naming the chunk where it passes the limit.
TEST(ZstdGroups, GroupOverOneMebibyteIsRefused) {
  const Grouped g = grouped(many_small_tensors(200), "many");
  ASSERT_TRUE(g.rd && !g.groups.empty());
  const auto& enc = g.enc;
  const auto& rd = g.rd;
  const auto& groups = g.groups;
  Index ix = read_index(enc);
  uint64_t total = 0;
  size_t over = SIZE_MAX;
  const ChunkEntry first = rd->chunk(groups.begin()->second[0]);
  for (size_t i = 0; i < rd->num_chunks(); ++i) {
    const ChunkEntry& c = rd->chunk(i);
    if (c.method != 3) continue;
    total += c.decoded_size;
    if (total > wcodec::kMaxZstdGroupDecoded && over == SIZE_MAX) over = i;
    const size_t at = entry_pos(ix, c);
    store_u64(ix.raw.data() + at, first.file_offset);
    store_u32(ix.raw.data() + at + 8, first.stored_size);
  }
  ASSERT_NE(over, SIZE_MAX) << "the members come to " << total << " bytes, within the limit";
  Status st;
  EXPECT_FALSE(open_bytes("huge.wcodec", with_index(enc, ix), &st));
  EXPECT_NE(st.message().find("tensor \"" + tensor_at(*rd, rd->chunk(over).decoded_offset) +
                              "\" chunk 0 zstd group end"),
            std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("at most 1048576"), std::string::npos) << st.ToString();
}

}  // namespace
