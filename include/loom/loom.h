// Loom's public C++ API: build (or parse) an expression, compile it to CUDA, and run it
// verified and benchmarked on the GPU. To run Loom's kernels on your own buffers and
// streams, use loom::Plan (loom/plan.h; docs/api.md), which this header includes too.
//
//   #include <loom/loom.h>
//   loom::GraphBuilder b;
//   auto a = b.input("A", {loom::dim(4096), loom::dim(4096)}, loom::DType::F32);
//   auto w = b.input("B", {loom::dim(4096), loom::dim(4096)}, loom::DType::F32);
//   loom::CompiledProgram c = loom::compile_graph(b.build(b.relu(b.matmul(a, w))), {});
//   std::cout << c.cuda;                                   // the generated kernel
//
//   loom::RunOptions opt; opt.bench = true;                // needs a GPU
//   opt.choose_tuned = loom::tune::tuning_db_lookup();     // tuned knobs when recorded (links loom_tune)
//   loom::RunReport r = loom::run_expression("matmul(A[4096,4096]:f32, B[4096,4096]:f32)", opt);
//   std::cout << loom::format_run_report(r);
//
// Every failure is a loom::Error whose message names the problem and the fix.
#pragma once

#include "driver/compile.h"   // compile_graph, compile_expression, CompileOptions
#include "driver/run.h"       // run_expression, RunOptions, RunReport, bind_sizes
#include "frontend/parser.h"  // parse_expression
#include "ir/error.h"         // loom::Error
#include "loom/builder.h"     // GraphBuilder
#include "loom/plan.h"        // Plan: compile once, execute on your pointers and stream
#include "tune/tuned_knobs.h"   // tune::tuning_db_lookup, tune::choose_tuned_knobs (docs/tuning.md)
