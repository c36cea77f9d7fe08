//! OpenCL detection: every platform and device, read through the OpenCL ICD loader
//! (`libOpenCL.so`) opened at run time with `libloading`, and described as the official
//! client does (`client/gpu_opencl.cpp`): GPUs and accelerators by vendor (NVIDIA, AMD,
//! Intel), and each platform's CPU device as an `<opencl_cpu_prop>`.
//!
//! No library, or a library with no platform, means no OpenCL: a log line, never an error.
//! [`scan`] does the FFI; everything after it (`correlate`: [`classify`], [`merge_into`]) is
//! pure.

mod correlate;

pub use correlate::{
    amd_opencl_peak_flops, choose, classify, intel_opencl_peak_flops, merge_into,
    nvidia_opencl_peak_flops, OpenclChoice,
};

use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ferrite_proto::host::{OpenclCpuProp, OpenclDeviceProp};

use crate::gpu::GpuUse;

/// Environment variable naming the OpenCL library to load instead of the system's.
pub const OPENCL_LIBRARY_ENV: &str = "FERRITE_OPENCL_LIBRARY";

/// Library names tried, in the official client's order.
const DEFAULT_OPENCL_NAMES: &[&str] = &["libOpenCL.so", "libOpenCL.so.1"];

/// At most this many platforms and devices per platform are asked for (the official
/// client's `MAX_OPENCL_PLATFORMS` and `MAX_COPROC_INSTANCES`).
const MAX_PLATFORMS: u32 = 16;
const MAX_DEVICES: u32 = 64;

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
    /// The detection child process crashed, hung or answered nothing readable.
    DetectionFailed(String),
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

/// Libraries opened so far, by the name they were opened with. They stay loaded for the
/// life of the process: vendor drivers (PoCL's LLVM among them) do not survive being
/// unloaded and loaded again, and the official client, which unloads, does so in a
/// short-lived child process.
static LOADED: Mutex<Vec<(PathBuf, &'static libloading::Library)>> = Mutex::new(Vec::new());

/// Opens the OpenCL library: `explicit`, else `$FERRITE_OPENCL_LIBRARY`, else the system's.
/// The caller holds `LOADED`'s lock.
fn open_library(
    loaded: &mut Vec<(PathBuf, &'static libloading::Library)>,
    explicit: Option<&Path>,
) -> Result<&'static libloading::Library, String> {
    let env_path = std::env::var_os(OPENCL_LIBRARY_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let candidates: Vec<PathBuf> = match explicit.map(Path::to_path_buf).or(env_path) {
        Some(p) => vec![p],
        None => DEFAULT_OPENCL_NAMES.iter().map(PathBuf::from).collect(),
    };
    let mut last = String::from("no library name");
    for c in candidates {
        if let Some((_, l)) = loaded.iter().find(|(p, _)| *p == c) {
            return Ok(l);
        }
        // SAFETY: loading the OpenCL ICD loader runs its initialisers, which only register
        // vendor libraries; no Rust invariant depends on them.
        match unsafe { libloading::Library::new(&c) } {
            Ok(l) => {
                let l: &'static libloading::Library = Box::leak(Box::new(l));
                loaded.push((c, l));
                return Ok(l);
            }
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
/// One scan at a time in a process. Vendor libraries may install signal handlers of their
/// own (PoCL's LLVM replaces the SIGTERM and SIGINT handlers, so the daemon would die
/// instead of shutting down): every signal's disposition is saved before and put back after.
pub fn scan(library: Option<&Path>) -> OpenclScan {
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    let saved = SavedSignals::save();
    let out = scan_library(&mut loaded, library);
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

fn scan_library(
    loaded: &mut Vec<(PathBuf, &'static libloading::Library)>,
    library: Option<&Path>,
) -> OpenclScan {
    let lib = match open_library(loaded, library) {
        Ok(l) => l,
        Err(e) => return OpenclScan::empty(OpenclStatus::LibraryMissing(e)),
    };
    let api = match Api::load(lib) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_no_opencl() {
        let s = scan(Some(Path::new("/nonexistent/libOpenCL.so.1")));
        assert!(matches!(s.status, OpenclStatus::LibraryMissing(_)), "{s:?}");
        assert!(s.cpus.is_empty() && s.gpus.is_empty());
    }
}
