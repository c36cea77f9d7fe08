/*
 * A fake OpenCL vendor driver (an ICD, loaded by the ICD loader libOpenCL.so through an
 * .icd file) used by Ferrite's tests. It answers only the calls GPU detection makes.
 *
 * Built with -DFAKE_AMD: one platform "Advanced Micro Devices, Inc." with two GPUs that
 * support cl_amd_device_attribute_query (board names, SIMD figures):
 *   0: "AMD Radeon RX 6800"     60 CUs, 2105 MHz, 16 GiB
 *   1: "AMD Radeon RX 6800 XT"  72 CUs, 2250 MHz, 16 GiB
 * Built with -DFAKE_INTEL: one platform "Intel(R) Corporation" with one GPU:
 *   0: "Intel(R) UHD Graphics 630"  24 CUs, 1150 MHz, 6 GiB
 *
 * Broken drivers, for the tests of GPU detection in a child process (with either vendor):
 *   -DFAKE_CRASH  dies of SIGSEGV when asked for its platforms;
 *   -DFAKE_HANG   never answers that call;
 *   -DFAKE_LEAK   allocates and touches 512 MiB there, never freed, then answers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;

#define CL_SUCCESS 0
#define CL_DEVICE_NOT_FOUND (-1)
#define CL_INVALID_VALUE (-30)
#define CL_INVALID_PLATFORM (-32)
#define CL_INVALID_DEVICE (-33)

#define CL_DEVICE_TYPE_GPU (1 << 2)
#define CL_DEVICE_TYPE_ACCELERATOR (1 << 3)

/* The loader calls through the dispatch table every object starts with. */
struct object {
    void **dispatch;
    int index;
};

struct gpu {
    const char *name;      /* CL_DEVICE_NAME */
    const char *board;     /* CL_DEVICE_BOARD_NAME_AMD, when the extension is there */
    cl_uint compute_units;
    cl_uint clock_mhz;
    cl_ulong memory;
};

#if defined(FAKE_AMD)
#define PLATFORM_VENDOR "Advanced Micro Devices, Inc."
#define PLATFORM_VERSION "OpenCL 2.1 AMD-APP (3444.0)"
#define DEVICE_VENDOR "Advanced Micro Devices, Inc."
#define VENDOR_ID 0x1002u
#define DEVICE_VERSION "OpenCL 2.0 AMD-APP (3444.0)"
#define DRIVER_VERSION "3444.0 (PAL,LC)"
#define EXTENSIONS "cl_khr_fp64 cl_khr_global_int32_base_atomics cl_amd_device_attribute_query"
#define SUFFIX "AMD"
static const struct gpu GPUS[] = {
    {"gfx1030", "AMD Radeon RX 6800", 60, 2105, 17163091968ull},
    {"gfx1030", "AMD Radeon RX 6800 XT", 72, 2250, 17163091968ull},
};
#elif defined(FAKE_INTEL)
#define PLATFORM_VENDOR "Intel(R) Corporation"
#define PLATFORM_VERSION "OpenCL 3.0 "
#define DEVICE_VENDOR "Intel(R) Corporation"
#define VENDOR_ID 0x8086u
#define DEVICE_VERSION "OpenCL 3.0 NEO "
#define DRIVER_VERSION "22.43.24595"
#define EXTENSIONS "cl_khr_fp16 cl_khr_global_int32_base_atomics cl_intel_subgroups"
#define SUFFIX "INTEL"
static const struct gpu GPUS[] = {
    {"Intel(R) UHD Graphics 630", "", 24, 1150, 6871947264ull},
};
#else
#error "build with -DFAKE_AMD or -DFAKE_INTEL"
#endif

#define NGPUS ((int)(sizeof(GPUS) / sizeof(GPUS[0])))

static void *dispatch[256];
static struct object platform = {dispatch, 0};
static struct object devices[NGPUS];

static cl_int put(const void *v, size_t n, size_t size, void *out, size_t *size_ret) {
    if (size_ret) *size_ret = n;
    if (out) {
        if (size < n) return CL_INVALID_VALUE;
        memcpy(out, v, n);
    }
    return CL_SUCCESS;
}

static cl_int put_str(const char *s, size_t size, void *out, size_t *size_ret) {
    return put(s, strlen(s) + 1, size, out, size_ret);
}

static cl_int put_uint(cl_uint v, size_t size, void *out, size_t *size_ret) {
    return put(&v, sizeof v, size, out, size_ret);
}

static cl_int put_ulong(cl_ulong v, size_t size, void *out, size_t *size_ret) {
    return put(&v, sizeof v, size, out, size_ret);
}

static cl_int get_platform_info(void *p, cl_uint param, size_t size, void *out, size_t *ret) {
    if (p != &platform) return CL_INVALID_PLATFORM;
    switch (param) {
    case 0x0900: return put_str("FULL_PROFILE", size, out, ret);
    case 0x0901: return put_str(PLATFORM_VERSION, size, out, ret);
    case 0x0902: return put_str("Fake " SUFFIX " platform", size, out, ret);
    case 0x0903: return put_str(PLATFORM_VENDOR, size, out, ret);
    case 0x0904: return put_str("cl_khr_icd", size, out, ret);
    case 0x0920: return put_str(SUFFIX, size, out, ret); /* CL_PLATFORM_ICD_SUFFIX_KHR */
    default: return CL_INVALID_VALUE;
    }
}

static cl_int get_device_ids(void *p, cl_ulong type, cl_uint n, void **out, cl_uint *count) {
    if (p != &platform) return CL_INVALID_PLATFORM;
    if (!(type & (CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR))) {
        if (count) *count = 0;
        return CL_DEVICE_NOT_FOUND;
    }
    if (count) *count = NGPUS;
    for (int i = 0; out && i < NGPUS && (cl_uint)i < n; i++) {
        devices[i].dispatch = dispatch;
        devices[i].index = i;
        out[i] = &devices[i];
    }
    return CL_SUCCESS;
}

static cl_int get_device_info(void *d, cl_uint param, size_t size, void *out, size_t *ret) {
    struct object *o = d;
    if (o < devices || o >= devices + NGPUS) return CL_INVALID_DEVICE;
    const struct gpu *g = &GPUS[o->index];
    switch (param) {
    case 0x1000: return put_ulong(CL_DEVICE_TYPE_GPU, size, out, ret);
    case 0x1001: return put_uint(VENDOR_ID, size, out, ret);
    case 0x1002: return put_uint(g->compute_units, size, out, ret);
    case 0x100C: return put_uint(g->clock_mhz, size, out, ret);
    case 0x101B: return put_ulong(0x3e, size, out, ret);             /* single fp */
    case 0x101F: return put_ulong(g->memory, size, out, ret);
    case 0x1023: return put_ulong(65536, size, out, ret);
    case 0x1026: return put_uint(1, size, out, ret);                 /* little endian */
    case 0x1027: return put_uint(1, size, out, ret);                 /* available */
    case 0x1029: return put_ulong(1, size, out, ret);                /* kernels */
    case 0x102B: return put_str(g->name, size, out, ret);
    case 0x102C: return put_str(DEVICE_VENDOR, size, out, ret);
    case 0x102D: return put_str(DRIVER_VERSION, size, out, ret);
    case 0x102F: return put_str(DEVICE_VERSION, size, out, ret);
    case 0x1030: return put_str(EXTENSIONS, size, out, ret);
    case 0x1032: return put_ulong(0x3f, size, out, ret);             /* double fp */
    case 0x1033: return CL_INVALID_VALUE;                            /* no half fp */
#if defined(FAKE_AMD)
    case 0x4038: return put_str(g->board, size, out, ret);
    case 0x4040: return put_uint(2, size, out, ret);                 /* SIMDs per CU */
    case 0x4041: return put_uint(32, size, out, ret);                /* SIMD width */
    case 0x4042: return put_uint(1, size, out, ret);                 /* instruction width */
#endif
    default: return CL_INVALID_VALUE;
    }
}

/* The ICD entry point: the loader asks the driver for its platforms. */
cl_int clIcdGetPlatformIDsKHR(cl_uint n, void **out, cl_uint *count) {
#if defined(FAKE_CRASH)
    *(volatile int *)(uintptr_t)8 = 1;
#elif defined(FAKE_HANG)
    for (;;) pause();
#elif defined(FAKE_LEAK)
    static char *leak;
    if (!leak) {
        size_t size = (size_t)512 << 20;
        leak = malloc(size);
        for (size_t i = 0; leak && i < size; i += 4096) ((volatile char *)leak)[i] = 1;
    }
#endif
    dispatch[1] = (void *)get_platform_info;
    dispatch[2] = (void *)get_device_ids;
    dispatch[3] = (void *)get_device_info;
    if (count) *count = 1;
    if (out && n > 0) out[0] = &platform;
    return CL_SUCCESS;
}

/* Some loaders find the entry point through this function instead. */
void *clGetExtensionFunctionAddress(const char *name) {
    if (strcmp(name, "clIcdGetPlatformIDsKHR") == 0) return (void *)clIcdGetPlatformIDsKHR;
    return 0;
}

/* The ocl-icd loader looks this one up by name in the driver before using the platform. */
cl_int clGetPlatformInfo(void *p, cl_uint param, size_t size, void *out, size_t *ret) {
    return get_platform_info(p, param, size, out, ret);
}
