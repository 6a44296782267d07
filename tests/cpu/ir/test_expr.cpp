#include "ir/expr.h"

#include <gtest/gtest.h>

#include <random>

#include "ir/error.h"
#include "ir/interpret_expr.h"

namespace loom {
namespace {

const Expr a0 = Expr::var("a0"), m = Expr::var("m"), n = Expr::var("n");
const Expr a = Expr::var("a"), b = Expr::var("b"), c = Expr::var("c");

TEST(ExprSimplify, FoldsConstantsOfEveryKind) {
  EXPECT_EQ((Expr(3) + 4).const_value(), 7);
  EXPECT_EQ((Expr(3) - 4).const_value(), -1);
  EXPECT_EQ((Expr(3) * 4).const_value(), 12);
  EXPECT_EQ((Expr(7) / 2).const_value(), 3);
  EXPECT_EQ((Expr(-7) / 2).const_value(), -4);  // floor, not C truncation
  EXPECT_EQ((Expr(7) % 3).const_value(), 1);
  EXPECT_EQ((Expr(-7) % 3).const_value(), 2);
  EXPECT_EQ(min(Expr(3), 4).const_value(), 3);
  EXPECT_EQ(max(Expr(3), 4).const_value(), 4);
  EXPECT_EQ((Expr(3) < 4).const_value(), 1);
  EXPECT_EQ((Expr(4) < 4).const_value(), 0);
  EXPECT_EQ((Expr(4) <= 4).const_value(), 1);
  EXPECT_EQ(Expr::make(Expr::Kind::Eq, 4, 5).const_value(), 0);
  EXPECT_EQ((Expr(2) && 3).const_value(), 1);
  EXPECT_EQ((Expr(0) && 3).const_value(), 0);
  EXPECT_EQ(Expr::make(Expr::Kind::Or, 0, 5).const_value(), 1);
  EXPECT_EQ(ceil_div(Expr(10), 4).const_value(), 3);
}

TEST(ExprSimplify, Identities) {
  EXPECT_TRUE((m + 0).same_as(m));
  EXPECT_TRUE((Expr(0) + m).same_as(m));
  EXPECT_TRUE((m - 0).same_as(m));
  EXPECT_TRUE((m * 1).same_as(m));
  EXPECT_TRUE((Expr(1) * m).same_as(m));
  EXPECT_EQ((m * 0).str(), "0");
  EXPECT_EQ((Expr(0) * m).str(), "0");
  EXPECT_TRUE((m / 1).same_as(m));
  EXPECT_EQ((m % 1).str(), "0");
  EXPECT_EQ((Expr(0) / m).str(), "0");
  EXPECT_EQ((Expr(0) % m).str(), "0");
  EXPECT_EQ((m - m).str(), "0");
}

TEST(ExprSimplify, ConstantGoesRight) {
  EXPECT_EQ((Expr(16) * a0).str(), "a0 * 16");
  EXPECT_EQ((Expr(3) + m).str(), "m + 3");
  EXPECT_EQ((m + -3).str(), "m - 3");
}

TEST(ExprSimplify, ReassociatesConstants) {
  EXPECT_EQ(((m + 3) + 4).str(), "m + 7");
  EXPECT_EQ(((m + 3) - 3).str(), "m");
  EXPECT_EQ(((m - 3) + 1).str(), "m - 2");
  EXPECT_EQ(((m * 4) * 16).str(), "m * 64");
  EXPECT_EQ(((m + 3) + n).str(), "m + n + 3");
  EXPECT_EQ((m * 16 / 16).str(), "m");
  EXPECT_EQ((m * 64 / 16).str(), "m * 4");
  EXPECT_EQ((m / 4 / 8).str(), "m / 32");
  EXPECT_EQ((m * 16 % 16).str(), "0");
  EXPECT_EQ((m * 32 % 16).str(), "0");
  EXPECT_EQ((m * 16 % 32).str(), "m * 16 % 32");  // not a multiple: kept
  EXPECT_EQ(ceil_div(m, 64).str(), "(m + 63) / 64");
}

TEST(ExprSimplify, Logic) {
  Expr lt = m < n;
  EXPECT_TRUE((Expr(1) && lt).same_as(lt));
  EXPECT_TRUE((lt && 1).same_as(lt));
  EXPECT_EQ((Expr(0) && lt).str(), "0");
  EXPECT_EQ((lt && 0).str(), "0");
  // `1 && m` is 0/1 while m is any integer: not simplified to m.
  EXPECT_EQ((Expr(1) && m).str(), "m && 1");
}

TEST(ExprSimplify, DivisionByZeroConstantThrows) {
  EXPECT_THROW(m / 0, Error);
  EXPECT_THROW(m % 0, Error);
  EXPECT_THROW(Expr(4) / 0, Error);
  try {
    (void)(m / 0);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("divides by zero"), std::string::npos);
  }
}

TEST(ExprPrint, PartitionIndex) {
  Expr mb = Expr::var("m_b"), mt = Expr::var("m_t"), mr = Expr::var("m_r");
  EXPECT_EQ((mb * 64 + mt * 4 + mr).str(), "m_b * 64 + m_t * 4 + m_r");
}

TEST(ExprPrint, MinimalParentheses) {
  EXPECT_EQ((a - (b + c)).str(), "a - (b + c)");
  EXPECT_EQ(((a - b) + c).str(), "a - b + c");
  EXPECT_EQ((a + (b - c)).str(), "a + (b - c)");
  EXPECT_EQ(((a + b) * c).str(), "(a + b) * c");
  EXPECT_EQ((a * (b + c)).str(), "a * (b + c)");
  EXPECT_EQ((a * b + c).str(), "a * b + c");
  EXPECT_EQ((a / (b * c)).str(), "a / (b * c)");
  EXPECT_EQ((a * (b / c)).str(), "a * (b / c)");
  EXPECT_EQ((a / b * c).str(), "a / b * c");
  EXPECT_EQ((a % b).str(), "a % b");
  EXPECT_EQ(((a + 1) % b).str(), "(a + 1) % b");
  EXPECT_EQ((a + b < c * 2).str(), "a + b < c * 2");
  EXPECT_EQ(((a < b) && (c <= 4)).str(), "a < b && c <= 4");
  Expr eq = Expr::make(Expr::Kind::Eq, a < b, c);
  EXPECT_EQ(eq.str(), "a < b == c");
  EXPECT_EQ(Expr::make(Expr::Kind::Lt, Expr::make(Expr::Kind::Eq, a, b), c).str(),
            "(a == b) < c");
  Expr orx = Expr::make(Expr::Kind::Or, a < b, b < c);
  EXPECT_EQ((orx && (a < c)).str(), "(a < b || b < c) && a < c");
  EXPECT_EQ(Expr::make(Expr::Kind::Or, (a < b) && (b < c), a < c).str(),
            "a < b && b < c || a < c");
  EXPECT_EQ(min(a + 1, b * 2).str(), "min(a + 1, b * 2)");
  EXPECT_EQ((max(a, b) * 4).str(), "max(a, b) * 4");
  EXPECT_EQ(Expr::var("blockIdx.x").str(), "blockIdx.x");
}

TEST(ExprEval, FloorSemanticsAndErrors) {
  Expr::Env env{{"a", 7}, {"b", -2}, {"c", 3}};
  EXPECT_EQ((a * 2 + b).eval(env), 12);
  EXPECT_EQ((a / c).eval(env), 2);
  EXPECT_EQ((b / c).eval(env), -1);  // floor(-2/3)
  EXPECT_EQ((b % c).eval(env), 1);
  EXPECT_EQ(min(a, b).eval(env), -2);
  EXPECT_EQ(max(a, b).eval(env), 7);
  EXPECT_EQ((b < a && c <= 3).eval(env), 1);
  EXPECT_EQ((a < b).eval(env), 0);
  try {
    (a + Expr::var("K")).eval(env);
    FAIL() << "unbound variable must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'K'"), std::string::npos) << e.what();
  }
  EXPECT_THROW((a / (c - 3)).eval(env), Error);
}

TEST(ExprRewrite, SubstituteResimplifies) {
  Expr e = m * 64 + n;
  Expr s = e.substitute({{"m", Expr(2)}, {"n", a + 1}});
  EXPECT_EQ(s.str(), "a + 129");
  Expr both = (m + n).substitute({{"m", n}, {"n", m}});  // simultaneous
  EXPECT_EQ(both.str(), "n + m");
  Expr k = Expr::var("k");
  Expr split = (k * 2).substitute({{"k", Expr::var("k_o") * 16 + Expr::var("k_i")}});
  EXPECT_EQ(split.str(), "(k_o * 16 + k_i) * 2");
  EXPECT_TRUE(e.substitute({{"zz", Expr(1)}}).same_as(e));
}

TEST(ExprRewrite, VarsAndStructuralEquality) {
  Expr e = a * 4 + min(b, Expr::var("N"));
  std::set<std::string> vars;
  e.collect_vars(vars);
  EXPECT_EQ(vars, (std::set<std::string>{"N", "a", "b"}));
  EXPECT_TRUE(e.uses("N"));
  EXPECT_FALSE(e.uses("c"));
  EXPECT_TRUE(e.same_as(a * 4 + min(b, Expr::var("N"))));
  EXPECT_FALSE(e.same_as(a * 4 + min(Expr::var("N"), b)));
  EXPECT_FALSE((a - b).same_as(b - a));
}

TEST(ExprBounds, PartitionIndex) {
  Expr mb = Expr::var("m_b"), mt = Expr::var("m_t"), mr = Expr::var("m_r");
  Expr idx = mb * 64 + mt * 4 + mr;
  std::map<std::string, Expr::Range> r{{"m_b", {0, 3}}, {"m_t", {0, 15}}, {"m_r", {0, 3}}};
  auto bnd = idx.bounds(r);
  ASSERT_TRUE(bnd);
  EXPECT_EQ(bnd->lo, 0);
  EXPECT_EQ(bnd->hi, 255);
  auto guard = (idx < 256).bounds(r);
  ASSERT_TRUE(guard);
  EXPECT_EQ(guard->lo, 1);  // decided: the guard can be dropped
  EXPECT_EQ(guard->hi, 1);
  auto partial = (idx < 200).bounds(r);
  EXPECT_EQ(partial->lo, 0);
  EXPECT_EQ(partial->hi, 1);
  EXPECT_EQ((idx < 0).bounds(r)->hi, 0);
  EXPECT_FALSE((idx + Expr::var("M")).bounds(r));
}

TEST(ExprBounds, DivModMulSigns) {
  std::map<std::string, Expr::Range> r{{"a", {0, 255}}, {"b", {-3, 5}}, {"c", {2, 4}}};
  auto q = (a / 16).bounds(r);
  EXPECT_EQ(q->lo, 0);
  EXPECT_EQ(q->hi, 15);
  auto md = (a % 16).bounds(r);
  EXPECT_EQ(md->lo, 0);
  EXPECT_EQ(md->hi, 15);
  auto small = (c % 16).bounds(r);  // already below the modulus: kept
  EXPECT_EQ(small->lo, 2);
  EXPECT_EQ(small->hi, 4);
  auto neg = (b % 4).bounds(r);
  EXPECT_EQ(neg->lo, 0);
  EXPECT_EQ(neg->hi, 3);
  auto bq = (b / 2).bounds(r);
  EXPECT_EQ(bq->lo, -2);
  EXPECT_EQ(bq->hi, 2);
  auto prod = (b * b).bounds(r);  // interval arithmetic ignores the correlation
  EXPECT_EQ(prod->lo, -15);
  EXPECT_EQ(prod->hi, 25);
  auto sub = (c - b).bounds(r);
  EXPECT_EQ(sub->lo, -3);
  EXPECT_EQ(sub->hi, 7);
  auto mixed = (b * Expr(-2)).bounds(r);
  EXPECT_EQ(mixed->lo, -10);
  EXPECT_EQ(mixed->hi, 6);
  auto mn = min(a, c).bounds(r);
  EXPECT_EQ(mn->lo, 0);
  EXPECT_EQ(mn->hi, 4);
  auto mx = max(b, c).bounds(r);
  EXPECT_EQ(mx->lo, 2);
  EXPECT_EQ(mx->hi, 5);
  EXPECT_FALSE((a / b).bounds(r));  // divisor range contains 0
  auto k = Expr(7).bounds({});
  EXPECT_EQ(k->lo, 7);
  EXPECT_EQ(k->hi, 7);
}

TEST(ExprBounds, Logic) {
  std::map<std::string, Expr::Range> r{{"a", {0, 3}}, {"b", {4, 8}}};
  auto t = ((a < b) && (a <= 3)).bounds(r);
  EXPECT_EQ(t->lo, 1);
  EXPECT_EQ(t->hi, 1);
  auto f = ((b < a) && (a < 2)).bounds(r);
  EXPECT_EQ(f->lo, 0);
  EXPECT_EQ(f->hi, 0);
  auto o = Expr::make(Expr::Kind::Or, b < a, a < 2).bounds(r);
  EXPECT_EQ(o->lo, 0);
  EXPECT_EQ(o->hi, 1);
  auto eq = Expr::make(Expr::Kind::Eq, a, b).bounds(r);
  EXPECT_EQ(eq->hi, 0);
}

// Simplification must never change a value, and bounds() must contain every value:
// build random trees both as Expr (simplified) and as a direct evaluation, then compare
// at random points of the variables' ranges.
struct RandomTree {
  std::mt19937 rng;
  std::map<std::string, int64_t> point;
  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

  // Returns the Expr and the value it must have at `point`.
  std::pair<Expr, int64_t> build(int depth) {
    if (depth == 0 || pick(0, 3) == 0) {
      if (pick(0, 1)) {
        int64_t c = pick(-3, 8);
        return {Expr(c), c};
      }
      std::string v = std::string(1, char('a' + pick(0, 2)));
      return {Expr::var(v), point.at(v)};
    }
    auto [x, xv] = build(depth - 1);
    int op = int(pick(0, 11));
    if (op == 4 || op == 5) {  // divide by a positive constant or a positive var sum
      int64_t c = pick(1, 9);
      if (op == 4) return {x / c, xv / c - ((xv % c != 0) && (xv < 0) ? 1 : 0)};
      int64_t r = xv % c;
      return {x % c, r < 0 ? r + c : r};
    }
    auto [y, yv] = build(depth - 1);
    switch (op) {
      case 0: return {x + y, xv + yv};
      case 1: return {x - y, xv - yv};
      case 2: return {x * y, xv * yv};
      case 3: return {min(x, y), std::min(xv, yv)};
      case 6: return {max(x, y), std::max(xv, yv)};
      case 7: return {x < y, xv < yv};
      case 8: return {x <= y, xv <= yv};
      case 9: return {Expr::make(Expr::Kind::Eq, x, y), xv == yv};
      case 10: return {x < 3 && y < 4, xv < 3 && yv < 4};
      default: return {Expr::make(Expr::Kind::Or, x, y), xv != 0 || yv != 0};
    }
  }
};

TEST(ExprProperty, SimplificationKeepsValuesAndBoundsContainThem) {
  RandomTree t{std::mt19937(1234), {}};
  std::map<std::string, Expr::Range> ranges{{"a", {0, 7}}, {"b", {-4, 4}}, {"c", {2, 5}}};
  for (int trial = 0; trial < 3000; ++trial) {
    for (auto& [name, r] : ranges) t.point[name] = t.pick(r.lo, r.hi);
    auto [e, want] = t.build(4);
    Expr::Env env(t.point.begin(), t.point.end());
    ASSERT_EQ(e.eval(env), want) << e.str();
    auto bnd = e.bounds(ranges);
    ASSERT_TRUE(bnd) << e.str();
    ASSERT_LE(bnd->lo, want) << e.str();
    ASSERT_GE(bnd->hi, want) << e.str();
    Expr again = e.substitute({{"a", Expr(t.point["a"])}, {"b", Expr(t.point["b"])},
                               {"c", Expr(t.point["c"])}});
    ASSERT_TRUE(again.is_const()) << again.str();
    ASSERT_EQ(again.const_value(), want) << e.str();
  }
}

// The interpreter's compiled form (interp::IntExpr: affine sums folded into one node)
// evaluates every random tree to Expr::eval's value, for each of several threads whose
// slots hold different values, and says which trees depend on the thread.
TEST(ExprProperty, InterpreterFormGivesEvalsValue) {
  RandomTree t{std::mt19937(4321), {}};
  std::map<std::string, Expr::Range> ranges{{"a", {0, 7}}, {"b", {-4, 4}}, {"c", {2, 5}}};
  const std::map<std::string, int> slots{{"a", 0}, {"b", 1}, {"c", 2}};
  constexpr size_t kThreads = 3;
  for (int trial = 0; trial < 3000; ++trial) {
    // Thread-major rows: slot s of thread i at ints[s * kThreads + i]; `b` is the slot
    // that differs between threads.
    int64_t ints[3 * kThreads];
    std::vector<std::map<std::string, int64_t>> points(kThreads);
    for (auto& [name, r] : ranges) {
      const int64_t shared_value = t.pick(r.lo, r.hi);
      for (size_t i = 0; i < kThreads; ++i) {
        const int64_t v = name == "b" ? t.pick(r.lo, r.hi) : shared_value;
        points[i][name] = v;
        ints[size_t(slots.at(name)) * kThreads + i] = v;
      }
    }
    t.point = points[0];
    auto [e, want] = t.build(4);
    const interp::IntExpr compiled(
        e, [&](const std::string& v) { return slots.at(v); }, [](int slot) { return slot == 1; });
    ASSERT_EQ(compiled.uniform(), !e.uses("b")) << e.str();
    for (size_t i = 0; i < kThreads; ++i) {
      Expr::Env env(points[i].begin(), points[i].end());
      ASSERT_EQ(compiled.eval(ints, kThreads, int(i)), e.eval(env)) << e.str() << " thread " << i;
    }
  }
}

// A division by zero throws where Expr::eval would reach it, and only there: behind an
// And whose left side is false, or an Or whose left side is true, it is not evaluated.
TEST(ExprProperty, InterpreterFormDividesByZeroOnlyWhereEvalDoes) {
  const std::map<std::string, int> slots{{"a", 0}, {"b", 1}};
  auto compile = [&](const Expr& e) {
    return interp::IntExpr(e, [&](const std::string& v) { return slots.at(v); },
                           [](int) { return false; });
  };
  const int64_t b_zero[] = {7, 0}, b_two[] = {7, 2};
  const Expr guarded = Expr::make(Expr::Kind::And, Expr::make(Expr::Kind::Or, b < 0, 0 < b), a / b < 4);
  EXPECT_EQ(compile(guarded).eval(b_zero, 1, 0), 0);
  EXPECT_EQ(compile(guarded).eval(b_two, 1, 0), 1);
  const Expr either = Expr::make(Expr::Kind::Or, b <= 0, 3 * a + 1 < a % b);
  EXPECT_EQ(compile(either).eval(b_zero, 1, 0), 1);
  EXPECT_EQ(compile(either).eval(b_two, 1, 0), 0);
  EXPECT_THROW(compile(a / b + 2 * a - 1).eval(b_zero, 1, 0), Error);
  EXPECT_EQ(compile(a / b + 2 * a - 1).eval(b_two, 1, 0), 16);
  EXPECT_THROW(compile(min(a - b, a % (b * 1))).eval(b_zero, 1, 0), Error);
}

}  // namespace
}  // namespace loom
