/*
 * Datatypes and combining operators as braid sees them, with their sizes and names.
 *
 * Datatypes use NCCL's numbering so that src/api/ can pass them through unchanged; the
 * kernels, the schedules, the message headers and the messages all speak these.
 */
#ifndef BRAID_BASE_DTYPE_H
#define BRAID_BASE_DTYPE_H

#include <stddef.h>

typedef enum {
    BRAID_INT8 = 0,
    BRAID_UINT8 = 1,
    BRAID_INT32 = 2,
    BRAID_UINT32 = 3,
    BRAID_INT64 = 4,
    BRAID_UINT64 = 5,
    BRAID_FP16 = 6,
    BRAID_FP32 = 7,
    BRAID_FP64 = 8,
    BRAID_BF16 = 9,
    BRAID_FP8_E4M3 = 10,
    BRAID_FP8_E5M2 = 11,
    BRAID_NUM_DTYPES = 12
} braid_dtype_t;

/* Combining operators as the kernels see them. ncclAvg and ncclPreMulSum become SUM with a
 * pre-multiplier on the local input (and, for integer avg, a final division). */
typedef enum {
    BRAID_OP_SUM = 0,
    BRAID_OP_PROD = 1,
    BRAID_OP_MAX = 2,
    BRAID_OP_MIN = 3,
    BRAID_NUM_OPS = 4
} braid_opkind_t;

size_t braid_dtype_size(braid_dtype_t dt);           /* 0 for an invalid type */
const char *braid_dtype_name(braid_dtype_t dt);      /* "float32", ...; "invalid" */
const char *braid_opkind_name(braid_opkind_t op);    /* "sum", ... */
int braid_dtype_is_float(braid_dtype_t dt);          /* fp16, bf16, fp8, fp32, fp64 */

#endif
