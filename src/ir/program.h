// The containers of the three loop-nest levels, plus their printers and verifiers.
//
//   LoopProgram   tensors + one LoopOp per (unfused) graph op, in execution order
//   TileProgram   tensors + one TileOp per kernel (after fusion: usually one)
//   KernelProgram tensors + one KernelOp per kernel, with launch geometry and params
//
// Tensors are declared once per program with their storage shape (row-major,
// contiguous); an operand used transposed is loaded with permuted indices, never copied.
// Shapes may hold symbols (M, N, K) when the expression leaves sizes symbolic; those
// symbols become int parameters of the kernels.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/expr.h"
#include "ir/stmt.h"

namespace loom {

enum class TensorRole { Input, Output, Temp };

struct TensorDecl {
  std::string name;
  DType dtype = DType::F32;
  std::vector<Expr> shape;  // storage shape, row-major
  TensorRole role = TensorRole::Input;
  std::vector<Expr> strides() const;  // row-major strides of `shape`
  Expr numel() const;
};

struct LoopOp {
  std::string name;                 // e.g. "matmul", "relu"
  std::vector<std::string> inputs;  // tensors read
  std::string output;               // tensor written
  Block body;
};

struct TileOp {
  std::string name;
  std::vector<std::string> inputs;
  std::string output;
  Block body;
};

struct KernelOp {
  std::string name;                  // CUDA symbol, e.g. "k_matmul_relu"
  std::vector<std::string> params;   // tensors (pointers) then symbols (ints), in order
  Expr grid[3] = {Expr(1), Expr(1), Expr(1)};  // blockIdx.x/y/z extents
  int block_threads = 1;             // threadIdx.x extent (1-D blocks)
  int min_blocks_per_sm = 0;         // __launch_bounds__ second argument when > 0
  Block body;
};

struct ProgramBase {
  std::vector<TensorDecl> tensors;
  std::vector<std::string> symbols;  // problem-size symbols, e.g. {"M","N","K"}
  const TensorDecl& tensor(const std::string& name) const;  // throws when unknown
  TensorDecl& tensor(const std::string& name);
  bool has_tensor(const std::string& name) const;
};

struct LoopProgram : ProgramBase { std::vector<LoopOp> ops; };
struct TileProgram : ProgramBase { std::vector<TileOp> ops; };
struct KernelProgram : ProgramBase { std::vector<KernelOp> kernels; };

// Printers: stable, line-oriented text (the -vv diffs are diffs of these).
std::string print(const LoopProgram& p);
std::string print(const TileProgram& p);
std::string print(const KernelProgram& p);
std::string print_block(const Block& b, int indent = 0);

// Verifiers: throw loom::Error naming the first broken invariant and where it is.
void verify(const LoopProgram& p);
void verify(const TileProgram& p);
void verify(const KernelProgram& p);

}  // namespace loom
