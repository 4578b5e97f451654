// codec/common/hd.h — WC_HD marks functions compiled for host and CUDA device.
#pragma once
#ifndef WC_HD
#ifdef __CUDACC__
#define WC_HD __host__ __device__
#else
#define WC_HD
#endif
#endif
