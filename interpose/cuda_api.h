// cuda_api.h: the one way the library includes cuda.h.
//
// cuda.h renames cuGetProcAddress to cuGetProcAddress_v2 with a macro; libgswap must define both
// ABI symbols under their own names, so the macro is removed here, once, for every file.
#pragma once

#include <cuda.h>

#undef cuGetProcAddress
