#!/bin/bash
# test_device.sh through braid's HIP backend, on the emulated HIP runtime (emu/rocm6 and
# emu/rocm5): every device test of the CUDA side, the tests' buffers made with HIP.
exec env BRAID_TEST_RUNTIME=hip "$(dirname "$0")/test_device.sh" "$@"
