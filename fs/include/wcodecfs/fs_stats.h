// wcodecfs/fs_stats.h — counters of the read path.
//
// One Stats object per Filesystem, shared by its cache, decoder and read
// path. The mount serves a JSON snapshot as the read-only file
// /.wcodecfs/stats in the mount root (see Filesystem::stats_json), so scripts
// and tests can check what a workload cost, e.g. that `ls -l` decoded nothing.
// Thread-safety: relaxed atomics; a snapshot is not one consistent instant,
// each counter is exact on its own.
#pragma once

#include <atomic>
#include <cstdint>

namespace wcodecfs {

struct Stats {
  using Counter = std::atomic<uint64_t>;

  // Chunk cache (ChunkCache): demand lookups served from memory or from a
  // decode already in flight, demand lookups that started a decode, and
  // entries dropped to stay within the byte budget.
  Counter cache_hits{0};
  Counter cache_misses{0};
  Counter cache_evictions{0};
  // Entries dropped as soon as all their bytes had gone to the kernel's page
  // cache (ChunkCache drop_behind; not counted in cache_evictions).
  Counter cache_drop_behind{0};

  // Decoder (BatchDecoder): chunks and decoded bytes produced, wall time
  // spent decoding (summed over decoder threads), and failed decodes
  // (checksum mismatch, IO error).
  Counter chunks_decoded{0};
  Counter bytes_decoded{0};
  Counter decode_ns{0};
  Counter decode_errors{0};

  // Readahead: chunks submitted for background decoding, and demand reads
  // that found a chunk readahead had decoded (or was decoding).
  Counter readahead_chunks{0};
  Counter readahead_hits{0};

  // Read path (Filesystem): read calls and bytes returned, reads that failed
  // (each became EIO or another error at the FUSE edge), lookups and opens.
  Counter reads{0};
  Counter bytes_read{0};
  Counter bytes_written{0};  // through the staging tree
  Counter read_errors{0};
  Counter lookups{0};
  Counter opens{0};

  static uint64_t get(const Counter& c) { return c.load(std::memory_order_relaxed); }
  static void add(Counter& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }
};

}  // namespace wcodecfs
