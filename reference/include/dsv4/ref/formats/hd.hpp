// DSV4_HD: marks the number-format functions callable from host and device code alike.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define DSV4_HD __host__ __device__ inline
#else
#define DSV4_HD inline
#endif
