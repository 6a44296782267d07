// Tuning keys: one key for two spellings of one computation, different keys for a
// different dtype, layout, epilogue, shape or GPU.
#include <gtest/gtest.h>

#include "driver/run.h"
#include "frontend/parser.h"
#include "tune/db_file.h"
#include "tune/tuning_key.h"

namespace {

using namespace loom;
using loom::tune::key_for;
using loom::tune::op_signature;
using loom::tune::ParsedDb;
using loom::tune::TuningRecord;
using loom::tune::format_db;
using loom::tune::parse_db;
using loom::tune::TuningKey;

DeviceInfo h100() {
  DeviceInfo d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.sm_count = 132;
  d.cc_major = 9;
  d.runtime_version = 13000;
  d.driver_version = 13000;
  return d;
}

TuningKey key_of(const std::string& expr, const std::map<std::string, int64_t>& dims = {},
                 const DeviceInfo& dev = h100()) {
  Graph g = bind_sizes(parse_expression(expr), dims);
  auto k = key_for(g, dev);
  EXPECT_TRUE(k) << expr;
  // Every key Loom makes passes the check the database applies to every line it reads.
  if (k) {
    EXPECT_EQ(loom::tune::key_problem(*k), "") << k->op << " | " << k->shape;
  }
  return k.value_or(TuningKey{});
}

TEST(TuningKey, ReadsAsGpuOpAndShape) {
  TuningKey k = key_of("matmul(A[4096,1024]:bf16, B[2048,1024]:bf16.T)");
  EXPECT_EQ(k.op, "matmul(bf16[M,K], bf16[N,K].T):bf16");
  EXPECT_EQ(k.shape, "M=4096,N=2048,K=1024");
  EXPECT_EQ(k.str(), "NVIDIA H100 80GB HBM3 (132 SMs, CUDA 13.0, driver 13.0) | "
                     "matmul(bf16[M,K], bf16[N,K].T):bf16 | M=4096,N=2048,K=1024");
  EXPECT_EQ(key_of("bmm(A[8,64,32]:f16, B[8,32,48]:f16, out=f32)").op,
            "matmul(f16[batch,M,K], f16[batch,K,N]):f32");
  EXPECT_EQ(key_of("bmm(A[8,64,32]:f16, B[8,32,48]:f16)").shape, "batch=8,M=64,N=48,K=32");
}

TEST(TuningKey, SharedOperandsAndRank4KeyApart) {
  // An operand shared by every batch entry has no batch role: its key is not the bmm's
  // (whose tuned schedule reads one weight per entry).
  const TuningKey shared = key_of("matmul(A[8,64,32]:bf16, W[32,48]:bf16)");
  EXPECT_EQ(shared.op, "matmul(bf16[batch,M,K], bf16[K,N]):bf16");
  EXPECT_EQ(shared.shape, "batch=8,M=64,N=48,K=32");
  EXPECT_NE(shared, key_of("bmm(A[8,64,32]:bf16, B[8,32,48]:bf16)"));
  EXPECT_EQ(key_of("matmul(W[64,32]:f16, B[8,48,32]:f16.T)").op,
            "matmul(f16[M,K], f16[batch,N,K].T):f16");
  const TuningKey r4 = key_of("matmul(A[2,3,64,32]:f16, B[2,3,32,48]:f16)");
  EXPECT_EQ(r4.op, "matmul(f16[batch,batch1,M,K], f16[batch,batch1,K,N]):f16");
  EXPECT_EQ(r4.shape, "batch=2,batch1=3,M=64,N=48,K=32");
}

TEST(TuningKey, TwoSpellingsShareAKey) {
  // Tensor names, symbols bound by --dims, and linear() against its expansion.
  EXPECT_EQ(key_of("matmul(A[256,128]:f32, B[128,64]:f32)"),
            key_of("matmul(X[M,K]:f32, W[K,N]:f32)", {{"M", 256}, {"N", 64}, {"K", 128}}));
  TuningKey lin = key_of("relu(linear(X[512,256]:bf16, W[1024,256]:bf16, bias[1024]:bf16))");
  EXPECT_EQ(lin, key_of("relu(add(matmul(A[512,256]:bf16, B[1024,256]:bf16.T), b[1024]:bf16))"));
  EXPECT_EQ(lin.op, "relu(add(matmul(bf16[M,K], bf16[N,K].T):bf16, bf16[N]):bf16):bf16");
  // An immediate's value does not change the schedule.
  EXPECT_EQ(key_of("mul(matmul(A[64,64]:f32, B[64,64]:f32), 0.5)"),
            key_of("mul(matmul(A[64,64]:f32, B[64,64]:f32), 2)"));
}

TEST(TuningKey, DifferentProblemsDifferentKeys) {
  const std::string base = "matmul(A[256,128]:f32, B[128,64]:f32)";
  TuningKey k = key_of(base);
  EXPECT_NE(k, key_of("matmul(A[256,128]:bf16, B[128,64]:bf16)"));
  EXPECT_NE(k, key_of("matmul(A[256,128]:tf32, B[128,64]:tf32)"));
  EXPECT_NE(k, key_of("matmul(A[256,128]:f32, B[64,128]:f32.T)"));
  EXPECT_NE(k, key_of("matmul(A[128,256]:f32.T, B[128,64]:f32)"));
  EXPECT_NE(k, key_of("matmul(A[256,256]:f32, B[256,64]:f32)"));
  // A view keys apart from the dense tensor (its strides decide which copies are legal).
  const TuningKey pitched = key_of("matmul(A[256,128|136]:f32, B[128,64]:f32)");
  EXPECT_NE(k, pitched);
  EXPECT_NE(pitched, key_of("matmul(A[256,128|132]:f32, B[128,64]:f32)"));
  EXPECT_NE(pitched.op.find("[M,K|136]"), std::string::npos) << pitched.op;
  EXPECT_NE(k, key_of("relu(" + base + ")"));
  EXPECT_NE(key_of("add(" + base + ", r[256,64]:f32)"), key_of("add(" + base + ", b[64]:f32)"));
  EXPECT_NE(key_of("matmul(A[256,128]:f16, B[128,64]:f16)"),
            key_of("matmul(A[256,128]:f16, B[128,64]:f16, out=f32)"));
  DeviceInfo h200 = h100();
  h200.name = "NVIDIA H200";
  EXPECT_NE(k, key_of(base, {}, h200));
  DeviceInfo newer = h100();
  newer.driver_version = 13010;
  TuningKey kn = key_of(base, {}, newer);
  EXPECT_NE(k, kn);
  EXPECT_TRUE(k.same_problem(kn));
  EXPECT_FALSE(k.same_problem(key_of(base, {}, h200)));
}

// A contraction's run-time size keys as `*`: one record serves the one kernel that every
// value of it runs, apart from each bound size's record.
TuningKey run_time_key(const std::string& expr) {
  auto k = key_for(parse_expression(expr), h100());
  EXPECT_TRUE(k) << expr;
  if (!k) return {};
  EXPECT_EQ(loom::tune::key_problem(*k), "") << k->op << " | " << k->shape;
  return *k;
}

TEST(TuningKey, RunTimeSizesKeyAsStar) {
  const TuningKey k = run_time_key("matmul(A[M,4096]:bf16, B[4096,4096]:bf16)");
  EXPECT_EQ(k.shape, "M=*,N=4096,K=4096");
  EXPECT_EQ(k.op, key_of("matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)").op);
  EXPECT_NE(k, key_of("matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)"));
  // The symbol's name does not matter; which dims are run-time does.
  EXPECT_EQ(k, run_time_key("matmul(X[T,4096]:bf16, Y[4096,4096]:bf16)"));
  EXPECT_EQ(run_time_key("linear(X[T,K]:f16, W[N,K]:f16, b[N]:f16)").shape, "M=*,N=*,K=*");
  EXPECT_EQ(run_time_key("bmm(A[Z,128,64]:bf16, B[Z,64,64]:bf16)").shape,
            "batch=*,M=128,N=64,K=64");
  // The database's check takes `*` for a contraction's size only.
  TuningKey bad = k;
  bad.shape = "M=**,N=4096,K=4096";
  EXPECT_NE(key_problem(bad), "");
  TuningKey att = key_of("attention(Q[1,8,64,64]:bf16, K[1,8,64,64]:bf16, V[1,8,64,64]:bf16)");
  att.shape = "B=1,Hq=8,Hkv=8,Sq=*,Sk=64,D=64";
  EXPECT_NE(key_problem(att), "");
  // A record for it round-trips through the database format.
  TuningRecord r;
  r.knobs = "BM=128,BN=256";
  r.median_us = 10;
  r.date = "2026-11-27T19:00:00Z";
  ParsedDb p = parse_db(format_db({{k, r}}));
  ASSERT_TRUE(p.problems.empty()) << p.problems[0].what;
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].key, k);
}

// Attention: the op's dtypes, mask and LSE, and the six sizes. The scale is one
// multiply folded into the softmax: like an elementwise immediate, it keeps the key.
TEST(TuningKey, AttentionKeyReadsAsOpMaskAndSizes) {
  const std::string q = "Q[4,16,4096,128]:bf16", kv = "[4,16,4096,128]:bf16";
  const std::string expr = "attention(" + q + ", K" + kv + ", V" + kv + ", causal=false)";
  TuningKey k = key_of(expr);
  EXPECT_EQ(k.op, "attention(bf16[B,Hq,Sq,D], bf16[B,Hkv,Sk,D], bf16[B,Hkv,Sk,D], causal=false):bf16");
  EXPECT_EQ(k.shape, "B=4,Hq=16,Hkv=16,Sq=4096,Sk=4096,D=128");
  EXPECT_EQ(op_signature(parse_expression(expr)), k.op);
  // Names and symbols bound by --dims do not change it; the scale does not either.
  EXPECT_EQ(k, key_of("attention(X[B,H,S,128]:bf16, Y[B,H,S,128]:bf16, Z[B,H,S,128]:bf16)",
                      {{"B", 4}, {"H", 16}, {"S", 4096}}));
  EXPECT_EQ(k, key_of("attention(" + q + ", K" + kv + ", V" + kv + ", scale=0.5)"));
  // Mask, LSE, dtype, GQA and sizes each make another key.
  EXPECT_NE(k, key_of("attention(" + q + ", K" + kv + ", V" + kv + ", causal=true)"));
  EXPECT_NE(key_of("attention(" + q + ", K" + kv + ", V" + kv + ", causal=true)"),
            key_of("attention(" + q + ", K" + kv + ", V" + kv + ", causal=top_left)"));
  TuningKey lse = key_of("attention(" + q + ", K" + kv + ", V" + kv + ", lse=true)");
  EXPECT_EQ(lse.op,
            "attention(bf16[B,Hq,Sq,D], bf16[B,Hkv,Sk,D], bf16[B,Hkv,Sk,D], causal=false, "
            "lse=true):bf16");
  EXPECT_NE(k, key_of("attention(Q[4,16,4096,128]:f16, K[4,16,4096,128]:f16, V[4,16,4096,128]:f16)"));
  TuningKey gqa = key_of("attention(" + q + ", K[4,4,4096,128]:bf16, V[4,4,4096,128]:bf16)");
  EXPECT_EQ(gqa.shape, "B=4,Hq=16,Hkv=4,Sq=4096,Sk=4096,D=128");
  EXPECT_NE(k, key_of("attention(Q[4,16,2048,128]:bf16, K[4,16,4096,128]:bf16, V[4,16,4096,128]:bf16)"));
  EXPECT_NE(k, key_of("attention(Q[4,16,4096,64]:bf16, K[4,16,4096,64]:bf16, V[4,16,4096,64]:bf16)"));
  // Symbolic sizes have no key, as for a contraction.
  std::string why;
  EXPECT_FALSE(key_for(parse_expression("attention(Q[B,H,S,64]:bf16, K[B,H,S,64]:bf16, "
                                        "V[B,H,S,64]:bf16)"),
                       h100(), &why));
  EXPECT_NE(why.find("--dims"), std::string::npos) << why;
}

// The serving forms key as themselves: paged KV names the pools, the block table and the
// lengths; varlen the packed rows, the cumulative lengths and max_seqlen_q. Neither reads
// as the dense op, sizes and page size make other keys, and both survive the database.
TEST(TuningKey, ServingFormsHaveKeysOfTheirOwn) {
  const std::string paged = "attention(Q[8,32,1,128]:bf16, Kc[4096,8,64,128]:bf16, "
                            "Vc[4096,8,64,128]:bf16, block_table=BT[8,128]:i32, seqlens_k=L[8]:i32)";
  TuningKey p = key_of(paged);
  EXPECT_EQ(p.op, "attention(bf16[B,Hq,Sq,D], bf16[P,Hkv,page,D], bf16[P,Hkv,page,D], i32[B,maxp], "
                  "i32[B], causal=false):bf16");
  EXPECT_EQ(p.shape, "B=8,Hq=32,Sq=1,D=128,P=4096,Hkv=8,page=64,maxp=128");
  EXPECT_EQ(key_problem(p), "");
  EXPECT_NE(p.op, key_of("attention(Q[8,32,1,128]:bf16, K[8,8,8192,128]:bf16, V[8,8,8192,128]:bf16)").op);
  EXPECT_NE(p, key_of("attention(Q[8,32,1,128]:bf16, Kc[2048,8,128,128]:bf16, Vc[2048,8,128,128]:bf16, "
                      "block_table=BT[8,64]:i32, seqlens_k=L[8]:i32)"));

  const std::string varlen = "attention(Q[3000,8,64]:bf16, K[3000,2,64]:bf16, V[3000,2,64]:bf16, "
                             "cu_seqlens_q=CQ[4]:i32, cu_seqlens_k=CK[4]:i32, max_seqlen_q=1500, "
                             "causal=true, lse=true)";
  TuningKey v = key_of(varlen);
  EXPECT_EQ(v.op, "attention(bf16[Tq,Hq,D], bf16[Tk,Hkv,D], bf16[Tk,Hkv,D], i32[Bplus1], i32[Bplus1], "
                  "max_seqlen_q=Sq, causal=true, lse=true):bf16");
  EXPECT_EQ(v.shape, "Tq=3000,Hq=8,D=64,Tk=3000,Hkv=2,Bplus1=4,Sq=1500");
  EXPECT_EQ(key_problem(v), "");
  EXPECT_NE(v, key_of("attention(Q[3000,8,64]:bf16, K[3000,2,64]:bf16, V[3000,2,64]:bf16, "
                      "cu_seqlens_q=CQ[4]:i32, cu_seqlens_k=CK[4]:i32, max_seqlen_q=1000, "
                      "causal=true, lse=true)"));

  TuningRecord r;
  r.knobs = "BLOCK_N=112";
  r.median_us = 42;
  r.date = "2026-11-28T02:00:00Z";
  ParsedDb db = parse_db(format_db({{p, r}, {v, r}}));
  ASSERT_TRUE(db.problems.empty()) << db.problems[0].what;
  ASSERT_EQ(db.entries.size(), 2u);
  EXPECT_EQ(db.entries[0].key, p);
  EXPECT_EQ(db.entries[1].key, v);

  // The grammar keeps its checks: max_seqlen_q belongs to attention, names a dim the
  // shape sizes, and needs the five-operand form.
  TuningKey bad = v;
  bad.shape = "Tq=3000,Hq=8,D=64,Tk=3000,Hkv=2,Bplus1=4";
  EXPECT_NE(key_problem(bad).find("not the op's dims"), std::string::npos) << key_problem(bad);
  bad = v;
  bad.op = "attention(bf16[B,Hq,Sq,D], bf16[B,Hkv,Sk,D], bf16[B,Hkv,Sk,D], max_seqlen_q=Sq, causal=true):bf16";
  EXPECT_NE(key_problem(bad), "");
  bad.op = "relu(matmul(bf16[M,K], bf16[K,N]):bf16, max_seqlen_q=Sq):bf16";
  EXPECT_NE(key_problem(bad), "");
}

// An attention key survives the database file (its op holds commas, '=' and brackets),
// beside a GEMM record written the way older files hold them.
TEST(TuningKey, AttentionKeyRoundTripsThroughTheDatabaseFormat) {
  TuningKey att = key_of("attention(Q[2,8,1024,64]:bf16, K[2,2,1024,64]:bf16, "
                         "V[2,2,1024,64]:bf16, causal=true, lse=true)");
  TuningKey mm = key_of("matmul(A[4096,1024]:bf16, B[2048,1024]:bf16.T)");
  TuningRecord r;
  r.knobs = "BLOCK_M=128,BLOCK_N=64,WARPS=8";
  r.median_us = 123.5;
  r.trials = 9;
  r.date = "2026-11-23T01:00:00Z";
  r.l2 = "read";
  r.timed = "event";
  TuningRecord old;  // a record from before 2026-11-22's small-launch work: no l2, no timed
  old.knobs = "BM=128,BN=128";
  old.median_us = 800;
  old.date = "2026-11-20T01:00:00Z";
  ParsedDb p = parse_db(format_db({{att, r}, {mm, old}}));
  ASSERT_TRUE(p.problems.empty()) << p.problems[0].what;
  ASSERT_EQ(p.entries.size(), 2u);
  EXPECT_EQ(p.entries[0].key, att);
  EXPECT_EQ(p.entries[0].rec.knobs, r.knobs);
  EXPECT_EQ(p.entries[0].rec.median_us, 123.5);
  EXPECT_EQ(p.entries[1].key, mm);
  EXPECT_EQ(p.entries[1].rec.l2, "");
  EXPECT_EQ(p.entries[1].rec.timed, "");
}

}  // namespace
