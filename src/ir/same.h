// Structural equality of programs: every field of every statement, tensor and kernel,
// expressions compared by Expr::same_as. Two programs that are the same here run the
// same way on the interpreter, so a pass test need not run a program a pass left
// unchanged again (tests/cpu/passes/pass_check.h).
//
// The comparisons destructure each struct into all of its members, so a member added
// to Stmt, Operand, StageCopy, TensorDecl, LoopOp, TileOp, TmaDescriptor, WarpAtom,
// WarpCopy, KernelOp or ProgramBase fails to compile in same.cpp until it is compared.
#pragma once
#include "ir/program.h"

namespace loom {

bool same_block(const Block& a, const Block& b);
bool same_program(const LoopProgram& a, const LoopProgram& b);
bool same_program(const TileProgram& a, const TileProgram& b);
bool same_program(const KernelProgram& a, const KernelProgram& b);

}  // namespace loom
