/* Datatype and operator metadata (dtype.h). */
#include "base/dtype.h"

static const struct {
    const char *name;
    size_t size;
    int is_float;
} dtypes[BRAID_NUM_DTYPES] = {
    [BRAID_INT8] = { "int8", 1, 0 },         [BRAID_UINT8] = { "uint8", 1, 0 },
    [BRAID_INT32] = { "int32", 4, 0 },       [BRAID_UINT32] = { "uint32", 4, 0 },
    [BRAID_INT64] = { "int64", 8, 0 },       [BRAID_UINT64] = { "uint64", 8, 0 },
    [BRAID_FP16] = { "float16", 2, 1 },      [BRAID_FP32] = { "float32", 4, 1 },
    [BRAID_FP64] = { "float64", 8, 1 },      [BRAID_BF16] = { "bfloat16", 2, 1 },
    [BRAID_FP8_E4M3] = { "float8e4m3", 1, 1 }, [BRAID_FP8_E5M2] = { "float8e5m2", 1, 1 },
};

size_t braid_dtype_size(braid_dtype_t dt)
{
    return (unsigned)dt < BRAID_NUM_DTYPES ? dtypes[dt].size : 0;
}

const char *braid_dtype_name(braid_dtype_t dt)
{
    return (unsigned)dt < BRAID_NUM_DTYPES ? dtypes[dt].name : "invalid";
}

int braid_dtype_is_float(braid_dtype_t dt)
{
    return (unsigned)dt < BRAID_NUM_DTYPES ? dtypes[dt].is_float : 0;
}

const char *braid_opkind_name(braid_opkind_t op)
{
    static const char *const names[BRAID_NUM_OPS] = { "sum", "prod", "max", "min" };
    return (unsigned)op < BRAID_NUM_OPS ? names[op] : "invalid";
}
