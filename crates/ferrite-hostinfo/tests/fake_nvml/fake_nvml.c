/*
 * A stand-in for libnvidia-ml.so used by Ferrite's host-detection tests.
 *
 * It implements only the NVML entry points ferrite-hostinfo calls and describes two
 * different GPUs:
 *   0: "NVIDIA GeForce RTX 3080"   cc 8.6, 10 GiB, 68 SMs (8704 cores), 1710 MHz, bus 0x01
 *   1: "NVIDIA GeForce GTX 1660"   cc 7.5,  6 GiB, 22 SMs (1408 cores), 1785 MHz, bus 0x02
 * Driver "535.54.03", CUDA driver 12020.
 *
 * Built with -DFAKE_INIT_FAILS, nvmlInit_v2 returns NVML_ERROR_DRIVER_NOT_LOADED (9).
 *
 * nvmlDeviceGetTemperature reads the file named by FAKE_NVML_TEMP_FILE (°C, for every GPU)
 * on each call, so a test can heat and cool the GPUs; without it the call is not supported.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

typedef int nvmlReturn_t;
typedef struct fake_device *nvmlDevice_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9

typedef struct {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

struct fake_device {
    const char *name;
    int major, minor;
    unsigned long long total, free;
    unsigned int cores;
    unsigned int max_sm_clock_mhz;
    unsigned int domain, bus, dev, pci_device_id;
    const char *bus_id;
};

static struct fake_device devices[2] = {
    {"NVIDIA GeForce RTX 3080", 8, 6, 10737418240ULL, 10200547328ULL, 8704, 1710,
     0, 1, 0, 0x220610DE, "00000000:01:00.0"},
    {"NVIDIA GeForce GTX 1660", 7, 5, 6442450944ULL, 6228541440ULL, 1408, 1785,
     0, 2, 0, 0x218410DE, "00000000:02:00.0"},
};

static int initialised = 0;

static int copy_str(char *dst, unsigned int len, const char *src) {
    if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(dst, src);
    return NVML_SUCCESS;
}

static struct fake_device *check(nvmlDevice_t d) {
    if (d == &devices[0] || d == &devices[1]) return d;
    return NULL;
}

nvmlReturn_t nvmlInit_v2(void) {
#ifdef FAKE_INIT_FAILS
    return NVML_ERROR_DRIVER_NOT_LOADED;
#else
    initialised = 1;
    return NVML_SUCCESS;
#endif
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown(void) {
    initialised = 0;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r) {
    return r == NVML_SUCCESS ? "Success" : "Fake NVML error";
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    return copy_str(version, length, "535.54.03");
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    *v = 12020;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    *count = 2;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (index >= 2) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    struct fake_device *d = check(device);
    if (!d) return NVML_ERROR_INVALID_ARGUMENT;
    return copy_str(name, length, d->name);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    struct fake_device *d = check(device);
    if (!d) return NVML_ERROR_INVALID_ARGUMENT;
    return copy_str(uuid, length,
        d == &devices[0] ? "GPU-fa4e0000-0000-0000-0000-000000000000"
                         : "GPU-fa4e0001-0000-0000-0000-000000000001");
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *m) {
    struct fake_device *d = check(device);
    if (!d) return NVML_ERROR_INVALID_ARGUMENT;
    /* The caller must announce version 2 of the structure. */
    if ((m->version >> 24) != 2) return NVML_ERROR_INVALID_ARGUMENT;
    m->total = d->total;
    m->free = d->free;
    m->reserved = 0;
    m->used = d->total - d->free;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    struct fake_device *d = check(device);
    if (!d) return NVML_ERROR_INVALID_ARGUMENT;
    *major = d->major;
    *minor = d->minor;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t device, unsigned int *cores) {
    struct fake_device *d = check(device);
    if (!d) return NVML_ERROR_INVALID_ARGUMENT;
    *cores = d->cores;
    return NVML_SUCCESS;
}

/* nvmlClockType_t: 0 graphics, 1 SM, 2 memory, 3 video. */
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int *clock) {
    struct fake_device *d = check(device);
    if (!d) return NVML_ERROR_INVALID_ARGUMENT;
    if (type != 1 && type != 0) return NVML_ERROR_NOT_SUPPORTED;
    *clock = d->max_sm_clock_mhz;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    struct fake_device *d = check(device);
    if (!d) return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof(*pci));
    pci->domain = d->domain;
    pci->bus = d->bus;
    pci->device = d->dev;
    pci->pciDeviceId = d->pci_device_id;
    pci->pciSubSystemId = 0;
    strncpy(pci->busId, d->bus_id, sizeof(pci->busId) - 1);
    strncpy(pci->busIdLegacy, d->bus_id + 4, sizeof(pci->busIdLegacy) - 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temp) {
    (void)sensor;
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!check(device) || !temp) return NVML_ERROR_INVALID_ARGUMENT;
    const char *path = getenv("FAKE_NVML_TEMP_FILE");
    if (!path) return NVML_ERROR_NOT_SUPPORTED;
    FILE *f = fopen(path, "r");
    if (!f) return NVML_ERROR_NOT_SUPPORTED;
    unsigned int t = 0;
    int ok = fscanf(f, "%u", &t) == 1;
    fclose(f);
    if (!ok) return NVML_ERROR_NOT_SUPPORTED;
    *temp = t;
    return NVML_SUCCESS;
}
