// The expression language: text -> Graph, built through GraphBuilder so that text and
// C++ make identical graphs.
//
//   expr   := call | tensor | number
//   call   := IDENT '(' arg (',' arg)* ')'
//   arg    := expr | IDENT '=' (IDENT | NUMBER)  keyword argument, after the operands
//   tensor := IDENT '[' dim (',' dim)* ['|' INT (',' INT)*] ']' ':' DTYPE ['.T']
//   dim    := INT | IDENT                       a positive size or a symbol (M, K, ...)
//   '|'    strides of a view into a larger buffer (elements, the row pitch last; outer
//          ones left out are dense): A[M,K|1056] is a column slice of a [M,1056] buffer
//
// e.g. `relu(linear(X[M,K]:bf16, W[N,K]:bf16, bias[N]:bf16))`,
//      `matmul(A[M,K]:f16, B[N,K]:f16.T, out=f32)`,
//      `attention(Q[B,32,S,128]:bf16, K[B,8,S,128]:bf16, V[B,8,S,128]:bf16, causal=true)`.
//
// Functions: matmul(A, B[, out=]) bmm(A, B[, out=]) linear(X, W[, bias][, out=])
// attention(Q, K, V[, causal=false|true|top_left][, scale=<number>][, lse=false|true])
// relu(x) gelu(x) silu(x) add(x, y) sub(x, y) mul(x, y) max(x, y); dtypes f32, tf32,
// f16, bf16. The rules on shapes, dtypes and the one-contraction structure are
// GraphBuilder's (include/loom/builder.h).
#pragma once
#include <string_view>

#include "ir/graph.h"

namespace loom {

// Throws ExprError (frontend/diagnostic.h, a loom::Error) with the column of the
// offending token and the text with a caret under it. PyTorch code (torch_parser.h:
// text that mentions `torch.` or `F.`) is read by the PyTorch front end instead, so
// every command that takes an expression takes either form.
Graph parse_expression(std::string_view text);

}  // namespace loom
