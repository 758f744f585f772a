#pragma once
// XSTAGE_HD marks pure index math shared by host tests and device kernels (schedulers, closed forms).
// Under nvcc it is `__host__ __device__`; in host-only builds it is empty. The token sequence is kept
// identical to any other definition in the tree so a repeated definition is a legal redefinition.
#ifndef XSTAGE_HD
#if defined(__CUDACC__)
#define XSTAGE_HD __host__ __device__
#else
#define XSTAGE_HD
#endif
#endif
