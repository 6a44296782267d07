// PyTorch code as Loom's second front end: the subset of Python that matmul and
// attention programs are written in, lowered through the same GraphBuilder as the
// expression language (parser.h), so both spellings of a program give one Graph.
//
//   a = torch.randn(2048, 2048, dtype=torch.float16, device='cuda')
//   b = torch.randn(2048, 2048, dtype=torch.float16, device='cuda')
//   torch.relu(a @ b.t())            # the last expression statement is the result
//
// is relu(matmul(a[2048,2048]:f16, b[2048,2048]:f16.T)).
//
// Statements, separated by ';' or newlines (inside brackets a newline continues the
// line, as in Python; '#' starts a comment):
//   import torch | import torch.nn.functional as F | from torch.nn import functional as F
//                                    accepted and ignored (torch and F are always known)
//   NAME = expr | NAME += expr (also -=, *=) | expr
// Expressions: Python's precedence of unary -, **, * @ /, + -; calls with positional
// then keyword arguments; numbers, 'strings', True/False/None, tuples and lists (shapes).
//   torch.randn / rand / empty / ones / zeros (shape as ints or one tuple/list;
//       dtype=torch.float16|half|bfloat16|float32|float; device='cuda'|'cuda:N'|'cpu',
//       checked and ignored; requires_grad= ignored). The values are Loom's seeded inputs
//       whatever the constructor: a program describes shapes, not data.
//   torch.matmul, torch.mm (2-D), torch.bmm (3-D), @; F.linear(x, w, bias=None);
//   torch.relu, F.relu, F.gelu (approximate='none'), F.silu; + - * with a tensor or a
//   number (division and powers only between numbers); .t(), .T, .mT,
//   .transpose(-2, -1) (and (0, 1) on 2-D), torch.t, torch.transpose: input tensors
//   only, read transposed; F.scaled_dot_product_attention(q, k, v, attn_mask=None,
//   dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False).
// Input tensors are named by the variable they are first assigned to; one created
// inline in an expression gets the first free name of A, B, C, ... (never an
// identifier of the program).
#pragma once
#include <string_view>

#include "ir/graph.h"

namespace loom {

// True when `text` is PyTorch code rather than the expression language: it mentions
// `torch.` or `F.` (an identifier followed by a dot, which the expression language
// never writes), or starts with `import` or `from`.
bool looks_like_torch_code(std::string_view text);

// Throws ExprError (frontend/diagnostic.h) with the line and column of the offending
// token, saying what the subset supports.
Graph parse_torch_code(std::string_view text);

}  // namespace loom
