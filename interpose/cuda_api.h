// cuda_api.h: the one way the library includes cuda.h.
//
// cuda.h renames cuGetProcAddress to cuGetProcAddress_v2, cuStreamBeginCapture to
// cuStreamBeginCapture_v2, cuGraphInstantiate to cuGraphInstantiateWithFlags, and
// cuMemGetInfo, cuDeviceTotalMem and cuStreamDestroy to their _v2 forms with macros; libgswap
// must define the older ABI symbols under their own names too (a program may ask
// cuGetProcAddress or dlsym for them), so the macros are removed here, once, for every file.
#pragma once

#include <cuda.h>

#undef cuGetProcAddress
#undef cuStreamBeginCapture
#undef cuGraphInstantiate
#undef cuMemGetInfo
#undef cuDeviceTotalMem
#undef cuStreamDestroy
