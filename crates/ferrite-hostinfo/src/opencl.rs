//! OpenCL detection: every platform and device, read through the OpenCL ICD loader
//! (`libOpenCL.so`) opened at run time with `libloading`, and described as the official
//! client does (`client/gpu_opencl.cpp`): GPUs and accelerators by vendor (NVIDIA, AMD,
//! Intel), and each platform's CPU device as an `<opencl_cpu_prop>`.
//!
//! No library, or a library with no platform, means no OpenCL: a log line, never an error.
//! [`scan`] does the FFI; everything after it ([`classify`], [`merge_into`]) is pure.

use std::ffi::c_void;
use std::path::{Path, PathBuf};

use ferrite_proto::host::{
    Coprocs, NvidiaCoproc, OpenclCpuProp, OpenclDeviceProp, OpenclGpu, OpenclGpuKind, PciInfo,
};

use crate::gpu::{cores_and_flops_per_clock, GpuUse, NvidiaDevice};

/// Environment variable naming the OpenCL library to load instead of the system's.
pub const OPENCL_LIBRARY_ENV: &str = "FERRITE_OPENCL_LIBRARY";

/// Library names tried, in the official client's order.
const DEFAULT_OPENCL_NAMES: &[&str] = &["libOpenCL.so", "libOpenCL.so.1"];

/// At most this many platforms and devices per platform are asked for (the official
/// client's `MAX_OPENCL_PLATFORMS` and `MAX_COPROC_INSTANCES`).
const MAX_PLATFORMS: u32 = 16;
const MAX_DEVICES: u32 = 64;

/// Peak FLOPS outside (0, 1e15] are replaced by 100 GFLOPS, as the official client does.
const GPU_MAX_PEAK_FLOPS: f64 = 1e15;
const GPU_DEFAULT_PEAK_FLOPS: f64 = 100e9;

/// The official client's buffer sizes: longer strings are cut to one byte less.
const NAME_LEN: usize = 256;
const EXTENSIONS_LEN: usize = 2048;
const PLATFORM_VERSION_LEN: usize = 64;
const DEVICE_VERSION_LEN: usize = 128;
const DRIVER_VERSION_LEN: usize = 512;

// OpenCL 1.0 ABI (Khronos `cl.h`, `cl_ext.h`).
const CL_SUCCESS: i32 = 0;
const CL_DEVICE_NOT_FOUND: i32 = -1;
const CL_INVALID_VALUE: i32 = -30;
const CL_INVALID_OPERATION: i32 = -59;
const CL_PLATFORM_VERSION: u32 = 0x0901;
const CL_PLATFORM_VENDOR: u32 = 0x0903;
const CL_DEVICE_TYPE_CPU: u64 = 1 << 1;
const CL_DEVICE_TYPE_GPU: u64 = 1 << 2;
const CL_DEVICE_TYPE_ACCELERATOR: u64 = 1 << 3;
const CL_DEVICE_VENDOR_ID: u32 = 0x1001;
const CL_DEVICE_MAX_COMPUTE_UNITS: u32 = 0x1002;
const CL_DEVICE_MAX_CLOCK_FREQUENCY: u32 = 0x100C;
const CL_DEVICE_SINGLE_FP_CONFIG: u32 = 0x101B;
const CL_DEVICE_GLOBAL_MEM_SIZE: u32 = 0x101F;
const CL_DEVICE_LOCAL_MEM_SIZE: u32 = 0x1023;
const CL_DEVICE_ENDIAN_LITTLE: u32 = 0x1026;
const CL_DEVICE_AVAILABLE: u32 = 0x1027;
const CL_DEVICE_EXECUTION_CAPABILITIES: u32 = 0x1029;
const CL_DEVICE_NAME: u32 = 0x102B;
const CL_DEVICE_VENDOR: u32 = 0x102C;
const CL_DRIVER_VERSION: u32 = 0x102D;
const CL_DEVICE_VERSION: u32 = 0x102F;
const CL_DEVICE_EXTENSIONS: u32 = 0x1030;
const CL_DEVICE_DOUBLE_FP_CONFIG: u32 = 0x1032;
const CL_DEVICE_HALF_FP_CONFIG: u32 = 0x1033;
const CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV: u32 = 0x4000;
const CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV: u32 = 0x4001;
const CL_DEVICE_BOARD_NAME_AMD: u32 = 0x4038;
const CL_DEVICE_SIMD_PER_COMPUTE_UNIT_AMD: u32 = 0x4040;
const CL_DEVICE_SIMD_WIDTH_AMD: u32 = 0x4041;
const CL_DEVICE_SIMD_INSTRUCTION_WIDTH_AMD: u32 = 0x4042;

type Handle = *mut c_void;
type GetPlatformIds = unsafe extern "C" fn(u32, *mut Handle, *mut u32) -> i32;
type GetInfo = unsafe extern "C" fn(Handle, u32, usize, *mut c_void, *mut usize) -> i32;
type GetDeviceIds = unsafe extern "C" fn(Handle, u64, u32, *mut Handle, *mut u32) -> i32;

/// How the OpenCL library answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenclStatus {
    /// The library answered with at least one platform.
    Ready,
    /// `no_gpus` or `no_opencl` is set: nothing was probed.
    Disabled,
    /// No OpenCL library could be loaded (or it lacks the entry points).
    LibraryMissing(String),
    /// The library loaded but reports no platform.
    NoPlatforms,
}

/// The vendor a GPU or accelerator belongs to, from its `CL_DEVICE_VENDOR`, tested in the
/// official client's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenclVendor {
    /// Contains `NVIDIA`.
    Nvidia,
    /// Contains `ATI`, `AMD` or `Advanced Micro Devices, Inc.`.
    Amd,
    /// Contains `intel`, any case.
    Intel,
    /// Anything else (not reported to projects).
    Other,
}

impl OpenclVendor {
    /// Classifies a device vendor string.
    pub fn of(vendor: &str) -> OpenclVendor {
        if vendor.contains("NVIDIA") {
            OpenclVendor::Nvidia
        } else if vendor.contains("ATI")
            || vendor.contains("AMD")
            || vendor.contains("Advanced Micro Devices, Inc.")
        {
            OpenclVendor::Amd
        } else if vendor.to_ascii_lowercase().contains("intel") {
            OpenclVendor::Intel
        } else {
            OpenclVendor::Other
        }
    }
}

/// A GPU or accelerator as its platform lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScannedDevice {
    /// Index of the platform in `clGetPlatformIDs`' list.
    pub platform_index: u32,
    /// Zero-based index among the platform's GPUs and accelerators (what apps are given as
    /// `gpu_opencl_dev_index`).
    pub opencl_device_index: u32,
    /// Its properties.
    pub prop: OpenclDeviceProp,
}

/// What the OpenCL library reported, before any matching or choosing.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenclScan {
    /// How the library answered.
    pub status: OpenclStatus,
    /// One entry per (platform, CPU device).
    pub cpus: Vec<OpenclCpuProp>,
    /// GPUs and accelerators of every platform, in platform then device order.
    pub gpus: Vec<ScannedDevice>,
    /// Problems, one log line each.
    pub warnings: Vec<String>,
}

impl OpenclScan {
    fn empty(status: OpenclStatus) -> Self {
        OpenclScan {
            status,
            cpus: Vec::new(),
            gpus: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// One GPU found through OpenCL, with the number BOINC gives it and whether it is used.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenclDevice {
    /// Vendor (never [`OpenclVendor::Other`]).
    pub vendor: OpenclVendor,
    /// The device number apps receive: the NVML index for an NVIDIA GPU NVML also sees,
    /// else the position among this vendor's OpenCL GPUs.
    pub device_num: u32,
    /// Index within its platform's GPU list.
    pub opencl_device_index: u32,
    /// Peak FLOPS as the official client computes it.
    pub peak_flops: f64,
    /// Memory available to apps, bytes.
    pub available_ram: f64,
    /// Whether apps get it.
    pub usage: GpuUse,
    /// Its properties.
    pub prop: OpenclDeviceProp,
}

/// Opens the OpenCL library: `explicit`, else `$FERRITE_OPENCL_LIBRARY`, else the system's.
fn open_library(explicit: Option<&Path>) -> Result<libloading::Library, String> {
    let env_path = std::env::var_os(OPENCL_LIBRARY_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let candidates: Vec<PathBuf> = match explicit.map(Path::to_path_buf).or(env_path) {
        Some(p) => vec![p],
        None => DEFAULT_OPENCL_NAMES.iter().map(PathBuf::from).collect(),
    };
    let mut last = String::from("no library name");
    for c in candidates {
        // SAFETY: loading the OpenCL ICD loader runs its initialisers, which only register
        // vendor libraries; no Rust invariant depends on them.
        match unsafe { libloading::Library::new(&c) } {
            Ok(l) => return Ok(l),
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

struct Api {
    get_platform_ids: GetPlatformIds,
    get_platform_info: GetInfo,
    get_device_ids: GetDeviceIds,
    get_device_info: GetInfo,
}

impl Api {
    fn load(lib: &libloading::Library) -> Result<Api, String> {
        // SAFETY: the symbols are the OpenCL 1.0 entry points with exactly these C
        // signatures; the function pointers are used only while `lib` is loaded.
        unsafe {
            let f = |name: &[u8]| -> Result<*const c_void, String> {
                lib.get::<*const c_void>(name).map(|s| *s).map_err(|_| {
                    format!(
                        "{}() missing from OpenCL library",
                        String::from_utf8_lossy(&name[..name.len() - 1])
                    )
                })
            };
            Ok(Api {
                get_platform_ids: std::mem::transmute::<*const c_void, GetPlatformIds>(f(
                    b"clGetPlatformIDs\0",
                )?),
                get_platform_info: std::mem::transmute::<*const c_void, GetInfo>(f(
                    b"clGetPlatformInfo\0",
                )?),
                get_device_ids: std::mem::transmute::<*const c_void, GetDeviceIds>(f(
                    b"clGetDeviceIDs\0",
                )?),
                get_device_info: std::mem::transmute::<*const c_void, GetInfo>(f(
                    b"clGetDeviceInfo\0",
                )?),
            })
        }
    }

    /// A string property, cut to `cap - 1` bytes (on a character boundary).
    fn string(&self, f: GetInfo, obj: Handle, param: u32, cap: usize) -> Result<String, i32> {
        let mut size = 0usize;
        // SAFETY: a size query writes only `size`.
        let rc = unsafe { f(obj, param, 0, std::ptr::null_mut(), &mut size) };
        if rc != CL_SUCCESS {
            return Err(rc);
        }
        let mut buf = vec![0u8; size.max(1)];
        // SAFETY: `buf` has room for the `buf.len()` bytes the call may write.
        let rc = unsafe {
            f(
                obj,
                param,
                buf.len(),
                buf.as_mut_ptr().cast(),
                std::ptr::null_mut(),
            )
        };
        if rc != CL_SUCCESS {
            return Err(rc);
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        let mut s = String::from_utf8_lossy(&buf[..end]).into_owned();
        if s.len() >= cap {
            let mut cut = cap - 1;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            s.truncate(cut);
        }
        Ok(s)
    }

    fn u32(&self, dev: Handle, param: u32) -> Result<u32, i32> {
        let mut v = 0u32;
        // SAFETY: the parameter is a `cl_uint` (or `cl_bool`), 4 bytes, written into `v`.
        let rc = unsafe {
            (self.get_device_info)(
                dev,
                param,
                4,
                (&mut v as *mut u32).cast(),
                std::ptr::null_mut(),
            )
        };
        if rc == CL_SUCCESS {
            Ok(v)
        } else {
            Err(rc)
        }
    }

    fn u64(&self, dev: Handle, param: u32) -> Result<u64, i32> {
        let mut v = 0u64;
        // SAFETY: the parameter is a `cl_ulong` or `cl_bitfield`, 8 bytes, written into `v`.
        let rc = unsafe {
            (self.get_device_info)(
                dev,
                param,
                8,
                (&mut v as *mut u64).cast(),
                std::ptr::null_mut(),
            )
        };
        if rc == CL_SUCCESS {
            Ok(v)
        } else {
            Err(rc)
        }
    }

    fn device_ids(&self, platform: Handle, types: u64) -> Result<Vec<Handle>, i32> {
        let mut ids = vec![std::ptr::null_mut(); MAX_DEVICES as usize];
        let mut n = 0u32;
        // SAFETY: `ids` has room for MAX_DEVICES handles.
        let rc = unsafe {
            (self.get_device_ids)(platform, types, MAX_DEVICES, ids.as_mut_ptr(), &mut n)
        };
        if rc != CL_SUCCESS {
            return Err(rc);
        }
        ids.truncate(n.min(MAX_DEVICES) as usize);
        Ok(ids)
    }

    /// Reads a device's properties as the official client does; `Err` is the warning
    /// that makes it skip the device.
    fn device(
        &self,
        dev: Handle,
        index: u32,
        platform_version: &str,
    ) -> Result<OpenclDeviceProp, String> {
        let di = self.get_device_info;
        let fail = |what: &str, rc: i32| {
            format!("clGetDeviceInfo failed to get {what} for device {index} (error {rc})")
        };
        let mut p = OpenclDeviceProp {
            opencl_platform_version: platform_version.to_owned(),
            ..OpenclDeviceProp::default()
        };
        p.name = self
            .string(di, dev, CL_DEVICE_NAME, NAME_LEN)
            .map_err(|e| fail("name", e))?;
        if p.name.is_empty() {
            return Err(fail("name", CL_SUCCESS));
        }
        p.vendor = self
            .string(di, dev, CL_DEVICE_VENDOR, NAME_LEN)
            .map_err(|e| fail("vendor", e))?;
        if p.vendor.is_empty() {
            return Err(fail("vendor", CL_SUCCESS));
        }
        p.vendor_id = self
            .u32(dev, CL_DEVICE_VENDOR_ID)
            .map_err(|e| fail("vendor ID", e))?;
        p.available = self
            .u32(dev, CL_DEVICE_AVAILABLE)
            .map_err(|e| fail("availability", e))?
            != 0;
        let optional = |r: Result<u64, i32>, what: &str| match r {
            Ok(v) => Ok(v),
            Err(CL_INVALID_VALUE | CL_INVALID_OPERATION) => Ok(0),
            Err(e) => Err(fail(what, e)),
        };
        p.half_fp_config = optional(
            self.u64(dev, CL_DEVICE_HALF_FP_CONFIG),
            "half-precision capabilities",
        )?;
        p.single_fp_config = self
            .u64(dev, CL_DEVICE_SINGLE_FP_CONFIG)
            .map_err(|e| fail("single-precision capabilities", e))?;
        p.double_fp_config = optional(
            self.u64(dev, CL_DEVICE_DOUBLE_FP_CONFIG),
            "double-precision capabilities",
        )?;
        p.endian_little = self
            .u32(dev, CL_DEVICE_ENDIAN_LITTLE)
            .map_err(|e| fail("endianness", e))?
            != 0;
        p.execution_capabilities = self
            .u64(dev, CL_DEVICE_EXECUTION_CAPABILITIES)
            .map_err(|e| fail("execution capabilities", e))?;
        p.extensions = self
            .string(di, dev, CL_DEVICE_EXTENSIONS, EXTENSIONS_LEN)
            .map_err(|e| fail("device extensions", e))?;
        p.global_mem_size = self
            .u64(dev, CL_DEVICE_GLOBAL_MEM_SIZE)
            .map_err(|e| fail("global memory size", e))?;
        p.local_mem_size = self
            .u64(dev, CL_DEVICE_LOCAL_MEM_SIZE)
            .map_err(|e| fail("local memory size", e))?;
        p.max_clock_frequency = self
            .u32(dev, CL_DEVICE_MAX_CLOCK_FREQUENCY)
            .map_err(|e| fail("max clock frequency", e))?;
        p.max_compute_units = self
            .u32(dev, CL_DEVICE_MAX_COMPUTE_UNITS)
            .map_err(|e| fail("max compute units", e))?;
        p.opencl_device_version = self
            .string(di, dev, CL_DEVICE_VERSION, DEVICE_VERSION_LEN)
            .map_err(|e| fail("OpenCL version", e))?;
        p.opencl_driver_version = self
            .string(di, dev, CL_DRIVER_VERSION, DRIVER_VERSION_LEN)
            .map_err(|e| fail("OpenCL driver version", e))?;
        if p.extensions.contains("cl_nv_device_attribute_query") {
            p.nv_compute_capability_major = self
                .u32(dev, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV)
                .map_err(|e| fail("CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV", e))?;
            p.nv_compute_capability_minor = self
                .u32(dev, CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV)
                .map_err(|e| fail("CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV", e))?;
        }
        if p.extensions.contains("cl_amd_device_attribute_query") {
            let board = self
                .string(di, dev, CL_DEVICE_BOARD_NAME_AMD, NAME_LEN)
                .map_err(|e| fail("AMD board name", e))?;
            if !board.is_empty() {
                p.name = board;
            }
            p.amd_simd_per_compute_unit = self
                .u32(dev, CL_DEVICE_SIMD_PER_COMPUTE_UNIT_AMD)
                .map_err(|e| fail("CL_DEVICE_SIMD_PER_COMPUTE_UNIT_AMD", e))?;
            p.amd_simd_width = self
                .u32(dev, CL_DEVICE_SIMD_WIDTH_AMD)
                .map_err(|e| fail("CL_DEVICE_SIMD_WIDTH_AMD", e))?;
            p.amd_simd_instruction_width = self
                .u32(dev, CL_DEVICE_SIMD_INSTRUCTION_WIDTH_AMD)
                .map_err(|e| fail("CL_DEVICE_SIMD_INSTRUCTION_WIDTH_AMD", e))?;
        }
        Ok(p)
    }
}

/// Asks the OpenCL library for every platform's CPU devices and GPUs/accelerators. Never
/// fails: a missing library is a status, device errors are warnings.
///
/// Vendor libraries may install signal handlers of their own (PoCL's LLVM replaces the
/// SIGTERM and SIGINT handlers, so the daemon would die instead of shutting down): every
/// signal's disposition is saved before and put back after.
pub fn scan(library: Option<&Path>) -> OpenclScan {
    let saved = SavedSignals::save();
    let out = scan_library(library);
    saved.restore();
    out
}

/// Signal dispositions saved with `sigaction`.
struct SavedSignals(Vec<(libc::c_int, libc::sigaction)>);

impl SavedSignals {
    fn save() -> Self {
        let mut v = Vec::new();
        for sig in 1..32 {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            // SAFETY: `old` is plain data that sigaction fills; a null `act` only reads.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) == 0 {
                    v.push((sig, old));
                }
            }
        }
        SavedSignals(v)
    }

    fn restore(&self) {
        for (sig, act) in &self.0 {
            // SAFETY: `act` is a disposition sigaction returned for this signal.
            unsafe {
                libc::sigaction(*sig, act, std::ptr::null_mut());
            }
        }
    }
}

fn scan_library(library: Option<&Path>) -> OpenclScan {
    let lib = match open_library(library) {
        Ok(l) => l,
        Err(e) => return OpenclScan::empty(OpenclStatus::LibraryMissing(e)),
    };
    let api = match Api::load(&lib) {
        Ok(a) => a,
        Err(e) => return OpenclScan::empty(OpenclStatus::LibraryMissing(e)),
    };
    let mut out = OpenclScan::empty(OpenclStatus::Ready);
    let mut platforms = vec![std::ptr::null_mut(); MAX_PLATFORMS as usize];
    let mut n = 0u32;
    // SAFETY: `platforms` has room for MAX_PLATFORMS handles.
    let rc = unsafe { (api.get_platform_ids)(MAX_PLATFORMS, platforms.as_mut_ptr(), &mut n) };
    if rc != CL_SUCCESS || n == 0 {
        out.status = OpenclStatus::NoPlatforms;
        return out;
    }
    platforms.truncate(n.min(MAX_PLATFORMS) as usize);
    let pi = api.get_platform_info;
    for (index, &platform) in platforms.iter().enumerate() {
        let index = index as u32;
        let version = match api.string(pi, platform, CL_PLATFORM_VERSION, NAME_LEN) {
            Ok(v) => cut(v, PLATFORM_VERSION_LEN),
            Err(e) => {
                out.warnings.push(format!(
                    "Couldn't get PLATFORM_VERSION for platform #{index}; error {e}"
                ));
                continue;
            }
        };
        let vendor = api
            .string(pi, platform, CL_PLATFORM_VENDOR, NAME_LEN)
            .unwrap_or_else(|e| {
                out.warnings.push(format!(
                    "Couldn't get PLATFORM_VENDOR for platform #{index}; error {e}"
                ));
                String::new()
            });
        match api.device_ids(platform, CL_DEVICE_TYPE_CPU) {
            Ok(ids) => {
                for (i, &d) in ids.iter().enumerate() {
                    match api.device(d, i as u32, &version) {
                        Ok(prop) => out.cpus.push(OpenclCpuProp {
                            platform_vendor: vendor.clone(),
                            prop,
                        }),
                        Err(w) => out.warnings.push(w),
                    }
                }
            }
            Err(CL_DEVICE_NOT_FOUND) => {}
            Err(e) => out.warnings.push(format!(
                "Couldn't get CPU Device IDs for platform #{index}: error {e}"
            )),
        }
        match api.device_ids(platform, CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR) {
            Ok(ids) => {
                for (i, &d) in ids.iter().enumerate() {
                    match api.device(d, i as u32, &version) {
                        Ok(prop) => out.gpus.push(ScannedDevice {
                            platform_index: index,
                            opencl_device_index: i as u32,
                            prop,
                        }),
                        Err(w) => out.warnings.push(w),
                    }
                }
            }
            Err(CL_DEVICE_NOT_FOUND) => {
                out.warnings
                    .push("No OpenCL GPUs or Accelerators found".into());
            }
            Err(e) => out.warnings.push(format!(
                "Couldn't get Device IDs for platform #{index}: error {e}"
            )),
        }
    }
    if out.cpus.is_empty() && out.gpus.is_empty() {
        out.warnings
            .push("OpenCL library present but no OpenCL-capable devices found".into());
    }
    out
}

fn cut(mut s: String, cap: usize) -> String {
    if s.len() >= cap {
        let mut at = cap - 1;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
    }
    s
}

fn sane_peak_flops(x: f64, source: &str, warnings: &mut Vec<String>) -> f64 {
    if x <= 0.0 || x > GPU_MAX_PEAK_FLOPS {
        warnings.push(format!(
            "{source} reported bad peak FLOPS {x}; using {GPU_DEFAULT_PEAK_FLOPS}"
        ));
        return GPU_DEFAULT_PEAK_FLOPS;
    }
    x
}

/// Peak FLOPS of an NVIDIA GPU known only through OpenCL.
pub fn nvidia_opencl_peak_flops(p: &OpenclDeviceProp) -> f64 {
    let mhz = f64::from(p.max_clock_frequency) * 1e6;
    let units = f64::from(p.max_compute_units);
    if p.nv_compute_capability_major != 0 {
        let (cores, per_clock) = cores_and_flops_per_clock(
            p.nv_compute_capability_major as i32,
            p.nv_compute_capability_minor as i32,
        );
        units * f64::from(cores) * f64::from(per_clock) * mhz
    } else {
        units * 48.0 * 2.0 * mhz
    }
}

/// Peak FLOPS of an AMD GPU known only through OpenCL.
pub fn amd_opencl_peak_flops(p: &OpenclDeviceProp) -> f64 {
    let mhz = f64::from(p.max_clock_frequency) * 1e6;
    let units = f64::from(p.max_compute_units);
    if p.amd_simd_per_compute_unit != 0 {
        units
            * f64::from(p.amd_simd_per_compute_unit)
            * f64::from(p.amd_simd_width)
            * f64::from(p.amd_simd_instruction_width)
            * 2.0
            * mhz
    } else {
        units * 16.0 * 5.0 * mhz
    }
}

/// Peak FLOPS of an Intel GPU: compute units × 8 × clock.
pub fn intel_opencl_peak_flops(p: &OpenclDeviceProp) -> f64 {
    f64::from(p.max_compute_units) * 8.0 * f64::from(p.max_clock_frequency) * 1e6
}

/// Numbers the scanned GPUs as the official client does: NVIDIA ones matched by name, in
/// order, to NVML's devices (`nvml`), the others by position among their vendor's devices.
/// Devices of other vendors are dropped with a warning.
pub fn classify(
    scan: &OpenclScan,
    nvml: &[NvidiaDevice],
    warnings: &mut Vec<String>,
) -> Vec<OpenclDevice> {
    let mut out: Vec<OpenclDevice> = Vec::new();
    let mut platform = None;
    let mut cuda_index = 0usize;
    for s in &scan.gpus {
        if platform != Some(s.platform_index) {
            platform = Some(s.platform_index);
            cuda_index = 0;
        }
        let vendor = OpenclVendor::of(&s.prop.vendor);
        let count_of = |v: OpenclVendor| out.iter().filter(|d| d.vendor == v).count() as u32;
        let prop = s.prop.clone();
        let global = prop.global_mem_size as f64;
        let dev = match vendor {
            OpenclVendor::Nvidia => {
                let matched = nvml[cuda_index.min(nvml.len())..]
                    .iter()
                    .position(|n| n.name == prop.name)
                    .map(|off| cuda_index + off);
                let (device_num, peak, ram) = match matched {
                    Some(i) => {
                        cuda_index = i + 1;
                        (
                            nvml[i].device_num,
                            nvml[i].peak_flops,
                            nvml[i].available_ram as f64,
                        )
                    }
                    None => {
                        if !nvml.is_empty() {
                            warnings.push(format!(
                                "OpenCL NVIDIA index #{} does not match any CUDA device",
                                s.opencl_device_index
                            ));
                        }
                        let peak = sane_peak_flops(
                            nvidia_opencl_peak_flops(&prop),
                            "NVIDIA OpenCL",
                            warnings,
                        );
                        (count_of(OpenclVendor::Nvidia), peak, global)
                    }
                };
                OpenclDevice {
                    vendor,
                    device_num,
                    opencl_device_index: s.opencl_device_index,
                    peak_flops: peak,
                    available_ram: ram,
                    usage: GpuUse::Unused,
                    prop,
                }
            }
            OpenclVendor::Amd | OpenclVendor::Intel => {
                let peak = if vendor == OpenclVendor::Amd {
                    sane_peak_flops(amd_opencl_peak_flops(&prop), "AMD OpenCL", warnings)
                } else {
                    sane_peak_flops(intel_opencl_peak_flops(&prop), "Intel OpenCL", warnings)
                };
                OpenclDevice {
                    vendor,
                    device_num: count_of(vendor),
                    opencl_device_index: s.opencl_device_index,
                    peak_flops: peak,
                    available_ram: global,
                    usage: GpuUse::Unused,
                    prop,
                }
            }
            OpenclVendor::Other => {
                warnings.push(format!(
                    "OpenCL device {} of vendor {} is not used",
                    prop.name, prop.vendor
                ));
                continue;
            }
        };
        out.push(dev);
    }
    out
}

/// The official `opencl_compare`: device version, then memory (loosely: within −30 %/+40 %
/// counts as equal), then speed.
fn compare(a: &OpenclDevice, b: &OpenclDevice, loose: bool) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    let v = a
        .prop
        .device_version_int()
        .cmp(&b.prop.device_version_int());
    if v != Equal {
        return v;
    }
    let (ma, mb) = (a.prop.global_mem_size as f64, b.prop.global_mem_size as f64);
    if loose {
        return if ma > 1.4 * mb {
            Greater
        } else if ma < 0.7 * mb {
            Less
        } else {
            Equal
        };
    }
    ma.partial_cmp(&mb)
        .filter(|o| *o != Equal)
        .or_else(|| a.peak_flops.partial_cmp(&b.peak_flops))
        .unwrap_or(Equal)
}

/// Marks one vendor's devices used, unused or ignored (`find_best_opencls`) and returns the
/// best one's index in `devices`.
pub fn choose(
    devices: &mut [OpenclDevice],
    vendor: OpenclVendor,
    use_all: bool,
    ignore: &[u32],
) -> Option<usize> {
    let mut best: Option<usize> = None;
    for i in 0..devices.len() {
        let d = &devices[i];
        if d.vendor != vendor || ignore.contains(&d.device_num) {
            continue;
        }
        if best.is_none_or(|b| compare(d, &devices[b], false).is_gt()) {
            best = Some(i);
        }
    }
    let best_dev = best.map(|b| devices[b].clone());
    for d in devices.iter_mut().filter(|d| d.vendor == vendor) {
        d.usage = if ignore.contains(&d.device_num) {
            GpuUse::Ignored
        } else if best_dev
            .as_ref()
            .is_some_and(|b| use_all || compare(d, b, true).is_eq())
        {
            GpuUse::Used
        } else {
            GpuUse::Unused
        };
    }
    best
}

/// The options that decide which OpenCL GPUs are used.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenclChoice<'a> {
    /// `<use_all_gpus>`.
    pub use_all: bool,
    /// `<ignore_nvidia_dev>`.
    pub ignore_nvidia: &'a [u32],
    /// `<ignore_ati_dev>`.
    pub ignore_ati: &'a [u32],
    /// `<ignore_intel_dev>`.
    pub ignore_intel: &'a [u32],
}

/// Adds what OpenCL found to `coprocs` (`correlate_opencl`): `have_opencl` and the
/// `<coproc_opencl>` block for NVIDIA GPUs CUDA already describes (or a `<coproc_cuda>` from
/// OpenCL alone when NVML saw none), and `<coproc_ati>` / `<coproc_intel_gpu>` elements.
/// `cuda_best` is the device number of the GPU `<coproc_cuda>` describes, if any. Marks
/// each device's usage in `devices`.
pub fn merge_into(
    coprocs: &mut Coprocs,
    cuda_best: Option<u32>,
    devices: &mut [OpenclDevice],
    choice: OpenclChoice<'_>,
) {
    let has_nvidia = devices.iter().any(|d| d.vendor == OpenclVendor::Nvidia);
    if has_nvidia {
        match (coprocs.nvidia.as_mut(), cuda_best) {
            (Some(cuda), Some(best_num)) if cuda.have_cuda => {
                // merge_opencl: the CUDA description stays; OpenCL adds its block.
                let mut have = None;
                for d in devices
                    .iter_mut()
                    .filter(|d| d.vendor == OpenclVendor::Nvidia)
                {
                    d.usage = if choice.ignore_nvidia.contains(&d.device_num) {
                        GpuUse::Ignored
                    } else {
                        GpuUse::Unused
                    };
                    if d.usage != GpuUse::Ignored && d.device_num == best_num && have.is_none() {
                        have = Some(d.prop.clone());
                    }
                }
                if let Some(prop) = have {
                    cuda.have_opencl = true;
                    cuda.extra
                        .retain(|e| !e.trim_start().starts_with("<coproc_opencl>"));
                    cuda.extra.push(prop.to_xml("coproc_opencl"));
                }
            }
            _ => {
                let best = choose(
                    devices,
                    OpenclVendor::Nvidia,
                    choice.use_all,
                    choice.ignore_nvidia,
                );
                if let Some(b) = best {
                    let bd = &devices[b];
                    let count = devices
                        .iter()
                        .filter(|d| d.vendor == OpenclVendor::Nvidia && d.usage == GpuUse::Used)
                        .count() as u32;
                    let p = &bd.prop;
                    coprocs.nvidia = Some(NvidiaCoproc {
                        count,
                        name: p.name.clone(),
                        available_ram: p.global_mem_size as f64,
                        have_cuda: false,
                        have_opencl: true,
                        peak_flops: bd.peak_flops,
                        total_global_mem: p.global_mem_size as f64,
                        clock_rate: i32::try_from(u64::from(p.max_clock_frequency) * 1000)
                            .unwrap_or(i32::MAX),
                        major: p.nv_compute_capability_major as i32,
                        minor: p.nv_compute_capability_minor as i32,
                        pci_infos: vec![PciInfo::default(); count as usize],
                        extra: vec![p.to_xml("coproc_opencl")],
                        ..NvidiaCoproc::default()
                    });
                }
            }
        }
    }
    for (vendor, kind, ignore) in [
        (OpenclVendor::Amd, OpenclGpuKind::Amd, choice.ignore_ati),
        (
            OpenclVendor::Intel,
            OpenclGpuKind::Intel,
            choice.ignore_intel,
        ),
    ] {
        let Some(b) = choose(devices, vendor, choice.use_all, ignore) else {
            continue;
        };
        let count = devices
            .iter()
            .filter(|d| d.vendor == vendor && d.usage == GpuUse::Used)
            .count() as u32;
        let bd = &devices[b];
        let gpu = OpenclGpu {
            kind,
            count,
            peak_flops: bd.peak_flops,
            available_ram: bd.prop.global_mem_size as f64,
            prop: bd.prop.clone(),
        };
        coprocs.other.retain(|o| o.rsc_type != kind.rsc_type());
        coprocs.other.insert(0, gpu.to_coproc());
    }
    // AMD before Intel, as the official client writes them.
    coprocs.other.sort_by_key(|o| match o.element.as_str() {
        "coproc_ati" => 0,
        "coproc_intel_gpu" => 1,
        _ => 2,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prop(name: &str, vendor: &str, version: &str, mem: u64) -> OpenclDeviceProp {
        OpenclDeviceProp {
            name: name.into(),
            vendor: vendor.into(),
            opencl_device_version: version.into(),
            global_mem_size: mem,
            max_compute_units: 10,
            max_clock_frequency: 1000,
            ..OpenclDeviceProp::default()
        }
    }

    fn scan_of(devs: Vec<(u32, OpenclDeviceProp)>) -> OpenclScan {
        let mut idx = std::collections::HashMap::new();
        OpenclScan {
            status: OpenclStatus::Ready,
            cpus: Vec::new(),
            gpus: devs
                .into_iter()
                .map(|(platform_index, prop)| {
                    let i = idx.entry(platform_index).or_insert(0u32);
                    let d = ScannedDevice {
                        platform_index,
                        opencl_device_index: *i,
                        prop,
                    };
                    *i += 1;
                    d
                })
                .collect(),
            warnings: Vec::new(),
        }
    }

    #[test]
    fn vendors_are_classified_in_the_official_order() {
        assert_eq!(OpenclVendor::of("NVIDIA Corporation"), OpenclVendor::Nvidia);
        assert_eq!(
            OpenclVendor::of("Advanced Micro Devices, Inc."),
            OpenclVendor::Amd
        );
        assert_eq!(OpenclVendor::of("AMD"), OpenclVendor::Amd);
        assert_eq!(
            OpenclVendor::of("Intel(R) Corporation"),
            OpenclVendor::Intel
        );
        assert_eq!(OpenclVendor::of("ARM"), OpenclVendor::Other);
    }

    #[test]
    fn peak_flops_formulas_match_the_official_client() {
        let mut p = prop("x", "AMD", "OpenCL 2.0", 1);
        assert_eq!(amd_opencl_peak_flops(&p), 10.0 * 16.0 * 5.0 * 1e9);
        p.amd_simd_per_compute_unit = 2;
        p.amd_simd_width = 32;
        p.amd_simd_instruction_width = 1;
        assert_eq!(amd_opencl_peak_flops(&p), 10.0 * 2.0 * 32.0 * 2.0 * 1e9);
        assert_eq!(intel_opencl_peak_flops(&p), 10.0 * 8.0 * 1e9);
        assert_eq!(nvidia_opencl_peak_flops(&p), 10.0 * 96.0 * 1e9);
        p.nv_compute_capability_major = 8;
        p.nv_compute_capability_minor = 6;
        assert_eq!(nvidia_opencl_peak_flops(&p), 10.0 * 128.0 * 2.0 * 1e9);
        let mut w = Vec::new();
        assert_eq!(sane_peak_flops(0.0, "x", &mut w), 100e9);
        assert_eq!(sane_peak_flops(2e15, "x", &mut w), 100e9);
        assert_eq!(w.len(), 2);
    }

    #[test]
    fn amd_and_intel_devices_are_numbered_per_vendor_and_the_best_counted() {
        let scan = scan_of(vec![
            (
                0,
                prop(
                    "Radeon A",
                    "Advanced Micro Devices, Inc.",
                    "OpenCL 2.0 AMD-APP",
                    8 << 30,
                ),
            ),
            (
                0,
                prop(
                    "Radeon B",
                    "Advanced Micro Devices, Inc.",
                    "OpenCL 2.0 AMD-APP",
                    16 << 30,
                ),
            ),
            (
                0,
                prop(
                    "Radeon C",
                    "Advanced Micro Devices, Inc.",
                    "OpenCL 1.2 AMD-APP",
                    32 << 30,
                ),
            ),
            (
                1,
                prop(
                    "Intel UHD",
                    "Intel(R) Corporation",
                    "OpenCL 3.0 NEO",
                    2 << 30,
                ),
            ),
        ]);
        let mut w = Vec::new();
        let mut devs = classify(&scan, &[], &mut w);
        assert_eq!(
            devs.iter()
                .map(|d| (d.device_num, d.opencl_device_index))
                .collect::<Vec<_>>(),
            [(0, 0), (1, 1), (2, 2), (0, 0)]
        );
        let mut c = Coprocs::default();
        merge_into(&mut c, None, &mut devs, OpenclChoice::default());
        assert_eq!(
            devs.iter().map(|d| d.usage).collect::<Vec<_>>(),
            // B is best (2.0, most memory); A has half of B's memory: not loosely equal;
            // C's OpenCL version is lower.
            [GpuUse::Unused, GpuUse::Used, GpuUse::Unused, GpuUse::Used]
        );
        assert_eq!(c.other.len(), 2);
        assert_eq!(c.other[0].element, "coproc_ati");
        assert_eq!(c.other[0].count, 1);
        assert!(c.other[0].raw.contains("<name>Radeon B</name>"));
        assert_eq!(c.other[1].element, "coproc_intel_gpu");

        let mut c = Coprocs::default();
        merge_into(
            &mut c,
            None,
            &mut devs,
            OpenclChoice {
                use_all: true,
                ignore_ati: &[1],
                ..OpenclChoice::default()
            },
        );
        assert_eq!(
            devs.iter().map(|d| d.usage).collect::<Vec<_>>(),
            [GpuUse::Used, GpuUse::Ignored, GpuUse::Used, GpuUse::Used]
        );
        assert_eq!(c.other[0].count, 2);
        assert!(c.other[0].raw.contains("<name>Radeon A</name>"));
    }

    #[test]
    fn nvidia_opencl_devices_match_nvml_by_name_and_add_the_opencl_block() {
        let nv = |num: u32, name: &str| NvidiaDevice {
            device_num: num,
            name: name.into(),
            total_mem: 1 << 30,
            available_ram: 1 << 29,
            major: 8,
            minor: 6,
            driver_version: String::new(),
            drv_version: 0,
            cuda_version: 12020,
            cuda_cores: None,
            multi_processor_count: 1,
            clock_rate_khz: 1,
            peak_flops: 5e12,
            pci: PciInfo::default(),
            usage: GpuUse::Used,
        };
        let nvml = [nv(0, "GeForce A"), nv(1, "GeForce B")];
        let scan = scan_of(vec![(
            0,
            prop(
                "GeForce B",
                "NVIDIA Corporation",
                "OpenCL 3.0 CUDA",
                1 << 30,
            ),
        )]);
        let mut w = Vec::new();
        let mut devs = classify(&scan, &nvml, &mut w);
        assert_eq!(devs[0].device_num, 1, "matched by name, skipping A");
        assert_eq!(devs[0].peak_flops, 5e12);
        let mut c = Coprocs {
            nvidia: Some(NvidiaCoproc {
                count: 2,
                have_cuda: true,
                ..NvidiaCoproc::default()
            }),
            other: Vec::new(),
        };
        merge_into(&mut c, Some(1), &mut devs, OpenclChoice::default());
        let n = c.nvidia.expect("cuda");
        assert!(n.have_cuda && n.have_opencl);
        assert_eq!(n.count, 2);
        assert!(
            n.extra[0].contains("<name>GeForce B</name>"),
            "{:?}",
            n.extra
        );

        // The best CUDA device has no OpenCL twin: no have_opencl.
        let mut c = Coprocs {
            nvidia: Some(NvidiaCoproc {
                have_cuda: true,
                ..NvidiaCoproc::default()
            }),
            other: Vec::new(),
        };
        merge_into(&mut c, Some(0), &mut devs, OpenclChoice::default());
        assert!(!c.nvidia.expect("cuda").have_opencl);

        // Without NVML, OpenCL alone describes the GPU.
        let mut devs = classify(&scan, &[], &mut w);
        let mut c = Coprocs::default();
        merge_into(&mut c, None, &mut devs, OpenclChoice::default());
        let n = c.nvidia.expect("from OpenCL");
        assert!(!n.have_cuda && n.have_opencl);
        assert_eq!((n.count, n.name.as_str()), (1, "GeForce B"));
        assert_eq!(n.clock_rate, 1_000_000);
    }

    #[test]
    fn a_missing_library_is_no_opencl() {
        let s = scan(Some(Path::new("/nonexistent/libOpenCL.so.1")));
        assert!(matches!(s.status, OpenclStatus::LibraryMissing(_)), "{s:?}");
        assert!(s.cpus.is_empty() && s.gpus.is_empty());
    }
}
