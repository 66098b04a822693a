// device_cuda.h: the device contract over the real driver, and the one check every driver call
// gswap makes on its own behalf goes through.
#pragma once

#include "interpose/device.h"

namespace gswap::interpose {

// The process's device over the real driver table (device.h).
Device& cuda_device();

// Logs a failed driver call as "call -> code (NAME) at file:line" and returns the code.
CUresult driver_checked(CUresult e, const char* call, const char* file, int line);
const char* driver_error_name(CUresult e);

}  // namespace gswap::interpose

// Checks a driver call made through real(): logs a failure with its code, returns the CUresult.
#define GSWAP_DRIVER(call) ::gswap::interpose::driver_checked((call), #call, __FILE__, __LINE__)
