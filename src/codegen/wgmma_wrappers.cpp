#include "codegen/wgmma_wrappers.h"

#include <cctype>
#include <sstream>

#include "ir/error.h"

namespace loom {
namespace {

// "%first, %first+1, ..." for `count` operands, 8 per line of the asm string.
std::string operand_list(int first, int count, const std::string& indent) {
  std::ostringstream s;
  for (int i = 0; i < count; ++i) {
    if (i % 8 == 0 && i > 0) s << "\"\n" << indent << "\"";
    s << "%" << first + i << (i + 1 < count ? ", " : "");
  }
  return s.str();
}

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string wgmma_wrapper_source(const AtomDef& a, bool rs) {
  if (a.kind != AtomKind::Compute || a.threads != 128 || a.ptx.rfind("wgmma.", 0) != 0)
    throw Error("wgmma_wrapper_source: atom '" + a.id + "' is not a wgmma entry of the atom "
                "table (src/atoms/atoms.cpp)");
  const std::string name = wgmma_variant_id(a, rs);
  const bool tf32 = a.a_type == DType::TF32;
  const int nd = a.n / 2;  // f32 accumulator registers per thread
  const int na = rs ? 4 : 0;  // A fragment registers (4 x f16x2/bf16x2, or 4 tf32)
  // Operand numbering: d, then A (registers) or desc_a, desc_b, scale_d, immediates.
  const int first_a = nd, desc_b = nd + (rs ? na : 1), scale_d = desc_b + 1;
  const std::string in = "      ";

  std::ostringstream s;
  s << "#ifndef LOOM_" << upper(name) << "\n#define LOOM_" << upper(name) << "\n";
  s << "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\nnamespace loom {\n";
  s << "// PTX ISA 9.7.15.5.2 wgmma.mma_async: " << a.ptx << "\n"
    << "// D = A*B (+ D when scale_d), asynchronous: issue after wgmma_fence(), retire with\n"
    << "// wgmma_commit_group() and wgmma_wait_group<N>(). B from shared memory, A from "
    << (rs ? std::string("registers") : std::string("shared memory")) << ";\n";
  if (rs)
    s << "// a: the \"A\" layout of atom " << a.id
      << (tf32 ? ", one tf32 per register (rounded: cvt_rna_tf32)"
               : ", two values per register (even ones low)")
      << ";\n";
  s << "// d: its \"C\" layout, " << nd << " f32 per thread.\n";
  if (!tf32) s << (rs ? "template <int TransB>\n" : "template <int TransA, int TransB>\n");
  s << "__device__ __forceinline__ void " << name << "(float (&d)[" << nd << "], "
    << (rs ? "const unsigned (&a)[4]" : "unsigned long long desc_a")
    << ", unsigned long long desc_b, int scale_d) {\n";
  s << "  asm volatile(\n"
    << in << "\"{\\n\"\n"
    << in << "\".reg .pred p;\\n\"\n"
    << in << "\"setp.ne.b32 p, %" << scale_d << ", 0;\\n\"\n"
    << in << "\"" << a.ptx << " \"\n"
    << in << "\"{" << operand_list(0, nd, in) << "}, \"\n"
    << in << "\"" << (rs ? "{" + operand_list(first_a, na, in) + "}" : "%" + std::to_string(first_a))
    << ", %" << desc_b << ", p, 1, 1";
  if (!tf32) {
    if (rs)
      s << ", %" << scale_d + 1;
    else
      s << ", %" << scale_d + 1 << ", %" << scale_d + 2;
  }
  s << ";\\n\"\n" << in << "\"}\\n\"\n";
  s << in << ": ";
  for (int i = 0; i < nd; ++i)
    s << (i && i % 8 == 0 ? "\n" + in + "  " : "") << "\"+f\"(d[" << i << "])"
      << (i + 1 < nd ? ", " : "\n");
  s << in << ": ";
  if (rs)
    s << "\"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3])";
  else
    s << "\"l\"(desc_a)";
  s << ", \"l\"(desc_b), \"r\"(scale_d)";
  if (!tf32) s << (rs ? ", \"n\"(TransB)" : ", \"n\"(TransA), \"n\"(TransB)");
  s << ");\n}\n}  // namespace loom\n#endif\n#endif\n";
  return s.str();
}

}  // namespace loom
