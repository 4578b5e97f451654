// tests/test_mount_trellis.cpp — Trellis stores through a real FUSE mount
// (docs/trellis.md §7): a v2 store quantized from real weights is shown as
// its v3 form, every file of which has the SHA-256 of the file `wcodec
// trellis migrate` writes for the same store (read with sha256sum, cp and
// parallel readers at random offsets); the v2 entries are hidden, the
// config and tokenizer files stay; a v3 store is shown unchanged; the
// view's files are passthrough and inline extents (nothing decoded); a
// changed v2 store is a changed view; the view passes `validate` read
// through the mount.
//
// Needs /dev/fuse and fusermount3 (CI runs as root); skipped otherwise.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "mount_fixture.h"
#include "testutil.h"
#include "wcodec/safetensors.h"
#include "wcodec/trellis.h"

namespace sfs = std::filesystem;
using namespace mounttest;

namespace {

std::set<std::string> names(const sfs::path& d) {
  std::set<std::string> s;
  for (const auto& e : sfs::directory_iterator(d)) s.insert(e.path().filename().string());
  return s;
}

std::string tool() { return q(WCODEC_TOOL); }

uint16_t f16(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

// The dense view `dense` of store `store` (a valid v2 or v3 store on the
// host) against the quantizer's own dequantization (F16, round to nearest
// even), its recorded mse against the real weights of `model`, and the
// base tensors' bytes.
void check_dense(const sfs::path& dense, const sfs::path& store, const sfs::path& model) {
  const auto bytes = wctest::read_file(dense);
  auto h = wcodec::parse_safetensors_header(bytes.data(), bytes.size(), bytes.size(), dense.string());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  const auto orig = wctest::read_file(model);
  auto oh = wcodec::parse_safetensors_header(orig.data(), orig.size(), orig.size(), model.string());
  ASSERT_TRUE(oh.ok());
  auto dir = wcodec::trellis_posix_dir(store.string());
  const auto st = wcodec::trellis_read(*dir);
  ASSERT_TRUE(st.problems.empty());
  std::map<std::string, const wcodec::TensorInfo*> dense_t, orig_t;
  for (const auto& t : h->tensors) dense_t[t.name] = &t;
  for (const auto& t : oh->tensors) orig_t[t.name] = &t;
  EXPECT_EQ(dense_t.size(), orig_t.size()) << "every tensor of the model, under its name";
  size_t checked = 0;
  for (const auto& w : st.weights) {
    SCOPED_TRACE(w.name);
    ASSERT_TRUE(dense_t.count(w.name) && orig_t.count(w.name));
    const auto& d = *dense_t[w.name];
    EXPECT_EQ(d.dtype, wcodec::DType::kF16);
    EXPECT_EQ(d.shape, orig_t[w.name]->shape);
    std::vector<uint8_t> part[4];
    for (int p = 0; p < 4; ++p) {
      const auto& t = st.tensors[w.parts[p]];
      part[p].resize(t.info.nbytes());
      ASSERT_TRUE(dir->read(t.file, t.offset, part[p].size(), part[p].data()).ok());
    }
    wcodec::TrellisComponents c{part[0].data(), part[0].size(), part[1].data(), part[2].data(), part[3].data()};
    std::vector<float> v(w.out * w.in);
    ASSERT_TRUE(wcodec::trellis_dequantize_rows(c, w.out, w.in, w.bits, st.hadamard, 0, w.out, v.data()).ok());
    const uint8_t* db = bytes.data() + h->data_start + d.begin;
    const auto& o = *orig_t[w.name];
    const uint8_t* ob = orig.data() + oh->data_start + o.begin;
    double sse = 0;
    size_t wrong = 0;
    for (size_t k = 0; k < v.size(); ++k) {
      const uint16_t got = static_cast<uint16_t>(db[2 * k] | (db[2 * k + 1] << 8));
      wrong += got != f16(v[k]);
      _Float16 hv;
      std::memcpy(&hv, &got, 2);
      double ov;
      if (o.dtype == wcodec::DType::kF32) {
        float f;
        std::memcpy(&f, ob + 4 * k, 4);
        ov = f;
      } else {
        _Float16 f;
        std::memcpy(&f, ob + 2 * k, 2);
        ov = static_cast<double>(f);
      }
      sse += (static_cast<double>(hv) - ov) * (static_cast<double>(hv) - ov);
    }
    EXPECT_EQ(wrong, 0u) << "values differ from the quantizer's dequantization";
    ASSERT_TRUE(w.mse.has_value());
    EXPECT_NEAR(sse / static_cast<double>(v.size()), *w.mse, 0.03 * *w.mse) << "F16 rounding moves the mse by little";
    ++checked;
  }
  EXPECT_GT(checked, 10u);
  for (const auto& [name, t] : orig_t) {
    if (t->dtype == wcodec::DType::kF32 && t->shape.size() >= 2) continue;
    if (t->dtype == wcodec::DType::kF16 && t->shape.size() >= 2 && std::any_of(st.weights.begin(), st.weights.end(), [&](const auto& w) { return w.name == name; })) continue;
    ASSERT_TRUE(dense_t.count(name)) << name;
    const auto& d = *dense_t[name];
    EXPECT_EQ(d.dtype, t->dtype) << name;
    EXPECT_TRUE(std::equal(bytes.begin() + static_cast<long>(h->data_start + d.begin),
                           bytes.begin() + static_cast<long>(h->data_start + d.end),
                           orig.begin() + static_cast<long>(oh->data_start + t->begin)))
        << "base tensor " << name << " differs";
  }
}

}  // namespace

TEST(mount_trellis, V2StoreIsShownAsMigratesOutput) {
  REQUIRE_FUSE();
  MountFixture fx;
  const sfs::path v2 = fx.store() / "stories-v2", v3 = fx.store() / "stories-v3", isn = fx.store() / "isnet-v2";
  const sfs::path ref = fx.scratch() / "migrated", isref = fx.scratch() / "isnet-migrated";
  std::string out;
  const auto data = wctest::data_dir();
  ASSERT_EQ(sh(tool() + " trellis quantize " + q(data / "stories260K.f32.safetensors") + " " + q(v2) +
                   " --bits 3 --hadamard --layout v2",
               &out),
            0)
      << out;
  ASSERT_EQ(sh(tool() + " trellis quantize " + q(data / "isnet-medium.f16.safetensors") + " " + q(isn) +
                   " --bits 5 --layout v2 --max-weights 30",
               &out),
            0)
      << out;
  ASSERT_EQ(sh(tool() + " trellis quantize " + q(data / "stories260K.f32.safetensors") + " " + q(v3) +
                   " --bits 6 --layout v3",
               &out),
            0)
      << out;
  const std::string tok = "{\"model\": {\"type\": \"BPE\"}}\n";
  wctest::write_file(v2 / "tokenizer.json", std::vector<uint8_t>(tok.begin(), tok.end()));
  ASSERT_EQ(sh(tool() + " trellis migrate " + q(v2) + " " + q(ref), &out), 0) << out;
  ASSERT_EQ(sh(tool() + " trellis migrate " + q(isn) + " " + q(isref), &out), 0) << out;

  ASSERT_EQ(fx.mount("", &out), 0) << out;
  const sfs::path mv2 = fx.mnt() / "stories-v2", mv3 = fx.mnt() / "stories-v3", mis = fx.mnt() / "isnet-v2";
  // Names: exactly migrate's and the dense view; the v2 entries hidden.
  auto with_dense = [](std::set<std::string> s) {
    s.insert("model.dense.safetensors");
    return s;
  };
  EXPECT_EQ(names(mv2), with_dense(names(ref)));
  EXPECT_EQ(names(mis), with_dense(names(isref)));
  EXPECT_TRUE(names(ref).count("tokenizer.json"));
  EXPECT_EQ(names(mv3), with_dense(names(v3))) << "a v3 store is shown unchanged, with its dense view";
  const uint64_t before = fx.stats()["decode"]["chunks"].get<uint64_t>();
  EXPECT_EQ(sfs::file_size(mv2 / "model.dense.safetensors"), sfs::file_size(mv3 / "model.dense.safetensors"))
      << "the dense views of two quantizations of one model have one size";
  EXPECT_EQ(fx.stats()["decode"]["chunks"].get<uint64_t>(), before) << "stat computes nothing";
  // stat decodes and copies nothing; sizes are known from the indexes.
  for (const auto& n : names(ref)) EXPECT_EQ(sfs::file_size(mv2 / n), sfs::file_size(ref / n)) << n;
  // Bytes: SHA-256 of every file, read through the mount by sha256sum.
  for (const auto& [view, want] : {std::pair{mv2, ref}, std::pair{mis, isref}, std::pair{mv3, v3}}) {
    for (const auto& n : names(want)) {
      SCOPED_TRACE(view / n);
      std::string a, b;
      ASSERT_EQ(sh("sha256sum < " + q(view / n), &a), 0) << a;
      ASSERT_EQ(sh("sha256sum < " + q(want / n), &b), 0) << b;
      EXPECT_EQ(a, b);
    }
  }
  EXPECT_EQ(fx.stats()["decode"]["chunks"].get<uint64_t>(), 0u) << "the v3 view decodes nothing";
  // cp of the whole view, and validate of the view read through the mount.
  ASSERT_EQ(sh("cp -r " + q(mv2) + " " + q(fx.scratch() / "copy") + " && diff -r -x model.dense.safetensors " + q(fx.scratch() / "copy") + " " +
                   q(ref),
               &out),
            0)
      << out;
  EXPECT_EQ(sh(tool() + " trellis validate " + q(mis), &out), 0) << out;
  EXPECT_NE(out.find("valid Trellis v3 store"), std::string::npos) << out;

  // Parallel readers at random offsets of the largest shard.
  const sfs::path shard = mis / "model-00001-of-00001.safetensors";
  const auto whole = wctest::read_file(isref / "model-00001-of-00001.safetensors");
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      const int fd = ::open(shard.c_str(), O_RDONLY);
      if (fd < 0) {
        ++bad;
        return;
      }
      std::mt19937_64 rng(t);
      std::vector<uint8_t> buf(200000);
      for (int k = 0; k < 50; ++k) {
        const uint64_t off = rng() % whole.size();
        const size_t n = std::min<uint64_t>(1 + rng() % buf.size(), whole.size() - off);
        if (::pread(fd, buf.data(), n, static_cast<off_t>(off)) != static_cast<ssize_t>(n) ||
            std::memcmp(buf.data(), whole.data() + off, n) != 0)
          ++bad;
      }
      ::close(fd);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);

  // The dense views: the quantizer's dequantization in F16, the base tensors as they are.
  check_dense(mv2 / "model.dense.safetensors", v2, data / "stories260K.f32.safetensors");
  check_dense(mv3 / "model.dense.safetensors", v3, data / "stories260K.f32.safetensors");
  check_dense(mis / "model.dense.safetensors", isn, data / "isnet-medium.f16.safetensors");
  EXPECT_GT(fx.stats()["decode"]["chunks"].get<uint64_t>(), 0u);
  EXPECT_EQ(fx.stats()["decode"]["errors"].get<uint64_t>(), 0u);
}

// A change to any v2 input is a changed view (new sizes, new bytes), and a
// v2 store that no longer validates is shown as it is.
TEST(mount_trellis, ChangedV2StoreIsAChangedView) {
  REQUIRE_FUSE();
  if (::access("/proc/sys/vm/drop_caches", W_OK) != 0)
    GTEST_SKIP() << "SKIPPED: needs to drop the kernel's dentry cache (root)";
  MountFixture fx;
  const sfs::path v2 = fx.store() / "m";
  std::string out;
  ASSERT_EQ(sh(tool() + " trellis quantize " + q(wctest::data_dir() / "stories260K.f32.safetensors") + " " + q(v2) +
                   " --bits 4 --layout v2",
               &out),
            0)
      << out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  const sfs::path idx = fx.mnt() / "m" / "model.safetensors.index.json";
  ASSERT_TRUE(sfs::exists(idx));
  const auto before = wctest::read_file(idx);
  // Requantize layer 0 at 2 bits with the same names (a new tensor file and index).
  const sfs::path tmp = fx.scratch() / "q2";
  ASSERT_EQ(sh(tool() + " trellis quantize " + q(wctest::data_dir() / "stories260K.f32.safetensors") + " " + q(tmp) +
                   " --bits 2 --layout v2",
               &out),
            0)
      << out;
  for (const char* f : {"tensor_0000.safetensors", "index.json"}) {
    sfs::copy_file(tmp / "layer_0000" / f, v2 / "layer_0000" / (std::string(f) + ".new"));
    sfs::rename(v2 / "layer_0000" / (std::string(f) + ".new"), v2 / "layer_0000" / f);
  }
  ASSERT_EQ(sh(tool() + " trellis migrate " + q(v2) + " " + q(fx.scratch() / "ref"), &out), 0) << out;
  // The kernel forgets what it cached (entries and pages) and asks again.
  auto drop = [&] { return sh("sync && echo 3 > /proc/sys/vm/drop_caches") == 0; };
  const bool changed = wait_until([&] { return drop() && wctest::read_file(idx) != before; }, 5);
  EXPECT_TRUE(changed) << "the view did not follow the store";
  for (const auto& n : names(fx.scratch() / "ref"))
    EXPECT_EQ(wctest::read_file(fx.mnt() / "m" / n), wctest::read_file(fx.scratch() / "ref" / n)) << n;
  // Break it: a component removed from layer 1's index -> the v2 store as it is.
  sfs::remove(v2 / "layer_0001" / "index.json");
  const bool shown_as_is = wait_until([&] { return drop() && sfs::exists(fx.mnt() / "m" / "layer_0001"); }, 5);
  EXPECT_TRUE(shown_as_is);
  EXPECT_FALSE(sfs::exists(fx.mnt() / "m" / "model.safetensors.index.json"));
}

// A Trellis store whose safetensors files are stored as .wcodec works the
// same: the v3 view of a v2 store (every file the SHA-256 of migrate's
// output for the plain store) and the dense views of v2 and v3 stores.
TEST(mount_trellis, StoresOfWcodecFiles) {
  REQUIRE_FUSE();
  MountFixture fx;
  const sfs::path plain = fx.scratch() / "plain", ref = fx.scratch() / "migrated";
  const sfs::path v2 = fx.store() / "enc-v2", v3 = fx.store() / "enc-v3";
  const sfs::path model = wctest::data_dir() / "stories260K.f32.safetensors";
  std::string out;
  ASSERT_EQ(sh(tool() + " trellis quantize " + q(model) + " " + q(plain) + " --bits 5 --hadamard --layout v2", &out), 0)
      << out;
  ASSERT_EQ(sh(tool() + " trellis migrate " + q(plain) + " " + q(ref), &out), 0) << out;
  sfs::copy(plain, v2, sfs::copy_options::recursive);
  sfs::copy(ref, v3, sfs::copy_options::recursive);
  size_t encoded = 0;
  for (const auto& root : {v2, v3})
    for (const auto& e : sfs::recursive_directory_iterator(root)) {
      if (e.path().extension() != ".safetensors") continue;
      sfs::path enc = e.path();
      enc.replace_extension(".wcodec");
      ASSERT_EQ(sh(tool() + " encode -q " + q(e.path()) + " " + q(enc), &out), 0) << out;
      sfs::remove(e.path());
      ++encoded;
    }
  ASSERT_GE(encoded, 8u);
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  std::set<std::string> want = names(ref);
  want.insert("model.dense.safetensors");
  EXPECT_EQ(names(fx.mnt() / "enc-v2"), want);
  EXPECT_EQ(names(fx.mnt() / "enc-v3"), want);
  for (const auto& n : names(ref)) EXPECT_EQ(sfs::file_size(fx.mnt() / "enc-v2" / n), sfs::file_size(ref / n)) << n;
  (void)sfs::file_size(fx.mnt() / "enc-v2" / "model.dense.safetensors");
  EXPECT_EQ(fx.stats()["decode"]["chunks"].get<uint64_t>(), 0u) << "stat and ls decode nothing";
  for (const auto& n : names(ref)) {
    SCOPED_TRACE(n);
    EXPECT_EQ(wctest::sha256_hex(wctest::read_file(fx.mnt() / "enc-v2" / n)), wctest::sha256_hex(wctest::read_file(ref / n)));
    EXPECT_EQ(wctest::sha256_hex(wctest::read_file(fx.mnt() / "enc-v3" / n)), wctest::sha256_hex(wctest::read_file(ref / n)));
  }
  EXPECT_GT(fx.stats()["decode"]["chunks"].get<uint64_t>(), 0u) << "the shards' tensor bytes are decoded chunks";
  check_dense(fx.mnt() / "enc-v2" / "model.dense.safetensors", plain, model);
  check_dense(fx.mnt() / "enc-v3" / "model.dense.safetensors", ref, model);
  EXPECT_EQ(wctest::read_file(fx.mnt() / "enc-v2" / "model.dense.safetensors"),
            wctest::read_file(fx.mnt() / "enc-v3" / "model.dense.safetensors"));
  EXPECT_EQ(fx.stats()["decode"]["errors"].get<uint64_t>(), 0u);
}
