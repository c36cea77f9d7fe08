//! `<gpu_scan>`: what a GPU detection child process found, sent back to the daemon on its
//! standard output. The official client runs its own binary with `--detect_gpus` and reads
//! `coproc_info.xml` back; Ferrite's child writes this document instead, holding what the
//! drivers said before any choice is made (NVML's devices, every OpenCL platform's GPUs and
//! CPUs), so the daemon never loads a driver into its own process.
//!
//! This module is the only writer and reader of the document.

use crate::xml::{parse_document, Parsed, Tag, XmlError, XmlReader, XmlWriter};

use super::{OpenclCpuProp, OpenclDeviceProp, PciInfo};

/// Root element of the document.
pub const GPU_SCAN_ROOT: &str = "gpu_scan";

/// How a GPU library answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum LibraryAnswer {
    /// The library answered.
    #[default]
    Ready,
    /// It was not asked (`no_gpus`, `no_opencl`).
    Disabled,
    /// It could not be loaded (or lacks its entry points).
    LibraryMissing(String),
    /// It loaded but did not initialise.
    InitFailed(String),
    /// It loaded but reports no platform (OpenCL).
    NoPlatforms,
}

impl LibraryAnswer {
    fn keyword(&self) -> &'static str {
        match self {
            LibraryAnswer::Ready => "ready",
            LibraryAnswer::Disabled => "disabled",
            LibraryAnswer::LibraryMissing(_) => "library_missing",
            LibraryAnswer::InitFailed(_) => "init_failed",
            LibraryAnswer::NoPlatforms => "no_platforms",
        }
    }

    fn detail(&self) -> &str {
        match self {
            LibraryAnswer::LibraryMissing(d) | LibraryAnswer::InitFailed(d) => d,
            _ => "",
        }
    }

    fn write(&self, w: &mut XmlWriter, tag: &str) {
        w.open(tag)
            .text("status", self.keyword())
            .nonempty_text("detail", self.detail())
            .close(tag);
    }

    fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<LibraryAnswer, XmlError> {
        let mut status = String::new();
        let mut detail = String::new();
        if !tag.is_empty() {
            let parent = tag.name().to_owned();
            while let Some(t) = r.next_child()? {
                match t.name() {
                    "status" => status = r.string(&t)?,
                    "detail" => detail = r.string(&t)?,
                    _ => r.unknown(&t, &parent)?,
                }
            }
        }
        Ok(match status.as_str() {
            "ready" => LibraryAnswer::Ready,
            "disabled" => LibraryAnswer::Disabled,
            "library_missing" => LibraryAnswer::LibraryMissing(detail),
            "no_platforms" => LibraryAnswer::NoPlatforms,
            "init_failed" => LibraryAnswer::InitFailed(detail),
            other => {
                r.warn(tag, format!("unknown status {other:?}"));
                LibraryAnswer::InitFailed(detail)
            }
        })
    }
}

/// One NVIDIA device as NVML describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvmlDevice {
    /// NVML index.
    pub device_num: u32,
    /// Marketing name.
    pub name: String,
    /// Total memory, bytes.
    pub total_mem: u64,
    /// Free memory, bytes.
    pub available_ram: u64,
    /// Compute capability, major.
    pub major: i32,
    /// Compute capability, minor.
    pub minor: i32,
    /// Display driver version as the driver prints it.
    pub driver_version: String,
    /// CUDA driver API version.
    pub cuda_version: i32,
    /// CUDA cores, when the driver reports them.
    pub cuda_cores: Option<u32>,
    /// Streaming multiprocessors.
    pub multi_processor_count: i32,
    /// Maximum SM clock, kHz.
    pub clock_rate_khz: i32,
    /// PCI location.
    pub pci: PciInfo,
    /// NVML's UUID, empty when unknown.
    pub uuid: String,
}

impl NvmlDevice {
    fn write(&self, w: &mut XmlWriter) {
        w.open("nvidia_device")
            .num("device_num", self.device_num)
            .text("name", &self.name)
            .num("total_mem", self.total_mem)
            .num("available_ram", self.available_ram)
            .num("major", self.major)
            .num("minor", self.minor)
            .text("driver_version", &self.driver_version)
            .num("cuda_version", self.cuda_version);
        if let Some(c) = self.cuda_cores {
            w.num("cuda_cores", c);
        }
        w.num("multi_processor_count", self.multi_processor_count)
            .num("clock_rate_khz", self.clock_rate_khz);
        self.pci.write(w);
        w.nonempty_text("uuid", &self.uuid).close("nvidia_device");
    }

    fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<NvmlDevice, XmlError> {
        let mut d = NvmlDevice::default();
        if tag.is_empty() {
            return Ok(d);
        }
        while let Some(t) = r.next_child()? {
            match t.name() {
                "device_num" => d.device_num = r.num_or(&t, 0)?,
                "name" => d.name = r.string(&t)?,
                "total_mem" => d.total_mem = r.num_or(&t, 0)?,
                "available_ram" => d.available_ram = r.num_or(&t, 0)?,
                "major" => d.major = r.num_or(&t, 0)?,
                "minor" => d.minor = r.num_or(&t, 0)?,
                "driver_version" => d.driver_version = r.string(&t)?,
                "cuda_version" => d.cuda_version = r.num_or(&t, 0)?,
                "cuda_cores" => d.cuda_cores = r.num(&t)?,
                "multi_processor_count" => d.multi_processor_count = r.num_or(&t, 0)?,
                "clock_rate_khz" => d.clock_rate_khz = r.num_or(&t, 0)?,
                "pci_info" => d.pci = PciInfo::read(r, &t)?,
                "uuid" => d.uuid = r.string(&t)?,
                _ => r.unknown(&t, "nvidia_device")?,
            }
        }
        Ok(d)
    }
}

/// A GPU or accelerator as its OpenCL platform lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScannedOpenclGpu {
    /// Index of the platform in `clGetPlatformIDs`' list.
    pub platform_index: u32,
    /// Index among the platform's GPUs and accelerators.
    pub opencl_device_index: u32,
    /// Its properties.
    pub prop: OpenclDeviceProp,
}

impl ScannedOpenclGpu {
    fn write(&self, w: &mut XmlWriter) {
        w.open("opencl_gpu")
            .num("platform_index", self.platform_index)
            .num("opencl_device_index", self.opencl_device_index);
        self.prop.write(w, "opencl_device");
        w.close("opencl_gpu");
    }

    fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<ScannedOpenclGpu, XmlError> {
        let mut g = ScannedOpenclGpu::default();
        if tag.is_empty() {
            return Ok(g);
        }
        while let Some(t) = r.next_child()? {
            match t.name() {
                "platform_index" => g.platform_index = r.num_or(&t, 0)?,
                "opencl_device_index" => g.opencl_device_index = r.num_or(&t, 0)?,
                "opencl_device" => g.prop = OpenclDeviceProp::read(r, &t)?,
                _ => r.unknown(&t, "opencl_gpu")?,
            }
        }
        Ok(g)
    }
}

/// Everything the GPU libraries said, before any device is chosen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuScan {
    /// How NVML answered.
    pub nvml: LibraryAnswer,
    /// NVML's devices.
    pub nvidia: Vec<NvmlDevice>,
    /// NVML's problems, one log line each.
    pub nvml_warnings: Vec<String>,
    /// How the OpenCL library answered.
    pub opencl: LibraryAnswer,
    /// Each platform's CPU device.
    pub opencl_cpus: Vec<OpenclCpuProp>,
    /// GPUs and accelerators of every platform, in platform then device order.
    pub opencl_gpus: Vec<ScannedOpenclGpu>,
    /// The OpenCL library's problems, one log line each.
    pub opencl_warnings: Vec<String>,
}

impl GpuScan {
    /// The document.
    pub fn to_xml(&self) -> String {
        let mut w = XmlWriter::new();
        w.open(GPU_SCAN_ROOT);
        self.nvml.write(&mut w, "nvml");
        for d in &self.nvidia {
            d.write(&mut w);
        }
        for m in &self.nvml_warnings {
            w.text("nvml_warning", m);
        }
        self.opencl.write(&mut w, "opencl");
        for c in &self.opencl_cpus {
            c.write(&mut w);
        }
        for g in &self.opencl_gpus {
            g.write(&mut w);
        }
        for m in &self.opencl_warnings {
            w.text("opencl_warning", m);
        }
        w.close(GPU_SCAN_ROOT);
        w.finish()
    }

    /// Reads the document; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Parsed<GpuScan>, XmlError> {
        parse_document(text, file, GPU_SCAN_ROOT, |r, tag| {
            let mut s = GpuScan::default();
            if tag.is_empty() {
                return Ok(s);
            }
            while let Some(t) = r.next_child()? {
                match t.name() {
                    "nvml" => s.nvml = LibraryAnswer::read(r, &t)?,
                    "nvidia_device" => s.nvidia.push(NvmlDevice::read(r, &t)?),
                    "nvml_warning" => s.nvml_warnings.push(r.string(&t)?),
                    "opencl" => s.opencl = LibraryAnswer::read(r, &t)?,
                    "opencl_cpu_prop" => s.opencl_cpus.push(OpenclCpuProp::read(r, &t)?),
                    "opencl_gpu" => s.opencl_gpus.push(ScannedOpenclGpu::read(r, &t)?),
                    "opencl_warning" => s.opencl_warnings.push(r.string(&t)?),
                    _ => r.unknown(&t, GPU_SCAN_ROOT)?,
                }
            }
            Ok(s)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_survives_the_round_trip() {
        let s = GpuScan {
            nvml: LibraryAnswer::Ready,
            nvidia: vec![NvmlDevice {
                device_num: 1,
                name: "NVIDIA GeForce RTX 3080 <&>".into(),
                total_mem: 10 << 30,
                available_ram: 9 << 30,
                major: 8,
                minor: 6,
                driver_version: "535.54.03".into(),
                cuda_version: 12020,
                cuda_cores: Some(8704),
                multi_processor_count: 68,
                clock_rate_khz: 1_710_000,
                pci: PciInfo {
                    bus_id: 3,
                    device_id: 0,
                    domain_id: 0,
                },
                uuid: "GPU-1234".into(),
            }],
            nvml_warnings: vec!["CUDA driver version unknown (x)".into()],
            opencl: LibraryAnswer::LibraryMissing("libOpenCL.so: not found".into()),
            opencl_cpus: vec![OpenclCpuProp {
                platform_vendor: "The pocl project".into(),
                prop: OpenclDeviceProp {
                    name: "cpu".into(),
                    max_compute_units: 2,
                    ..OpenclDeviceProp::default()
                },
            }],
            opencl_gpus: vec![ScannedOpenclGpu {
                platform_index: 1,
                opencl_device_index: 2,
                prop: OpenclDeviceProp {
                    name: "gfx1030".into(),
                    vendor: "Advanced Micro Devices, Inc.".into(),
                    available: true,
                    ..OpenclDeviceProp::default()
                },
            }],
            opencl_warnings: vec!["platform 0: no devices".into()],
        };
        let text = s.to_xml();
        let back = GpuScan::parse(&text, "gpu scan").expect("parse");
        assert!(back.warnings.is_empty(), "{:?}", back.warnings);
        assert_eq!(back.value, s);
    }

    #[test]
    fn a_document_cut_short_is_an_error() {
        let text = GpuScan::default().to_xml();
        let cut = &text[..text.len() / 2];
        assert!(GpuScan::parse(cut, "gpu scan").is_err());
    }
}
