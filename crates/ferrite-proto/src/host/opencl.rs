//! OpenCL device descriptions as BOINC reports them (`lib/opencl_boinc.cpp`,
//! `lib/coproc.cpp`): the `<coproc_opencl>` block inside each GPU's coproc element, the
//! `<coproc_ati>` and `<coproc_intel_gpu>` elements built from OpenCL, and the
//! `<opencl_cpu_prop>` blocks that describe OpenCL platforms offering the CPU.
//!
//! The host-detection crate fills [`OpenclDeviceProp`] from the OpenCL library; this module
//! is the only place that writes (and reads) these elements.

use crate::xml::{Tag, XmlError, XmlReader, XmlWriter};

use super::OtherCoproc;

/// One OpenCL device (`OPENCL_DEVICE_PROP`). Field names follow the XML tags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenclDeviceProp {
    /// `CL_DEVICE_NAME` (AMD: the board name when the driver reports one).
    pub name: String,
    /// `CL_DEVICE_VENDOR`.
    pub vendor: String,
    /// `CL_DEVICE_VENDOR_ID`.
    pub vendor_id: u32,
    /// `CL_DEVICE_AVAILABLE`.
    pub available: bool,
    /// `CL_DEVICE_HALF_FP_CONFIG` (0 when the platform does not say).
    pub half_fp_config: u64,
    /// `CL_DEVICE_SINGLE_FP_CONFIG`.
    pub single_fp_config: u64,
    /// `CL_DEVICE_DOUBLE_FP_CONFIG` (0 when the platform does not say).
    pub double_fp_config: u64,
    /// `CL_DEVICE_ENDIAN_LITTLE`.
    pub endian_little: bool,
    /// `CL_DEVICE_EXECUTION_CAPABILITIES`.
    pub execution_capabilities: u64,
    /// `CL_DEVICE_EXTENSIONS`, space-separated as the driver gives them.
    pub extensions: String,
    /// `CL_DEVICE_GLOBAL_MEM_SIZE`, bytes.
    pub global_mem_size: u64,
    /// `CL_DEVICE_LOCAL_MEM_SIZE`, bytes.
    pub local_mem_size: u64,
    /// `CL_DEVICE_MAX_CLOCK_FREQUENCY`, MHz.
    pub max_clock_frequency: u32,
    /// `CL_DEVICE_MAX_COMPUTE_UNITS`.
    pub max_compute_units: u32,
    /// NVIDIA compute capability, major (`cl_nv_device_attribute_query`), else 0.
    pub nv_compute_capability_major: u32,
    /// NVIDIA compute capability, minor, else 0.
    pub nv_compute_capability_minor: u32,
    /// AMD SIMDs per compute unit (`cl_amd_device_attribute_query`), else 0.
    pub amd_simd_per_compute_unit: u32,
    /// AMD SIMD width, else 0.
    pub amd_simd_width: u32,
    /// AMD SIMD instruction width, else 0.
    pub amd_simd_instruction_width: u32,
    /// `CL_PLATFORM_VERSION` of the device's platform.
    pub opencl_platform_version: String,
    /// `CL_DEVICE_VERSION`.
    pub opencl_device_version: String,
    /// `CL_DRIVER_VERSION`.
    pub opencl_driver_version: String,
}

impl OpenclDeviceProp {
    /// Writes `<tag>` with every property, in the official order.
    pub fn write(&self, w: &mut XmlWriter, tag: &str) {
        w.open(tag)
            .text("name", &self.name)
            .text("vendor", &self.vendor)
            .num("vendor_id", self.vendor_id)
            .bool01("available", self.available)
            .num("half_fp_config", self.half_fp_config)
            .num("single_fp_config", self.single_fp_config)
            .num("double_fp_config", self.double_fp_config)
            .bool01("endian_little", self.endian_little)
            .num("execution_capabilities", self.execution_capabilities)
            .text("extensions", &self.extensions)
            .num("global_mem_size", self.global_mem_size)
            .num("local_mem_size", self.local_mem_size)
            .num("max_clock_frequency", self.max_clock_frequency)
            .num("max_compute_units", self.max_compute_units)
            .num(
                "nv_compute_capability_major",
                self.nv_compute_capability_major,
            )
            .num(
                "nv_compute_capability_minor",
                self.nv_compute_capability_minor,
            )
            .num("amd_simd_per_compute_unit", self.amd_simd_per_compute_unit)
            .num("amd_simd_width", self.amd_simd_width)
            .num(
                "amd_simd_instruction_width",
                self.amd_simd_instruction_width,
            )
            .text("opencl_platform_version", &self.opencl_platform_version)
            .text("opencl_device_version", &self.opencl_device_version)
            .text("opencl_driver_version", &self.opencl_driver_version)
            .close(tag);
    }

    /// The element `<tag>…</tag>` as text (for the blocks kept verbatim in `<coproc_cuda>`).
    pub fn to_xml(&self, tag: &str) -> String {
        let mut w = XmlWriter::new();
        self.write(&mut w, tag);
        w.finish()
    }

    /// Reads an element written by [`write`](Self::write) (any tag name). Unknown children
    /// (the official client's temporary-file fields) are skipped with a warning.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<OpenclDeviceProp, XmlError> {
        let mut p = OpenclDeviceProp::default();
        if tag.is_empty() {
            return Ok(p);
        }
        let parent = tag.name().to_owned();
        while let Some(t) = r.next_child()? {
            match t.name() {
                "name" => p.name = r.string(&t)?,
                "vendor" => p.vendor = r.string(&t)?,
                "vendor_id" => p.vendor_id = r.num_or(&t, 0)?,
                "available" => p.available = r.flag(&t)?,
                "half_fp_config" => p.half_fp_config = r.num_or(&t, 0)?,
                "single_fp_config" => p.single_fp_config = r.num_or(&t, 0)?,
                "double_fp_config" => p.double_fp_config = r.num_or(&t, 0)?,
                "endian_little" => p.endian_little = r.flag(&t)?,
                "execution_capabilities" => p.execution_capabilities = r.num_or(&t, 0)?,
                "extensions" => p.extensions = r.string(&t)?,
                "global_mem_size" => p.global_mem_size = r.num_or(&t, 0)?,
                "local_mem_size" => p.local_mem_size = r.num_or(&t, 0)?,
                "max_clock_frequency" => p.max_clock_frequency = r.num_or(&t, 0)?,
                "max_compute_units" => p.max_compute_units = r.num_or(&t, 0)?,
                "nv_compute_capability_major" => p.nv_compute_capability_major = r.num_or(&t, 0)?,
                "nv_compute_capability_minor" => p.nv_compute_capability_minor = r.num_or(&t, 0)?,
                "amd_simd_per_compute_unit" => p.amd_simd_per_compute_unit = r.num_or(&t, 0)?,
                "amd_simd_width" => p.amd_simd_width = r.num_or(&t, 0)?,
                "amd_simd_instruction_width" => p.amd_simd_instruction_width = r.num_or(&t, 0)?,
                "opencl_platform_version" => p.opencl_platform_version = r.string(&t)?,
                "opencl_device_version" => p.opencl_device_version = r.string(&t)?,
                "opencl_driver_version" => p.opencl_driver_version = r.string(&t)?,
                _ => r.unknown(&t, &parent)?,
            }
        }
        Ok(p)
    }

    /// The device's OpenCL version as BOINC encodes it: `OpenCL 1.2 …` → 102; 0 when the
    /// version string does not start that way.
    pub fn device_version_int(&self) -> u32 {
        let rest = match self.opencl_device_version.strip_prefix("OpenCL ") {
            Some(r) => r,
            None => return 0,
        };
        let num: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let mut it = num.split('.');
        let major: u32 = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        let minor: u32 = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        100 * major + minor
    }
}

/// One `<opencl_cpu_prop>`: an OpenCL platform that offers the CPU as a device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenclCpuProp {
    /// `CL_PLATFORM_VENDOR` of the platform.
    pub platform_vendor: String,
    /// The CPU as that platform describes it.
    pub prop: OpenclDeviceProp,
}

impl OpenclCpuProp {
    /// Writes `<opencl_cpu_prop>`.
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("opencl_cpu_prop")
            .text("platform_vendor", &self.platform_vendor);
        self.prop.write(w, "opencl_cpu_info");
        w.close("opencl_cpu_prop");
    }

    /// The element as text, the form `HostInfo::opencl_cpu_props` keeps.
    pub fn to_xml(&self) -> String {
        let mut w = XmlWriter::new();
        self.write(&mut w);
        w.finish()
    }

    /// Reads `<opencl_cpu_prop>`.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<OpenclCpuProp, XmlError> {
        let mut c = OpenclCpuProp::default();
        if tag.is_empty() {
            return Ok(c);
        }
        while let Some(t) = r.next_child()? {
            match t.name() {
                "platform_vendor" => c.platform_vendor = r.string(&t)?,
                "opencl_cpu_info" => c.prop = OpenclDeviceProp::read(r, &t)?,
                _ => r.unknown(&t, "opencl_cpu_prop")?,
            }
        }
        Ok(c)
    }

    /// Parses one kept `<opencl_cpu_prop>` text.
    pub fn parse(text: &str) -> Result<OpenclCpuProp, XmlError> {
        let mut r = XmlReader::new(text, "opencl_cpu_prop");
        let t = r.root("opencl_cpu_prop")?;
        OpenclCpuProp::read(&mut r, &t)
    }
}

/// GPU vendors BOINC describes through OpenCL alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenclGpuKind {
    /// AMD/ATI GPUs: `<coproc_ati>`, resource type `ATI`.
    Amd,
    /// Intel GPUs: `<coproc_intel_gpu>`, resource type `intel_gpu`.
    Intel,
}

impl OpenclGpuKind {
    /// The coproc element's name.
    pub fn element(self) -> &'static str {
        match self {
            OpenclGpuKind::Amd => "coproc_ati",
            OpenclGpuKind::Intel => "coproc_intel_gpu",
        }
    }

    /// The resource type name projects use.
    pub fn rsc_type(self) -> &'static str {
        match self {
            OpenclGpuKind::Amd => "ATI",
            OpenclGpuKind::Intel => "intel_gpu",
        }
    }
}

/// An AMD or Intel GPU type found through OpenCL: the best device's properties, how many
/// devices are used, and the figures the official client derives.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenclGpu {
    /// Which vendor.
    pub kind: OpenclGpuKind,
    /// Usable devices.
    pub count: u32,
    /// Peak FLOPS of one device.
    pub peak_flops: f64,
    /// Free memory of one device, bytes (OpenCL reports only the total).
    pub available_ram: f64,
    /// The best device.
    pub prop: OpenclDeviceProp,
}

impl OpenclGpu {
    /// The coproc element for `<coprocs>`: `<coproc_ati>` (CAL fields as the official client
    /// writes them when only OpenCL found the GPU) or `<coproc_intel_gpu>`.
    pub fn to_coproc(&self) -> OtherCoproc {
        let mut w = XmlWriter::new();
        w.num("count", self.count)
            .text("name", &self.prop.name)
            .f64("available_ram", self.available_ram);
        if self.kind == OpenclGpuKind::Amd {
            w.bool01("have_cal", false);
        }
        w.bool01("have_opencl", true)
            .f64("peak_flops", self.peak_flops);
        if self.kind == OpenclGpuKind::Amd {
            w.text("CALVersion", "")
                .num("target", 0)
                .num("localRAM", self.prop.global_mem_size / (1024 * 1024))
                .num("uncachedRemoteRAM", 0)
                .num("cachedRemoteRAM", 0)
                .num("engineClock", self.prop.max_clock_frequency)
                .num("memoryClock", 0)
                .num("wavefrontSize", 0)
                .num("numberOfSIMD", 0)
                .num("doublePrecision", 0)
                .num("pitch_alignment", 0)
                .num("surface_alignment", 0)
                .num("maxResource1DWidth", 0)
                .num("maxResource2DWidth", 0)
                .num("maxResource2DHeight", 0);
        }
        let mut raw = w.finish();
        raw.push_str(&self.prop.to_xml("coproc_opencl"));
        OtherCoproc {
            element: self.kind.element().to_owned(),
            rsc_type: self.kind.rsc_type().to_owned(),
            count: self.count,
            peak_flops: self.peak_flops,
            request: None,
            raw: raw.trim_end().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{Coprocs, HostInfo, HostInfoForm};

    fn pocl() -> OpenclDeviceProp {
        OpenclDeviceProp {
            name: "pthread-skylake-avx512-AMD EPYC".into(),
            vendor: "AuthenticAMD".into(),
            vendor_id: 32902,
            available: true,
            half_fp_config: 0,
            single_fp_config: 191,
            double_fp_config: 191,
            endian_little: true,
            execution_capabilities: 3,
            extensions: "cl_khr_byte_addressable_store cl_khr_fp64".into(),
            global_mem_size: 23_129_018_368,
            local_mem_size: 1_048_576,
            max_clock_frequency: 2596,
            max_compute_units: 2,
            opencl_platform_version: "OpenCL 3.0 PoCL 3.1+debian  Linux".into(),
            opencl_device_version: "OpenCL 3.0 PoCL HSTR: pthread-x86_64".into(),
            opencl_driver_version: "3.1+debian".into(),
            ..OpenclDeviceProp::default()
        }
    }

    #[test]
    fn cpu_prop_writes_every_field_in_order_and_reads_back() {
        let c = OpenclCpuProp {
            platform_vendor: "The pocl project".into(),
            prop: pocl(),
        };
        let text = c.to_xml();
        let names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix('<'))
            .filter(|l| !l.starts_with('/'))
            .map(|l| l.split(['>', '/']).next().unwrap_or(""))
            .collect();
        assert_eq!(
            names,
            [
                "opencl_cpu_prop",
                "platform_vendor",
                "opencl_cpu_info",
                "name",
                "vendor",
                "vendor_id",
                "available",
                "half_fp_config",
                "single_fp_config",
                "double_fp_config",
                "endian_little",
                "execution_capabilities",
                "extensions",
                "global_mem_size",
                "local_mem_size",
                "max_clock_frequency",
                "max_compute_units",
                "nv_compute_capability_major",
                "nv_compute_capability_minor",
                "amd_simd_per_compute_unit",
                "amd_simd_width",
                "amd_simd_instruction_width",
                "opencl_platform_version",
                "opencl_device_version",
                "opencl_driver_version",
            ]
        );
        assert!(text.contains("<vendor_id>32902</vendor_id>"), "{text}");
        assert!(text.contains("<available>1</available>"), "{text}");
        assert_eq!(OpenclCpuProp::parse(&text).expect("parses"), c);
    }

    #[test]
    fn device_version_is_encoded_like_the_official_client() {
        let mut p = pocl();
        assert_eq!(p.device_version_int(), 300);
        p.opencl_device_version = "OpenCL 1.2 AMD-APP (3444.0)".into();
        assert_eq!(p.device_version_int(), 102);
        p.opencl_device_version = "garbage".into();
        assert_eq!(p.device_version_int(), 0);
    }

    #[test]
    fn amd_and_intel_coprocs_read_back_with_their_type_count_and_opencl_block() {
        let mut prop = pocl();
        prop.name = "Radeon RX 6800".into();
        prop.amd_simd_width = 16;
        let amd = OpenclGpu {
            kind: OpenclGpuKind::Amd,
            count: 2,
            peak_flops: 1.5e13,
            available_ram: 1.6e10,
            prop: prop.clone(),
        }
        .to_coproc();
        let intel = OpenclGpu {
            kind: OpenclGpuKind::Intel,
            count: 1,
            peak_flops: 4e11,
            available_ram: 2e9,
            prop,
        }
        .to_coproc();
        let host = HostInfo {
            coprocs: Coprocs {
                nvidia: None,
                other: vec![amd.clone(), intel.clone()],
            },
            ..HostInfo::default()
        };
        let mut w = XmlWriter::new();
        host.write(&mut w, HostInfoForm::STATE_FILE);
        let text = w.finish();
        assert!(text.contains("<coproc_ati>"), "{text}");
        assert!(text.contains("<have_cal>0</have_cal>"), "{text}");
        assert!(text.contains("<localRAM>"), "{text}");
        assert!(text.contains("<coproc_intel_gpu>"), "{text}");
        assert!(
            text.contains("<amd_simd_width>16</amd_simd_width>"),
            "{text}"
        );
        let mut r = XmlReader::new(&text, "h.xml");
        let t = r.root("host_info").expect("root");
        let back = HostInfo::read(&mut r, &t).expect("reads");
        let other = &back.coprocs.other;
        assert_eq!(other.len(), 2);
        assert_eq!(
            (
                other[0].rsc_type.as_str(),
                other[0].count,
                other[0].peak_flops
            ),
            ("ATI", 2, 1.5e13)
        );
        assert_eq!(
            (
                other[1].rsc_type.as_str(),
                other[1].count,
                other[1].peak_flops
            ),
            ("intel_gpu", 1, 4e11)
        );
        // The OpenCL block survives as a whole element.
        let block = other[1]
            .raw
            .split("<coproc_opencl>")
            .nth(1)
            .expect("coproc_opencl kept");
        assert!(block.contains("<name>Radeon RX 6800</name>"), "{block}");
    }
}
