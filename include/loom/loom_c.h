/* Loom's C ABI: loom::Plan (loom/plan.h) behind opaque handles, for C and for other
 * languages' foreign-function interfaces. docs/api.md describes it.
 *
 *   loom_plan_t plan;
 *   if (loom_plan_create("matmul(A[256,128]:f32, B[128,64]:f32)", NULL, &plan) != LOOM_SUCCESS)
 *     fprintf(stderr, "%s\n", loom_last_error());
 *   void* ptrs[3] = {a, b, c};                        (the order of loom_plan_tensor)
 *   loom_plan_execute_positional(plan, ptrs, 3, stream);
 *   loom_plan_destroy(plan);
 *
 * Rules: every function returns a loom_status (or a value that cannot fail); no C++
 * exception crosses this boundary. On failure, loom_last_error() is the message (naming
 * the problem and the fix) of the last failed call of the calling thread: it is
 * thread-local and stays valid until that thread's next failing call. Strings a plan
 * returns live until the plan is destroyed. A handle is usable from several threads at
 * once (execute is thread-safe, as loom::Plan::execute); each call holds the plan while
 * it runs, so a loom_plan_destroy on another thread frees it when that call ends.
 * Handles are checked against the set of live plans, so a NULL, destroyed (double
 * destroy) or made-up handle gives LOOM_ERROR_INVALID_HANDLE instead of a crash (unless
 * the address was reused by a newer plan).
 */
#ifndef LOOM_LOOM_C_H
#define LOOM_LOOM_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header and of the library (loom_version()); CMake's package
 * version (LoomConfigVersion.cmake) is read from these lines. */
#define LOOM_VERSION_MAJOR 0
#define LOOM_VERSION_MINOR 1
#define LOOM_VERSION_PATCH 0

struct CUstream_st; /* cudaStream_t is struct CUstream_st*; NULL is the default stream */

typedef struct loom_plan_s* loom_plan_t;

typedef enum loom_status {
  LOOM_SUCCESS = 0,
  LOOM_ERROR_INVALID_ARGUMENT = 1, /* a NULL argument, bad pointer, unknown tensor name */
  LOOM_ERROR_INVALID_HANDLE = 2,   /* NULL, destroyed or unknown loom_plan_t */
  LOOM_ERROR_COMPILE = 3,          /* bad expression, unbound size, refused knob */
  LOOM_ERROR_NO_GPU = 4,           /* no driver or no such GPU; a compile-only plan */
  LOOM_ERROR_CUDA = 5,             /* a CUDA call failed (launch, allocation) */
  LOOM_ERROR_OUT_OF_RANGE = 6,     /* a tensor index past loom_plan_num_tensors */
  LOOM_ERROR_INTERNAL = 7          /* a bug in Loom: please report the message */
} loom_status;

/* Options of loom_plan_create; loom_plan_options_init fills the defaults (GPU 0, the
 * tuning database on, the GPU's arch) and struct_size, which lets a later library
 * version add fields and still read this one: always start from init. Strings may be
 * NULL (= empty). */
typedef struct loom_plan_options {
  size_t struct_size; /* sizeof(loom_plan_options) of the header the caller built with */
  const char* knobs;  /* "BM=128,BN=128" (docs/knobs.md) */
  const char* sizes;  /* size symbols bound now, "M=4096,N=1024" */
  const char* runtime_sizes; /* size symbols given at each execute, "B,S" (docs/api.md) */
  const char* target; /* "sm_90a": compile without a GPU (describe only) */
  int device;         /* CUDA ordinal */
  int use_tuning_db;  /* nonzero: look the problem up in the tuning database */
} loom_plan_options;

/* One tensor of a plan: contiguous row-major storage of `shape` (rank <= 8). A dim that
 * is a run-time size reads -1, and so does `bytes` then. The library fills it; fields
 * are only ever added with a new major version. */
#define LOOM_MAX_RANK 8
typedef struct loom_tensor_info {
  const char* name;  /* owned by the plan */
  const char* role;  /* "input" or "output" */
  const char* dtype; /* "f32", "f16", "bf16", ... */
  int rank;
  int64_t shape[LOOM_MAX_RANK];
  int64_t bytes;
} loom_tensor_info;

const char* loom_version(void);  /* "0.1.0" */
const char* loom_status_string(loom_status status);
const char* loom_last_error(void); /* "" when this thread has had no failure */
/* Why GPU `device` cannot run plans, or "" when it can (thread-local string). */
const char* loom_no_gpu_reason(int device);

void loom_plan_options_init(loom_plan_options* options);
/* options may be NULL (the defaults). On failure *plan is set to NULL. */
loom_status loom_plan_create(const char* expression, const loom_plan_options* options,
                             loom_plan_t* plan);
/* NULL is a no-op returning LOOM_SUCCESS, as free(NULL). */
loom_status loom_plan_destroy(loom_plan_t plan);

/* Enqueue on `stream` with one pointer per tensor: by name (names[i] -> ptrs[i]) or in
 * the order of loom_plan_tensor. No host synchronization. */
loom_status loom_plan_execute(loom_plan_t plan, const char* const* names, void* const* ptrs,
                              size_t count, struct CUstream_st* stream);
loom_status loom_plan_execute_positional(loom_plan_t plan, void* const* ptrs, size_t count,
                                         struct CUstream_st* stream);
/* The same with the values of the plan's run-time sizes (size_names[i] = size_values[i]);
 * names NULL: ptrs are positional. */
loom_status loom_plan_execute_sized(loom_plan_t plan, const char* const* names, void* const* ptrs,
                                    size_t count, const char* const* size_names,
                                    const int64_t* size_values, size_t size_count,
                                    struct CUstream_st* stream);

loom_status loom_plan_num_tensors(loom_plan_t plan, size_t* count);
loom_status loom_plan_tensor(loom_plan_t plan, size_t index, loom_tensor_info* info);
/* Strings owned by the plan: the generated CUDA source, "K=V,..." knobs, a description. */
loom_status loom_plan_cuda_source(loom_plan_t plan, const char** source);
loom_status loom_plan_knobs(loom_plan_t plan, const char** knobs);
loom_status loom_plan_describe(loom_plan_t plan, const char** text);
/* The run-time sizes, "B,S" ("" when every size was bound at creation). */
loom_status loom_plan_runtime_sizes(loom_plan_t plan, const char** names);
/* *executable = 1 when execute can run (0 for a compile-only plan). */
loom_status loom_plan_executable(loom_plan_t plan, int* executable);

#ifdef __cplusplus
}
#endif
#endif /* LOOM_LOOM_C_H */
