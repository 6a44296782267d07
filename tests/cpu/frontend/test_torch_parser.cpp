// PyTorch code as a front end (src/frontend/torch_parser.h): every construct of the
// subset builds the same Graph as its expression-language spelling, and every class of
// code outside the subset fails with a message naming the problem and the line and
// column of the token it comes from.
#include <gtest/gtest.h>

#include "frontend/diagnostic.h"
#include "frontend/parser.h"
#include "frontend/torch_parser.h"

namespace loom {
namespace {

// The torch form and the expression form must build identical graphs.
void same_graph(const std::string& torch, const std::string& expr) {
  SCOPED_TRACE(torch);
  ASSERT_TRUE(looks_like_torch_code(torch));
  ASSERT_FALSE(looks_like_torch_code(expr));
  Graph t, e;
  try {
    t = parse_expression(torch);
  } catch (const Error& err) {
    FAIL() << "torch form rejected: " << err.what();
  }
  e = parse_expression(expr);
  EXPECT_EQ(t.str(), e.str());
}

TEST(TorchCode, ArticleMatmulWithInlineTensors) {
  same_graph("torch.matmul(torch.randn(64,32),torch.randn(32,64))",
             "matmul(A[64,32]:f32, B[32,64]:f32)");
}

TEST(TorchCode, ArticleFp16ProgramNamesTensorsAfterVariables) {
  const std::string m = "torch.randn(2048,2048,dtype=torch.float16,device='cuda')";
  same_graph("a=" + m + ";b=" + m + ";torch.matmul(a,b)",
             "matmul(a[2048,2048]:f16, b[2048,2048]:f16)");
  // b = a is one tensor used twice.
  same_graph("a=" + m + ";b=a;torch.matmul(a,b)", "matmul(a[2048,2048]:f16, a[2048,2048]:f16)");
}

TEST(TorchCode, ShapesDtypesAndDevices) {
  same_graph("a = torch.randn((64, 32), dtype=torch.half, device='cuda:0')\n"
             "b = torch.empty([32, 16], dtype=torch.float16, device=\"cpu\")\n"
             "a @ b",
             "matmul(a[64,32]:f16, b[32,16]:f16)");
  same_graph("x = torch.ones(8, 4, dtype=torch.bfloat16, requires_grad=False)\n"
             "y = torch.zeros(size=(4, 2), dtype=torch.bfloat16)\ntorch.mm(x, y)",
             "matmul(x[8,4]:bf16, y[4,2]:bf16)");
  same_graph("x = torch.rand(8, 4, dtype=torch.float32); y = torch.randn(4, 2, dtype=torch.float)\n"
             "x @ y",
             "matmul(x[8,4]:f32, y[4,2]:f32)");
}

TEST(TorchCode, ImportsCommentsContinuationsAndIntegerVariables) {
  same_graph("import torch\n"
             "import torch.nn.functional as F\n"
             "from torch.nn import functional as G\n"
             "# a comment line\n"
             "M = 64; K = 2 * 16  # trailing comment\n"
             "a = torch.randn(M,\n"
             "                K)\n"
             "b = torch.randn(K, \\\n"
             "                M)\n"
             "G.relu(a @ b)\n",
             "relu(matmul(a[64,32]:f32, b[32,64]:f32))");
}

TEST(TorchCode, Contractions) {
  same_graph("a = torch.randn(8, 64, 32); b = torch.randn(8, 32, 16); torch.bmm(a, b)",
             "bmm(a[8,64,32]:f32, b[8,32,16]:f32)");
  same_graph("a = torch.randn(2, 4, 64, 32); b = torch.randn(2, 4, 32, 16); torch.matmul(a, b)",
             "matmul(a[2,4,64,32]:f32, b[2,4,32,16]:f32)");
  same_graph("x = torch.randn(64, 32); w = torch.randn(16, 32); F.linear(x, w)",
             "linear(x[64,32]:f32, w[16,32]:f32)");
  same_graph("x = torch.randn(64, 32); w = torch.randn(16, 32); bias = torch.randn(16)\n"
             "torch.nn.functional.linear(x, w, bias)",
             "linear(x[64,32]:f32, w[16,32]:f32, bias[16]:f32)");
  same_graph("x = torch.randn(64, 32); w = torch.randn(16, 32); b = torch.randn(16)\n"
             "F.linear(x, w, bias=b)",
             "linear(x[64,32]:f32, w[16,32]:f32, b[16]:f32)");
  same_graph("x = torch.randn(64, 32); w = torch.randn(16, 32); F.linear(x, w, None)",
             "linear(x[64,32]:f32, w[16,32]:f32)");
}

TEST(TorchCode, TransposesReadTheInputTransposed) {
  const std::string ab = "a = torch.randn(64, 32); b = torch.randn(16, 32); ";
  const std::string want = "matmul(a[64,32]:f32, b[16,32]:f32.T)";
  same_graph(ab + "a @ b.t()", want);
  same_graph(ab + "a @ b.T", want);
  same_graph(ab + "a @ b.mT", want);
  same_graph(ab + "a @ b.transpose(-1, -2)", want);
  same_graph(ab + "a @ b.transpose(-2, -1)", want);
  same_graph(ab + "a @ b.transpose(0, 1)", want);
  same_graph(ab + "torch.matmul(a, torch.t(b))", want);
  same_graph(ab + "torch.matmul(a, torch.transpose(b, 0, 1))", want);
  same_graph(ab + "bt = b.t(); a @ bt", want);
  same_graph(ab + "a @ b.t().t().t()", want);
  same_graph("a = torch.randn(32, 64).t(); b = torch.randn(32, 16); a @ b",
             "matmul(a[32,64]:f32.T, b[32,16]:f32)");
  same_graph("q = torch.randn(2, 4, 64, 32); k = torch.randn(2, 4, 64, 32); q @ k.transpose(-2, -1)",
             "matmul(q[2,4,64,32]:f32, k[2,4,64,32]:f32.T)");
}

TEST(TorchCode, Activations) {
  const std::string ab = "a = torch.randn(64, 32); b = torch.randn(32, 16); ";
  same_graph(ab + "torch.relu(a @ b)", "relu(matmul(a[64,32]:f32, b[32,16]:f32))");
  same_graph(ab + "F.relu(a @ b)", "relu(matmul(a[64,32]:f32, b[32,16]:f32))");
  same_graph(ab + "F.gelu(a @ b)", "gelu(matmul(a[64,32]:f32, b[32,16]:f32))");
  same_graph(ab + "F.gelu(a @ b, approximate='none')", "gelu(matmul(a[64,32]:f32, b[32,16]:f32))");
  same_graph(ab + "F.silu(a @ b)", "silu(matmul(a[64,32]:f32, b[32,16]:f32))");
}

TEST(TorchCode, ArithmeticWithTensorsAndNumbers) {
  const std::string ab = "a = torch.randn(64, 32); b = torch.randn(32, 16); ";
  const std::string mm = "matmul(a[64,32]:f32, b[32,16]:f32)";
  same_graph(ab + "bias = torch.randn(16); a @ b + bias", "add(" + mm + ", bias[16]:f32)");
  same_graph(ab + "r = torch.randn(64, 16); r + a @ b", "add(" + mm + ", r[64,16]:f32)");
  same_graph(ab + "r = torch.randn(64, 16); a @ b - r", "sub(" + mm + ", r[64,16]:f32)");
  same_graph(ab + "s = torch.randn(64, 16); (a @ b) * s", "mul(" + mm + ", s[64,16]:f32)");
  same_graph(ab + "0.5 * (a @ b)", "mul(" + mm + ", 0.5)");
  same_graph(ab + "a @ b * 0.5", "mul(" + mm + ", 0.5)");  // @ and * bind alike, left to right
  same_graph(ab + "a @ b + 1", "add(" + mm + ", 1)");
  same_graph(ab + "a @ b - 2.5e-1", "sub(" + mm + ", 0.25)");
  same_graph(ab + "1 - a @ b", "add(mul(" + mm + ", -1), 1)");
  same_graph(ab + "-(a @ b)", "mul(" + mm + ", -1)");
  same_graph(ab + "y = a @ b; r = torch.randn(64, 16); y += r; y *= 2; y", "mul(add(" + mm +
                                                                               ", r[64,16]:f32), 2)");
  same_graph(ab + "s = 64 ** -0.5; (a @ b) * s", "mul(" + mm + ", 0.125)");
  same_graph(ab + "(a @ b) * (1 / 8)", "mul(" + mm + ", 0.125)");
}

TEST(TorchCode, ScaledDotProductAttention) {
  const std::string qkv = "q = torch.randn(1, 8, 128, 64, dtype=torch.float16)\n"
                          "k = torch.randn(1, 8, 128, 64, dtype=torch.float16)\n"
                          "v = torch.randn(1, 8, 128, 64, dtype=torch.float16)\n";
  const std::string ops = "q[1,8,128,64]:f16, k[1,8,128,64]:f16, v[1,8,128,64]:f16";
  same_graph(qkv + "F.scaled_dot_product_attention(q, k, v)", "attention(" + ops + ")");
  same_graph(qkv + "F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.25)",
             "attention(" + ops + ", causal=top_left, scale=0.25)");
  same_graph(qkv + "F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, "
                   "is_causal=False, scale=None, enable_gqa=False)",
             "attention(" + ops + ")");
  same_graph("q = torch.randn(2, 32, 1, 128, dtype=torch.bfloat16)\n"
             "k = torch.randn(2, 8, 4096, 128, dtype=torch.bfloat16)\n"
             "v = torch.randn(2, 8, 4096, 128, dtype=torch.bfloat16)\n"
             "torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)",
             "attention(q[2,32,1,128]:bf16, k[2,8,4096,128]:bf16, v[2,8,4096,128]:bf16)");
}

TEST(TorchCode, InlineTensorsTakeFreeGeneratedNames) {
  same_graph("A = torch.randn(64, 32); torch.matmul(A, torch.randn(32, 16))",
             "matmul(A[64,32]:f32, B[32,16]:f32)");
  same_graph("B = torch.randn(32, 16); torch.matmul(torch.randn(64, 32), B)",
             "matmul(A[64,32]:f32, B[32,16]:f32)");
  // Any identifier of the program is taken, even one never bound to a tensor.
  same_graph("A = 64; B = torch.randn(32, 16); torch.matmul(torch.randn(A, 32), B)",
             "matmul(C[64,32]:f32, B[32,16]:f32)");
  // An unused tensor costs nothing.
  same_graph("unused = torch.randn(3, 3); torch.matmul(torch.randn(64, 32), torch.randn(32, 16))",
             "matmul(A[64,32]:f32, B[32,16]:f32)");
}

TEST(TorchCode, TheLastExpressionStatementIsTheResult) {
  same_graph("a = torch.randn(64, 32); b = torch.randn(32, 16)\n"
             "torch.relu(a @ b)\n"
             "c = 3\n",
             "relu(matmul(a[64,32]:f32, b[32,16]:f32))");
}

TEST(TorchCode, Detection) {
  EXPECT_TRUE(looks_like_torch_code("torch.matmul(a, b)"));
  EXPECT_TRUE(looks_like_torch_code("x = 1\ny = F .relu(x)"));
  EXPECT_TRUE(looks_like_torch_code("import torch"));
  EXPECT_TRUE(looks_like_torch_code("  from torch import nn"));
  // The expression language never writes an identifier torch or F followed by a dot.
  EXPECT_FALSE(looks_like_torch_code("matmul(A[M,K]:f16, F[N,K]:f16.T)"));
  EXPECT_FALSE(looks_like_torch_code("matmul(torch[4,4]:f32, B[4,4]:f32)"));
  EXPECT_FALSE(looks_like_torch_code("matmul(A[4,4]:f32, xF[4,4]:f32.T)"));
}

// ---- errors ----

struct Failure {
  int column = 0;
  std::string message, what;
};

Failure fails(const std::string& text) {
  try {
    Graph g = parse_torch_code(text);
    ADD_FAILURE() << "parsed without error: " << text << "\n" << g.str();
  } catch (const ExprError& e) {
    return {e.column(), e.message(), e.what()};
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an ExprError: " << e.what();
  }
  return {};
}

// The column of the first (or with `last`, the last) occurrence of `needle`.
int column_of(const std::string& text, const std::string& needle, bool last = false) {
  const size_t p = last ? text.rfind(needle) : text.find(needle);
  EXPECT_NE(p, std::string::npos) << needle;
  return character_column(text, int(p) + 1);  // as ExprError counts: within its line
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

#define EXPECT_FAILS_AT_(text, needle, last, part)                \
  do {                                                             \
    const std::string t_ = (text);                                 \
    Failure f_ = fails(t_);                                        \
    EXPECT_EQ(f_.column, column_of(t_, needle, last)) << f_.what;  \
    EXPECT_TRUE(has(f_.message, part)) << f_.what;                 \
  } while (0)
// The caret under the first occurrence of `needle`, and the message holding `part`.
#define EXPECT_FAILS_AT(text, needle, part) EXPECT_FAILS_AT_(text, needle, false, part)
// The caret under the last occurrence of `needle`.
#define EXPECT_FAILS_AT_LAST(text, needle, part) EXPECT_FAILS_AT_(text, needle, true, part)

const std::string kAB = "a = torch.randn(64, 32); b = torch.randn(32, 16); ";

TEST(TorchCodeErrors, OutsideTheSubsetSaysWhatIsSupported) {
  EXPECT_FAILS_AT(kAB + "torch.softmax(a @ b, -1)", "softmax",
                  "torch.softmax is not part of the subset; Loom reads this PyTorch subset: "
                  "torch.randn/rand/empty/ones/zeros");
  EXPECT_FAILS_AT(kAB + "F.layer_norm(a @ b)", "layer_norm", "torch.nn.functional.layer_norm");
  EXPECT_FAILS_AT(kAB + "(a @ b).sum()", "sum", "tensor attribute .sum is not part of the subset");
  EXPECT_FAILS_AT(kAB + "a[0] @ b", "[0]", "indexing and slicing");
  EXPECT_FAILS_AT(kAB + "lambda", "lambda", "'lambda' is not part of the subset");
  EXPECT_FAILS_AT(kAB + "a == b", "==", "comparisons");
  EXPECT_FAILS_AT(kAB + "a @ b $", "$", "unexpected character '$'");
  EXPECT_FAILS_AT("import numpy\ntorch.randn(2)", "import", "the subset imports only torch");
}

TEST(TorchCodeErrors, TensorCreation) {
  EXPECT_FAILS_AT("a = torch.randn(64, 0); a @ a", "0)", "a dimension must be a positive integer");
  EXPECT_FAILS_AT("a = torch.randn(64, -3); a @ a", "-3", "a dimension must be a positive integer");
  EXPECT_FAILS_AT("a = torch.randn(64, 2.5); a @ a", "2.5", "a dimension must be a positive integer");
  EXPECT_FAILS_AT("a = torch.randn(64, 99999999999999999999); a @ a", "9999", "is too large");
  EXPECT_FAILS_AT("a = torch.randn(dtype=torch.half); a @ a", "torch.randn", "needs a shape");
  EXPECT_FAILS_AT("a = torch.randn(4, 4, dtype=torch.float64); a @ a", "float64",
                  "torch.float64 is not a dtype Loom computes with");
  EXPECT_FAILS_AT("a = torch.randn(4, 4, dtype='half'); a @ a", "'half'", "dtype= takes");
  EXPECT_FAILS_AT("a = torch.randn(4, 4, device='tpu'); a @ a", "'tpu'", "device= takes 'cuda'");
  EXPECT_FAILS_AT("a = torch.randn(4, 4, pin_memory=True); a @ a", "pin_memory",
                  "has no keyword argument pin_memory=");
  EXPECT_FAILS_AT("a = torch.randn(4, 4, dtype=torch.half, dtype=torch.half)", "dtype=torch.half)",
                  "dtype= is given twice");
  EXPECT_FAILS_AT("a = torch.randn(4, dtype=torch.half, 4)", "4)", "positional argument after a keyword");
  EXPECT_FAILS_AT("a = torch.randn(4, 4); a = torch.randn(4, 4); a @ a", "a = torch.randn(4, 4); a @",
                  "'a' already names the tensor created at column 5");
  // Unknown to Loom's names: reserved by the builder, reported where the tensor was made.
  EXPECT_FAILS_AT("out = torch.randn(4, 4); out @ out", "torch", "tensor name 'out' is reserved");
}

TEST(TorchCodeErrors, Transposes) {
  EXPECT_FAILS_AT(kAB + "(a @ b).t()", "t()", ".t() of a computed tensor");
  EXPECT_FAILS_AT("q = torch.randn(2, 4, 8, 8); q @ q.T", "T", ".T of a 4-D tensor reverses all");
  EXPECT_FAILS_AT("q = torch.randn(2, 4, 8, 8); q @ q.t()", "t()", ".t() takes a tensor of at most 2");
  EXPECT_FAILS_AT("q = torch.randn(2, 4, 8, 8); q @ q.transpose(0, 1)", "transpose",
                  "swaps dimensions Loom does not");
  EXPECT_FAILS_AT("q = torch.randn(8, 8); q @ q.transpose(0, 2)", "2)", "out of range");
  EXPECT_FAILS_AT("q = torch.randn(8, 8); q @ q.transpose(0)", "transpose", "takes two dimensions");
}

// F.gelu's two forms: the exact erf one (the default, approximate='none') is gelu, the
// tanh approximation is gelu_tanh, each the same Graph as its expression.
TEST(TorchCode, GeluFormsAreTheExpressionLanguagesTwoGelus) {
  const std::string ab = "a = torch.randn(64, 32, dtype=torch.float16); b = torch.randn(32, 48, dtype=torch.float16); ";
  same_graph(ab + "F.gelu(a @ b, approximate='tanh')", "gelu_tanh(matmul(a[64,32]:f16, b[32,48]:f16))");
  same_graph(ab + "F.gelu(a @ b, approximate='none')", "gelu(matmul(a[64,32]:f16, b[32,48]:f16))");
  EXPECT_NE(parse_expression("gelu_tanh(matmul(a[64,32]:f16, b[32,48]:f16))").str(),
            parse_expression("gelu(matmul(a[64,32]:f16, b[32,48]:f16))").str());
}

TEST(TorchCodeErrors, FunctionsAndOperators) {
  EXPECT_FAILS_AT(kAB + "F.gelu(a @ b, approximate='fast')", "'fast'", "approximate= takes 'none' or 'tanh'");
  EXPECT_FAILS_AT(kAB + "(a @ b) / 8", "/ 8", "division of a tensor");
  EXPECT_FAILS_AT(kAB + "(a @ b) ** 2", "**", "powers of a tensor");
  EXPECT_FAILS_AT(kAB + "torch.matmul(a)", "torch.matmul", "torch.matmul takes two tensors, got 1");
  EXPECT_FAILS_AT(kAB + "torch.matmul(a, b, b)", "b)", "got 3");
  EXPECT_FAILS_AT(kAB + "torch.matmul(a, b, out=b)", "out", "takes no keyword argument out=");
  EXPECT_FAILS_AT("a = torch.randn(2, 4, 8); torch.mm(a, a)", "a, a", "torch.mm multiplies 2-D tensors");
  EXPECT_FAILS_AT(kAB + "torch.relu(a)", "torch.relu", "is an input tensor, not computed by a contraction");
  // A contraction of a computed value: the builder's rule, at the operator.
  EXPECT_FAILS_AT_LAST(kAB + "(a @ b) @ b", "@", "operands of a contraction must be input tensors");
  EXPECT_FAILS_AT_LAST(kAB + "a @ b @ b", "@", "operand A is the result of matmul");
  EXPECT_FAILS_AT(kAB + "a @ 'x'", "'x'", "expected a tensor, found the string 'x'");
  EXPECT_FAILS_AT(kAB + "x = 1 / 0", "/ 0", "division by zero");
  EXPECT_FAILS_AT(kAB + "(a @ b) * 1e39", "1e39", "number 1e39");
  EXPECT_FAILS_AT(kAB + "nope(a)", "nope", "'nope' is not defined");
  EXPECT_FAILS_AT(kAB + "a.t = b", "= b", "only a plain name can be assigned");
}

TEST(TorchCodeErrors, Attention) {
  const std::string qkv = "q = torch.randn(1, 8, 64, 64, dtype=torch.half)\n"
                          "k = torch.randn(1, 2, 64, 64, dtype=torch.half)\n";
  EXPECT_FAILS_AT(qkv + "F.scaled_dot_product_attention(q, k, k)", "F.scaled",
                  "PyTorch needs enable_gqa=True");
  EXPECT_FAILS_AT(qkv + "F.scaled_dot_product_attention(q, q, q, attn_mask=q)", "q)",
                  "attn_mask= must be None");
  EXPECT_FAILS_AT(qkv + "F.scaled_dot_product_attention(q, q, q, dropout_p=0.1)", "0.1",
                  "dropout_p= must be 0");
  EXPECT_FAILS_AT(qkv + "F.scaled_dot_product_attention(q, q, q, None)", "None",
                  "query, key and value (the options by keyword");
  EXPECT_FAILS_AT(qkv + "F.scaled_dot_product_attention(q, q, q, is_causal=1)", "1)",
                  "is_causal= and enable_gqa= take True or False");
  EXPECT_FAILS_AT(qkv + "F.scaled_dot_product_attention(q, q, q) * 2", "* 2",
                  "attention takes no elementwise epilogue");
}

TEST(TorchCodeErrors, ProgramShape) {
  Failure none = fails("a = torch.randn(4, 4)");
  EXPECT_EQ(none.column, 22) << none.what;  // just past the end
  EXPECT_TRUE(has(none.message, "the program has no result")) << none.what;
  EXPECT_FAILS_AT_LAST("x = 3\nx", "x", "the program's result is the number 3");
  EXPECT_FAILS_AT_LAST("a = torch.randn(4, 4)\na", "a", "no contraction, only the tensor a[4,4]");
  EXPECT_FAILS_AT_LAST(kAB + "a @ b b", "b", "expected ';' or a new line after the statement");
  EXPECT_FAILS_AT("a = torch.randn(4, 4, device='cuda)\na @ a", "'cuda", "unterminated string");
  EXPECT_FAILS_AT_LAST("a = (((((", "(", "'(' is never closed (the text ends inside it)");
  EXPECT_FAILS_AT_LAST(kAB + "a @ b.t(", "(", "'(' is never closed");
  EXPECT_FAILS_AT_LAST("a = torch.randn([4, 4", "[", "'[' is never closed");
  EXPECT_FAILS_AT_LAST(kAB + "a @ b )", ")", "found ')' (unbalanced brackets?)");
  EXPECT_FAILS_AT("a = torch.randn(4, 4)\ncaf\u00e9 = a", "\u00e9",
                  "Loom's names are ASCII letters, digits and _");
}

TEST(TorchCodeErrors, MultiLineProgramsNameTheLine) {
  const std::string text = "import torch\na = torch.randn(4, 4)\ntorch.softmax(a)\n";
  Failure f = fails(text);
  EXPECT_TRUE(has(f.what, "error at line 3, column 7: torch.softmax")) << f.what;
  EXPECT_TRUE(has(f.what, "\n  torch.softmax(a)\n        ^")) << f.what;
}

TEST(TorchCodeErrors, DeepNestingFailsWithAMessage) {
  const std::string deep = std::string(3000, '(') + "1" + std::string(3000, ')');
  Failure f = fails(deep);
  EXPECT_TRUE(has(f.message, "nests more than 256 levels")) << f.message;
  Failure minus = fails("x = " + std::string(3000, '-') + "1");
  EXPECT_TRUE(has(minus.message, "nests more than 256 levels")) << minus.message;
}

}  // namespace
}  // namespace loom
