// The statement tree shared by Loop IR, Tile IR and Kernel IR.
//
// The three levels use one node type so that a pass can be shown as a line diff of the
// printed tree and the CPU interpreter can execute all three; what distinguishes the
// levels is which statement kinds and loop tiers they admit, and that is what each
// level's verifier checks (src/ir/verify.cpp):
//
//   Loop IR   For(tier None, kind Parallel|Reduce), Load, Compute, Init, Accum, Write, If
//   Tile IR   + For loops with a hardware tier (Grid, Thread, Register, ...)
//   Kernel IR no Grid/Thread loops: they became Let bindings of blockIdx/threadIdx;
//             indices are flat offsets (one Expr per access); Atom statements
//
// Scalar values are named (SSA-like: each name is assigned by one statement in its
// scope) and hold the compute type, f32 on the GPU (the interpreter uses double).
#pragma once
#include <string>
#include <vector>

#include "ir/expr.h"

namespace loom {

enum class StmtKind { For, If, Let, Load, Compute, Init, Accum, Write, Atom };

enum class LoopKind { Parallel, Reduce };

// Hardware level a loop is bound to (DESIGN.md: GRID > CLUSTER > BLOCK > WARPGROUP >
// WARP > THREAD > REGISTER > ATOM). None = not yet bound (Loop IR, or a serial loop).
enum class Tier { None, Grid, Cluster, Warpgroup, Warp, Thread, Register, Atom };

const char* tier_name(Tier t);        // "grid", "thread", ...
const char* loop_kind_name(LoopKind k);  // "parallel", "reduce"

// Elementwise scalar operations (the epilogue vocabulary; more join as ops need them).
enum class ScalarOp { Add, Sub, Mul, Div, Max, Min, Neg, Relu, Gelu, Silu };
const char* scalar_op_name(ScalarOp op);  // "add", "multiply", "relu", ...
int scalar_op_arity(ScalarOp op);
double eval_scalar_op(ScalarOp op, double a, double b = 0.0);  // reference semantics

// A scalar operand: a named value or an immediate.
struct Operand {
  std::string name;   // empty when immediate
  double imm = 0.0;
  static Operand value(std::string n) { return Operand{std::move(n), 0.0}; }
  static Operand constant(double v) { return Operand{"", v}; }
  bool is_imm() const { return name.empty(); }
  std::string str() const;  // name, or the constant printed exactly (e.g. 0.5)
};

struct Stmt {
  StmtKind kind = StmtKind::Load;

  // For: `for var in 0..extent` bound to `tier`; `axis` names the Loop IR loop it came
  // from (m, n, k, b), kept through factorization for printing and for passes that
  // look for "the N axis". `unroll` asks codegen for #pragma unroll.
  std::string var;
  Expr extent;
  LoopKind loop_kind = LoopKind::Parallel;
  Tier tier = Tier::None;
  std::string axis;
  bool unroll = false;

  // If: `if cond:` body.  Let: `var = value` (an integer binding, Kernel IR).
  Expr cond;
  Expr value;

  // Load `dst = load tensor[index]`; Write `tensor[index] = args[0]`.
  // Compute `dst = op(args)`; Init `dst = imm`; Accum `dst <- add(dst, args[0])`.
  // Atom `atom(dst; args)`: an instruction from the atom table (src/atoms), e.g. the FMA
  // atom `dst <- fma(args[0], args[1], dst)`.
  std::string dst;
  std::string tensor;
  std::vector<Expr> index;
  ScalarOp op = ScalarOp::Add;
  std::vector<Operand> args;
  double imm = 0.0;
  std::string atom;

  std::vector<Stmt> body;  // For, If

  // Factories: the only way passes should build statements.
  static Stmt For(std::string var, Expr extent, LoopKind kind, std::string axis,
                  std::vector<Stmt> body, Tier tier = Tier::None);
  static Stmt If(Expr cond, std::vector<Stmt> body);
  static Stmt Let(std::string var, Expr value);
  static Stmt Load(std::string dst, std::string tensor, std::vector<Expr> index);
  static Stmt Compute(std::string dst, ScalarOp op, std::vector<Operand> args);
  static Stmt Init(std::string acc, double value);
  static Stmt Accum(std::string acc, Operand value);
  static Stmt Write(std::string tensor, std::vector<Expr> index, Operand value);
  static Stmt Atom(std::string atom, std::string dst, std::vector<Operand> args);
};

using Block = std::vector<Stmt>;

// Rewrite helpers used by many passes.
// Substitute index variables in every Expr of the subtree (extents, conds, indices, lets).
void substitute_block(Block& b, const std::map<std::string, Expr>& repl);
// Depth-first visit (pre-order); the callback may modify the statement in place.
void walk(Block& b, const std::function<void(Stmt&)>& fn);
void walk(const Block& b, const std::function<void(const Stmt&)>& fn);

}  // namespace loom
