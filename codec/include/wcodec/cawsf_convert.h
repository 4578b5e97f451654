// wcodec/cawsf_convert.h — the NDSQ converter: a safetensors checkpoint (one
// file or a directory of shards) to a CAWSF version 2 file.
//
// Each matrix (a float tensor of 2+ dimensions: rows = shape[0], cols = the
// product of the rest) is decomposed as the seed describes: L by truncated
// SVD (LAPACK sgesdd), stored as fp16 factors; the residue's outliers (|v| at
// or above the `outlier_q` quantile) into S; its diagonal into D (fp16); the
// rest into R by product quantization (d = 128 values per block, m
// sub-spaces, k centroids each, k-means from FAISS). Each component is
// computed against the fp16-rounded ones before it, and the S values last,
// so that they correct what L, D and R leave at their coordinates. Every
// other tensor is stored as it is. The relative reconstruction error of each
// tensor is measured on the rebuilt tensor (the reader's arithmetic) and
// recorded in META.
// Thread-safety: convert_to_cawsf runs tensors on `threads` worker threads;
// the progress callback is called from them under a lock.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "wcodec/status.h"

namespace wcodec::cawsf {

struct ConvertOptions {
  uint32_t rank = 64;
  double outlier_q = 0.999;
  uint32_t pq_m = 8;
  uint32_t pq_k = 256;
  uint32_t pq_d = 128;        // values per PQ block (the reference's 128)
  uint32_t max_layers = 0;    // decompose at most this many matrices (0: all); the rest are stored
  uint64_t max_elems = 0;     // store matrices above this many elements as they are (0: no limit)
  int threads = 1;
  int kmeans_iters = 25;
  std::function<void(size_t done, size_t total)> progress;
};

struct ConvertRow {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  bool raw = false;
  uint32_t rank = 0, pq_k = 0;
  uint64_t outliers = 0;
  uint64_t orig_bytes = 0;
  uint64_t stored_bytes = 0;  // payload bytes as stored (compressed), its codebook included
  double rel_error = 0;       // ‖W − Ŵ‖_F / ‖W‖_F of the rebuilt tensor (0 for stored tensors)
};

// Converts `inputs` (.safetensors files, their tensors in order) to `out`.
// Refuses (kInvalidArgument) options out of range: rank ≥ 1, 0 < q ≤ 1,
// 1 ≤ m ≤ d with m dividing d, 1 ≤ k ≤ 256.
Result<std::vector<ConvertRow>> convert_to_cawsf(const std::vector<std::string>& inputs, const std::string& out,
                                                 const ConvertOptions& opt, const std::string& extra_meta_json = "{}");

}  // namespace wcodec::cawsf
