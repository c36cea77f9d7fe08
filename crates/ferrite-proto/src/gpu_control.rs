//! `ferrite_gpu_control.xml` (Ferrite only, in the data directory): the volunteer's control
//! over each GPU and processing resource for every project at once, which no BOINC client
//! has. GPUs are named by type and device number or by UUID; a resource may be set to finish
//! its started tasks and then stop.
//!
//! ```xml
//! <ferrite_gpu_control>
//!     <exclude_gpu><type>NVIDIA</type><device_num>1</device_num></exclude_gpu>
//!     <exclude_gpu><uuid>GPU-5c1e8a4e-0000-0000-0000-000000000000</uuid></exclude_gpu>
//!     <finish_then_stop>intel_gpu</finish_then_stop>
//! </ferrite_gpu_control>
//! ```
//!
//! The same selections are written on `ferrited`'s command line as `TYPE:N` or a UUID
//! ([`GpuSelector::parse_spec`]).

use crate::xml::{Parsed, Tag, XmlError, XmlReader, XmlWriter};

/// The file's name in the data directory.
pub const FILE_NAME: &str = "ferrite_gpu_control.xml";

/// One GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuSelector {
    /// A device of a type: `NVIDIA`, `ATI`, `intel_gpu`, … and its device number.
    Device {
        /// The resource type as projects name it.
        rsc_type: String,
        /// The device number (as apps are told it).
        device_num: u32,
    },
    /// A device by its UUID (NVIDIA's `GPU-…`, as `nvidia-smi -L` prints it).
    Uuid(String),
}

impl GpuSelector {
    /// Parses `TYPE:N` (`NVIDIA:1`, `ATI:0`, `intel_gpu:0`) or a UUID (anything else that
    /// has no colon, e.g. `GPU-5c1e…`).
    pub fn parse_spec(s: &str) -> Result<GpuSelector, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("empty GPU selection".into());
        }
        match s.rsplit_once(':') {
            Some((t, n)) => {
                let device_num = n
                    .trim()
                    .parse::<u32>()
                    .map_err(|_| format!("`{s}`: expected TYPE:N (e.g. NVIDIA:1) or a GPU UUID"))?;
                if t.trim().is_empty() {
                    return Err(format!("`{s}`: no GPU type before the colon"));
                }
                Ok(GpuSelector::Device {
                    rsc_type: t.trim().to_owned(),
                    device_num,
                })
            }
            None => Ok(GpuSelector::Uuid(s.to_owned())),
        }
    }
}

impl std::fmt::Display for GpuSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuSelector::Device {
                rsc_type,
                device_num,
            } => write!(f, "{rsc_type}:{device_num}"),
            GpuSelector::Uuid(u) => f.write_str(u),
        }
    }
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GpuControlFile {
    /// GPUs no project uses.
    pub exclude: Vec<GpuSelector>,
    /// Resources (`CPU`, `NVIDIA`, `ATI`, `intel_gpu`, …) that finish their started tasks and
    /// then stop.
    pub finish_then_stop: Vec<String>,
}

fn read_exclude(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Option<GpuSelector>, XmlError> {
    let (mut rsc_type, mut device_num, mut uuid) = (String::new(), None, String::new());
    if tag.is_empty() {
        r.warn(tag, "empty; ignored");
        return Ok(None);
    }
    while let Some(c) = r.next_child()? {
        match c.name() {
            "type" => rsc_type = r.string(&c)?,
            "device_num" => device_num = r.num::<u32>(&c)?,
            "uuid" => uuid = r.string(&c)?,
            _ => r.unknown(&c, "exclude_gpu")?,
        }
    }
    Ok(if !uuid.trim().is_empty() {
        Some(GpuSelector::Uuid(uuid.trim().to_owned()))
    } else if let (false, Some(device_num)) = (rsc_type.trim().is_empty(), device_num) {
        Some(GpuSelector::Device {
            rsc_type: rsc_type.trim().to_owned(),
            device_num,
        })
    } else {
        r.warn(
            tag,
            "needs <uuid>, or <type> and <device_num>; ignored".to_owned(),
        );
        None
    })
}

impl GpuControlFile {
    /// Reads the content of `<ferrite_gpu_control>`.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<GpuControlFile, XmlError> {
        let mut f = GpuControlFile::default();
        if tag.is_empty() {
            return Ok(f);
        }
        while let Some(c) = r.next_child()? {
            match c.name() {
                "exclude_gpu" => {
                    if let Some(s) = read_exclude(r, &c)? {
                        f.exclude.push(s);
                    }
                }
                "finish_then_stop" => {
                    let s = r.string(&c)?;
                    if s.trim().is_empty() {
                        r.warn(&c, "no resource named; ignored");
                    } else {
                        f.finish_then_stop.push(s.trim().to_owned());
                    }
                }
                _ => r.unknown(&c, "ferrite_gpu_control")?,
            }
        }
        Ok(f)
    }

    /// Writes `<ferrite_gpu_control>`.
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("ferrite_gpu_control");
        for s in &self.exclude {
            w.open("exclude_gpu");
            match s {
                GpuSelector::Device {
                    rsc_type,
                    device_num,
                } => {
                    w.text("type", rsc_type).num("device_num", *device_num);
                }
                GpuSelector::Uuid(u) => {
                    w.text("uuid", u);
                }
            }
            w.close("exclude_gpu");
        }
        for r in &self.finish_then_stop {
            w.text("finish_then_stop", r);
        }
        w.close("ferrite_gpu_control");
    }

    /// Parses the file; `file` names it in errors and warnings.
    pub fn parse(text: &str, file: &str) -> Result<Parsed<Self>, XmlError> {
        crate::xml::parse_document(text, file, "ferrite_gpu_control", Self::read)
    }

    /// The document.
    pub fn to_xml(&self) -> String {
        crate::xml::write_document(|w| self.write(w))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_file_reads_devices_uuids_and_stops_and_round_trips() {
        let text = "<ferrite_gpu_control>\n\
            <exclude_gpu><type>NVIDIA</type><device_num>1</device_num></exclude_gpu>\n\
            <exclude_gpu><uuid> GPU-5c1e </uuid></exclude_gpu>\n\
            <exclude_gpu><type>ATI</type></exclude_gpu>\n\
            <finish_then_stop>intel_gpu</finish_then_stop>\n\
            <finish_then_stop>CPU</finish_then_stop>\n\
            </ferrite_gpu_control>\n";
        let p = GpuControlFile::parse(text, FILE_NAME).expect("parse");
        assert_eq!(
            p.value.exclude,
            [
                GpuSelector::Device {
                    rsc_type: "NVIDIA".into(),
                    device_num: 1
                },
                GpuSelector::Uuid("GPU-5c1e".into())
            ]
        );
        assert_eq!(p.value.finish_then_stop, ["intel_gpu", "CPU"]);
        assert_eq!(
            p.warnings.len(),
            1,
            "the ATI entry has no device: {:?}",
            p.warnings
        );
        assert_eq!(p.warnings[0].line, 4);
        let again = GpuControlFile::parse(&p.value.to_xml(), "again").expect("reparse");
        assert_eq!(again.value, p.value);
        assert!(again.warnings.is_empty());
    }

    #[test]
    fn command_line_specs() {
        assert_eq!(
            GpuSelector::parse_spec("NVIDIA:1"),
            Ok(GpuSelector::Device {
                rsc_type: "NVIDIA".into(),
                device_num: 1
            })
        );
        assert_eq!(
            GpuSelector::parse_spec("GPU-5c1e8a4e-1b2c"),
            Ok(GpuSelector::Uuid("GPU-5c1e8a4e-1b2c".into()))
        );
        assert!(GpuSelector::parse_spec("ATI:x").is_err());
        assert!(GpuSelector::parse_spec(":1").is_err());
        assert!(GpuSelector::parse_spec(" ").is_err());
        assert_eq!(
            GpuSelector::parse_spec("intel_gpu:0").unwrap().to_string(),
            "intel_gpu:0"
        );
    }

    #[test]
    fn broken_text_is_an_error() {
        assert!(GpuControlFile::parse("<ferrite_gpu_control><exclude_gpu>", "f").is_err());
    }
}
