// wgmma matrix descriptors against Loom's shared layouts. The bridge: for every layout
// Loom makes for a wgmma operand (K-major rows of one swizzle span, MN-major rows chunked
// into spans; 16-bit and tf32; every K-step of a slab, tiles at M/N offsets, the second
// ring slot), the byte the hardware reads for element (r, c) under the descriptor rules
// (wgmma_canonical_offset, the PTX ISA's canonical layout) is the byte TensorDecl::physical
// puts it at — so a kernel the interpreter checked reads the same data on the GPU.
#include <gtest/gtest.h>

#include <functional>

#include "atoms/wgmma_desc.h"
#include "ir/error.h"

namespace loom {
namespace {

int log2i(int v) {
  int l = 0;
  while ((1 << l) < v) ++l;
  return l;
}

// A shared tensor [stages][rows][row_elems] as the swizzle pass (t:046) and the TMA
// staging make it: the TMA pattern of `span` on element offsets, rows chunked by
// `row_chunk`.
TensorDecl slab(DType dt, int stages, int64_t rows, int64_t row_elems, int span,
                int64_t row_chunk = 0) {
  TensorDecl t;
  t.name = "s";
  t.dtype = dt;
  t.role = TensorRole::Shared;
  t.shape = {Expr(int64_t(stages)), Expr(rows), Expr(row_elems)};
  if (span) t.swizzle = Swizzle{log2i(span / 16), 4 - log2i(dtype_bytes(dt)), 3};
  t.row_chunk = row_chunk;
  return t;
}

// Elements (r, c) of the rows x cols tile at `origin` whose canonical byte differs from
// the physical one (0: the descriptor reads exactly Loom's tile); `report` adds the
// first three as test failures.
int mismatches(const TensorDecl& t, WgmmaOperand op, int64_t rs, int64_t cs, int64_t origin,
               int rows, int cols, int64_t start, bool report = false) {
  const WgmmaDescFields f = wgmma_desc_for(t, op, rs, cs);
  const int bytes = dtype_bytes(t.dtype);
  int bad = 0;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const int64_t want = t.physical(origin + r * rs + c * cs) * bytes;
      if (wgmma_canonical_offset(f, op, start, r, c) != want && bad++ < 3 && report)
        ADD_FAILURE() << "element (" << r << ", " << c << "): descriptor reads byte "
                      << wgmma_canonical_offset(f, op, start, r, c) << ", Loom stores it at "
                      << want;
    }
  return bad;
}

void expect_bridge(const TensorDecl& t, WgmmaOperand op, int64_t rs, int64_t cs, int64_t origin,
                   int rows, int cols) {
  SCOPED_TRACE("origin " + std::to_string(origin));
  const int64_t start = wgmma_start_byte(t, origin);
  // Every origin Loom makes has zero XOR-source bits: the unswizzled start is the
  // address of the tile's first element.
  EXPECT_EQ(start, t.physical(origin) * dtype_bytes(t.dtype));
  EXPECT_EQ(mismatches(t, op, rs, cs, origin, rows, cols, start, true), 0);
}

const DType k16[] = {DType::F16, DType::BF16};

TEST(WgmmaDesc, KMajorAOfEverySpanAndType) {
  for (DType dt : {DType::F16, DType::BF16, DType::TF32})
    for (int span : {32, 64, 128}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " span " + std::to_string(span));
      const int bytes = dtype_bytes(dt), k = dt == DType::TF32 ? 8 : 16;
      const int64_t BM = 128, BK = span / bytes;
      const TensorDecl t = slab(dt, 2, BM, BK, span);
      const WgmmaDescFields f = wgmma_desc_for(t, WgmmaOperand::A, BK, 1);
      EXPECT_EQ(f.major, WgmmaMajor::K);
      EXPECT_FALSE(f.transposed);
      EXPECT_EQ(f.sbo_bytes, 8 * span);
      EXPECT_EQ(f.swizzle_mode, span == 128 ? 1 : span == 64 ? 2 : 3);
      for (int stage : {0, 1})
        for (int64_t m0 : {0, 64})
          for (int64_t kk = 0; kk < BK / k; ++kk)
            expect_bridge(t, WgmmaOperand::A, BK, 1, stage * BM * BK + m0 * BK + kk * k, 64, k);
    }
}

TEST(WgmmaDesc, KStepInsideA128ByteRowMovesTheStartBy32Bytes) {
  const TensorDecl t = slab(DType::BF16, 1, 64, 64, 128);
  for (int kk = 0; kk < 4; ++kk) EXPECT_EQ(wgmma_start_byte(t, 16 * kk), 32 * kk);
  const TensorDecl f32 = slab(DType::TF32, 1, 64, 32, 128);
  for (int kk = 0; kk < 4; ++kk) EXPECT_EQ(wgmma_start_byte(f32, 8 * kk), 32 * kk);
}

TEST(WgmmaDesc, KMajorBGivenTransposed) {
  // B as [BN][BK] (K contiguous): B(k, n) at n * BK + k.
  for (DType dt : {DType::BF16, DType::TF32})
    for (int span : {32, 64, 128})
      for (int n : {8, 64, 128, 256}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " span " + std::to_string(span) + " N " +
                     std::to_string(n));
        const int bytes = dtype_bytes(dt), k = dt == DType::TF32 ? 8 : 16;
        const int64_t BN = 256, BK = span / bytes;
        const TensorDecl t = slab(dt, 2, BN, BK, span);
        EXPECT_EQ(wgmma_desc_for(t, WgmmaOperand::B, 1, BK).major, WgmmaMajor::K);
        for (int stage : {0, 1})
          for (int64_t n0 : {int64_t(0), BN - n})
            for (int64_t kk = 0; kk < BK / k; ++kk)
              expect_bridge(t, WgmmaOperand::B, 1, BK, stage * BN * BK + n0 * BK + kk * k, k, n);
      }
}

TEST(WgmmaDesc, KMajorRowsOfSeveralSpansInChunks) {
  // BK deeper than one span (a swapped decode GEMM's BK=128): [rows][BK] stored as
  // span-wide K chunks, one TMA box each. Every K-step lies in one chunk, read with the
  // fields of a one-span slab from that chunk's start.
  for (DType dt : k16)
    for (int span : {64, 128})
      for (int chunks : {2, 4})
        for (WgmmaOperand op : {WgmmaOperand::A, WgmmaOperand::B}) {
          const int64_t chunk = span / 2, BK = chunks * chunk, rows = op == WgmmaOperand::A ? 64 : 24;
          SCOPED_TRACE(std::string(dtype_name(dt)) + " span " + std::to_string(span) + " BK " +
                       std::to_string(BK) + (op == WgmmaOperand::A ? " A" : " B"));
          const TensorDecl t = slab(dt, 2, rows, BK, span, chunk);
          const bool a = op == WgmmaOperand::A;
          const WgmmaDescFields f = wgmma_desc_for(t, op, a ? BK : 1, a ? 1 : BK);
          EXPECT_EQ(f.major, WgmmaMajor::K);
          EXPECT_EQ(f.sbo_bytes, 8 * span);
          for (int stage : {0, 1})
            for (int64_t kk = 0; kk < BK / 16; ++kk) {
              const int64_t origin = stage * rows * BK + kk * 16;
              if (a) expect_bridge(t, op, BK, 1, origin, 64, 16);
              else expect_bridge(t, op, 1, BK, origin, 16, int(rows));
            }
        }
}

TEST(WgmmaDesc, NMajorBInOneTwoAndFourChunks) {
  // B as [K, N] row-major: slab [BK][BN], rows of BN elements stored as span-wide chunks.
  for (DType dt : k16)
    for (int span : {32, 64, 128})
      for (int chunks : {1, 2, 4}) {
        const int64_t chunk = span / 2, BN = chunks * chunk, BK = 64;
        SCOPED_TRACE(std::string(dtype_name(dt)) + " span " + std::to_string(span) + " BN " +
                     std::to_string(BN));
        const TensorDecl t = slab(dt, 2, BK, BN, span, chunk);
        const WgmmaDescFields f = wgmma_desc_for(t, WgmmaOperand::B, BN, 1);
        EXPECT_EQ(f.major, WgmmaMajor::MN);
        EXPECT_TRUE(f.transposed);
        EXPECT_EQ(f.lbo_bytes, BK * span);  // the next chunk along N
        EXPECT_EQ(f.sbo_bytes, 8 * span);   // the next 8 rows of K
        // The whole row, and (with several chunks) an N tile starting on the last chunk.
        std::vector<std::pair<int64_t, int>> tiles = {{0, int(std::min<int64_t>(BN, 256))}};
        if (chunks > 1) tiles.push_back({BN - chunk, int(chunk)});
        if (chunk >= 16) tiles.push_back({0, 8});
        for (int stage : {0, 1})
          for (auto [n0, n] : tiles)
            for (int64_t kk = 0; kk < BK / 16; ++kk)
              expect_bridge(t, WgmmaOperand::B, BN, 1, stage * BK * BN + kk * 16 * BN + n0, 16,
                            n);
      }
}

TEST(WgmmaDesc, MMajorAGivenTransposed) {
  // A as [K, M] row-major: slab [BK][BM]; the wgmma tile is 64 rows of M.
  for (DType dt : k16)
    for (int span : {32, 64, 128}) {
      const int64_t chunk = span / 2, BM = 128, BK = 64;
      SCOPED_TRACE(std::string(dtype_name(dt)) + " span " + std::to_string(span));
      const TensorDecl t = slab(dt, 2, BK, BM, span, chunk);
      const WgmmaDescFields f = wgmma_desc_for(t, WgmmaOperand::A, 1, BM);
      EXPECT_EQ(f.major, WgmmaMajor::MN);
      EXPECT_TRUE(f.transposed);
      for (int stage : {0, 1})
        for (int64_t m0 : {0, 64})
          for (int64_t kk = 0; kk < BK / 16; ++kk)
            expect_bridge(t, WgmmaOperand::A, 1, BM, stage * BK * BM + kk * 16 * BM + m0, 64, 16);
    }
}

TEST(WgmmaDesc, UnswizzledCoreMatrixLayouts) {
  // No swizzle: 16-byte column chunks make the 8x16-byte core matrices of the
  // interleaved canonical layout, K-major (A) and N-major (B).
  const TensorDecl a = slab(DType::BF16, 2, 128, 64, 0, 8);
  const WgmmaDescFields fa = wgmma_desc_for(a, WgmmaOperand::A, 64, 1);
  EXPECT_EQ(fa.swizzle_mode, 0);
  EXPECT_EQ(fa.sbo_bytes, 128);
  EXPECT_EQ(fa.lbo_bytes, 128 * 16);
  for (int64_t kk = 0; kk < 4; ++kk)
    expect_bridge(a, WgmmaOperand::A, 64, 1, 128 * 64 + 64 * 64 + kk * 16, 64, 16);
  const TensorDecl b = slab(DType::F16, 2, 64, 128, 0, 8);
  const WgmmaDescFields fb = wgmma_desc_for(b, WgmmaOperand::B, 128, 1);
  EXPECT_EQ(fb.lbo_bytes, 128);
  EXPECT_EQ(fb.sbo_bytes, 64 * 16);
  for (int64_t kk = 0; kk < 4; ++kk)
    expect_bridge(b, WgmmaOperand::B, 128, 1, 64 * 128 + kk * 16 * 128, 16, 128);
}

TEST(WgmmaDesc, TheBridgeCatchesATileThatCrossesAChunk) {
  // An N tile of 64 starting half-way into a 64-element chunk: the descriptor reads the
  // rest of its row inside the same 128 B span (wrapping into the next K row), while Loom
  // stored those elements in the next chunk — not a layout wgmma can read.
  const TensorDecl t = slab(DType::BF16, 1, 64, 128, 128, 64);
  EXPECT_GT(mismatches(t, WgmmaOperand::B, 128, 1, 32, 16, 64, wgmma_start_byte(t, 32)), 0);
}

TEST(WgmmaDesc, TheStartIsTheUnswizzledAddress) {
  // A tile starting 3 rows into a swizzle atom: the hardware swizzles start + offset, so
  // the start must be the unswizzled address; the swizzled one (physical) reads garbage.
  const TensorDecl t = slab(DType::BF16, 1, 64, 64, 128);
  const int64_t origin = 3 * 64 + 16;
  EXPECT_NE(wgmma_start_byte(t, origin), t.physical(origin) * 2);
  EXPECT_EQ(mismatches(t, WgmmaOperand::A, 64, 1, origin, 40, 16, wgmma_start_byte(t, origin)),
            0);
  EXPECT_GT(mismatches(t, WgmmaOperand::A, 64, 1, origin, 40, 16, t.physical(origin) * 2), 0);
}

void expect_rule_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(WgmmaDesc, LayoutsWgmmaCannotReadAreErrorsThatSayWhy) {
  const WgmmaSlab s64{64, 64, 0};
  expect_rule_error([&] { wgmma_desc_fields(WgmmaOperand::B, WgmmaMajor::MN, 128, 4, {64, 32, 0}); },
                    "16-bit types only");
  expect_rule_error([&] { wgmma_desc_fields(WgmmaOperand::A, WgmmaMajor::K, 128, 2, {64, 128, 0}); },
                    "exactly one swizzle span");
  expect_rule_error([&] { wgmma_desc_fields(WgmmaOperand::B, WgmmaMajor::MN, 128, 2, {64, 128, 32}); },
                    "row_chunk = 64");
  expect_rule_error([&] { wgmma_desc_fields(WgmmaOperand::A, WgmmaMajor::K, 0, 2, s64); },
                    "core matrices");
  expect_rule_error([&] { wgmma_desc_fields(WgmmaOperand::A, WgmmaMajor::K, 96, 2, s64); },
                    "swizzle modes");
  expect_rule_error([&] { wgmma_desc_fields(WgmmaOperand::B, WgmmaMajor::MN, 128, 2, {4096, 64, 0}); },
                    "14-bit");
  TensorDecl t = slab(DType::BF16, 1, 64, 64, 128);
  expect_rule_error([&] { wgmma_desc_for(t, WgmmaOperand::A, 1, 1); }, "neither K-major");
  t.swizzle = Swizzle{3, 4, 3};  // a byte-offset pattern on 2-byte elements
  expect_rule_error([&] { wgmma_desc_for(t, WgmmaOperand::A, 64, 1); }, "not a TMA pattern");
}

TEST(WgmmaDesc, EncodingPutsEachFieldInItsBits) {
  // PTX ISA "Matrix Descriptor": 128B K-major bf16, 64 rows at shared address 0x400.
  const WgmmaDescFields f =
      wgmma_desc_fields(WgmmaOperand::A, WgmmaMajor::K, 128, 2, WgmmaSlab{64, 64, 0});
  const uint64_t d = wgmma_desc_encode(0x400, f);
  EXPECT_EQ(d & 0x3FFF, 0x40u);                // start >> 4
  EXPECT_EQ((d >> 16) & 0x3FFF, 1u);           // LBO 16 B ("assumed 1")
  EXPECT_EQ((d >> 32) & 0x3FFF, 1024u / 16);   // SBO: 8 rows of 128 B
  EXPECT_EQ((d >> 49) & 0x7, 0u);              // base offset
  EXPECT_EQ(d >> 62, 1u);                      // 128B swizzle
  const WgmmaDescFields n = wgmma_desc_fields(WgmmaOperand::B, WgmmaMajor::MN, 64, 2,
                                              WgmmaSlab{64, 128, 32});
  const uint64_t e = wgmma_desc_encode(0x20000, n);
  EXPECT_EQ(e & 0x3FFF, 0x2000u);
  EXPECT_EQ((e >> 16) & 0x3FFF, 64u * 64 / 16);
  EXPECT_EQ((e >> 32) & 0x3FFF, 512u / 16);
  EXPECT_EQ(e >> 62, 2u);
}

}  // namespace
}  // namespace loom
