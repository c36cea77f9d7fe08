//! Parsing of `/proc/cpuinfo` into the CPU description BOINC reports: vendor, model (with the
//! family/model/stepping or implementer/part suffix the official client appends), feature
//! flags and cache size. Pure functions over text so that fixtures of other machines can be
//! tested on any host.

/// Which `/proc/cpuinfo` dialect to expect; the kernel writes different keys per architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuArch {
    /// x86 and x86_64: `vendor_id`, `model name`, `cpu family`, `model`, `stepping`, `flags`.
    X86,
    /// ARM and aarch64: `CPU implementer`, `CPU part`, …, `Features`, optional `Hardware`.
    Arm,
    /// Anything else: only the generic keys are read.
    Other,
}

impl CpuArch {
    /// The architecture this crate was compiled for.
    pub fn native() -> Self {
        if cfg!(any(target_arch = "x86", target_arch = "x86_64")) {
            CpuArch::X86
        } else if cfg!(any(target_arch = "arm", target_arch = "aarch64")) {
            CpuArch::Arm
        } else {
            CpuArch::Other
        }
    }
}

/// What `/proc/cpuinfo` tells about the first CPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuInfo {
    /// `p_vendor`: `GenuineIntel`, `AuthenticAMD`, or `ARM` on ARM machines.
    pub vendor: String,
    /// `p_model`: model name plus the bracketed identification suffix.
    pub model: String,
    /// `p_features`: space-separated flags, as the kernel lists them.
    pub features: String,
    /// `m_cache` in bytes, when the kernel reports a cache size (x86 only).
    pub cache_bytes: Option<f64>,
    /// The ARM `Hardware` lines (the SoC or board, "BCM2835" on a Raspberry Pi), joined by a
    /// space as the official client joins them into `product_name`.
    pub hardware: Option<String>,
    /// The ARM `Model` line Raspberry Pi kernels add ("Raspberry Pi 4 Model B Rev 1.4"): the
    /// board's own name, as `/proc/device-tree/model` gives it. The official client does not
    /// read it; Ferrite uses it for `product_name` when there is no `Hardware` line.
    pub board_model: Option<String>,
}

fn value_of(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.split_once(':')?;
    Some((key.trim(), value.trim()))
}

/// Parses the text of `/proc/cpuinfo`. Only the first occurrence of each key counts (the
/// first CPU describes the machine, as in the official client).
pub fn parse_cpuinfo(text: &str, arch: CpuArch) -> CpuInfo {
    let mut vendor: Option<String> = None;
    let mut model_name: Option<String> = None;
    let mut features: Option<String> = None;
    let mut cache: Option<f64> = None;
    let mut hardware: Option<String> = None;
    let mut board_model: Option<String> = None;
    let mut family: Option<i64> = None;
    let mut model_no: Option<i64> = None;
    let mut stepping: Option<i64> = None;
    // ARM identification, in the order the official client prints it.
    let mut arm_ids: [(&str, &str, Option<String>); 5] = [
        ("CPU implementer", "Impl", None),
        ("CPU architecture", "Arch", None),
        ("CPU variant", "Variant", None),
        ("CPU part", "Part", None),
        ("CPU revision", "Rev", None),
    ];

    for line in text.lines() {
        let Some((key, value)) = value_of(line) else {
            continue;
        };
        match key {
            "vendor_id" | "system type" if vendor.is_none() => vendor = Some(value.to_owned()),
            "model name" | "cpu model" if model_name.is_none() => {
                model_name = Some(value.to_owned())
            }
            "Processor" if arch == CpuArch::Arm && model_name.is_none() => {
                model_name = Some(value.to_owned())
            }
            // Every `Hardware` line counts, joined by a space (the official client appends
            // each to `product_name`).
            "Hardware" if arch == CpuArch::Arm && !value.is_empty() => match hardware.as_mut() {
                Some(h) => {
                    h.push(' ');
                    h.push_str(value);
                }
                None => hardware = Some(value.to_owned()),
            },
            "Model" if arch == CpuArch::Arm && board_model.is_none() && !value.is_empty() => {
                board_model = Some(value.to_owned())
            }
            "cpu family" if family.is_none() => family = value.parse().ok(),
            "model" if model_no.is_none() => model_no = value.parse().ok(),
            "stepping" if stepping.is_none() => stepping = value.parse().ok(),
            "cache size" if cache.is_none() => {
                // "512 KB"
                let n: Option<f64> = value.split_whitespace().next().and_then(|n| n.parse().ok());
                cache = n.map(|kb| kb * 1024.0);
            }
            "flags" | "features" | "Features" if features.is_none() && !value.is_empty() => {
                features = Some(value.to_owned())
            }
            _ => {
                if arch == CpuArch::Arm {
                    for (k, _, slot) in arm_ids.iter_mut() {
                        if *k == key && slot.is_none() {
                            *slot = Some(value.to_owned());
                        }
                    }
                }
            }
        }
    }

    let mut model = match arch {
        // ARM boards without a model name fall back to the board name.
        CpuArch::Arm => model_name.or_else(|| hardware.clone()).unwrap_or_default(),
        _ => model_name.unwrap_or_default(),
    };
    match arch {
        CpuArch::X86 | CpuArch::Other => {
            if family.is_some() || model_no.is_some() || stepping.is_some() {
                let mut parts = Vec::new();
                if let Some(f) = family {
                    parts.push(format!("Family {f}"));
                }
                if let Some(m) = model_no {
                    parts.push(format!("Model {m}"));
                }
                if let Some(s) = stepping {
                    parts.push(format!("Stepping {s}"));
                }
                model = format!("{model} [{}]", parts.join(" "));
            }
        }
        CpuArch::Arm => {
            let parts: Vec<String> = arm_ids
                .iter()
                .filter_map(|(_, label, v)| v.as_ref().map(|v| format!("{label} {v}")))
                .collect();
            if !parts.is_empty() {
                model = format!("{model} [{}]", parts.join(" "));
            }
        }
    }

    CpuInfo {
        vendor: match arch {
            CpuArch::Arm => "ARM".to_owned(),
            _ => vendor.unwrap_or_else(|| "unknown".to_owned()),
        },
        model: collapse_whitespace(&model),
        features: features.unwrap_or_default(),
        cache_bytes: cache,
        hardware,
        board_model,
    }
}

/// Collapses runs of white space to one space and trims the ends.
pub(crate) fn collapse_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_text_gives_unknown_vendor_and_empty_model() {
        let info = parse_cpuinfo("garbage\n\n", CpuArch::X86);
        assert_eq!(info.vendor, "unknown");
        assert_eq!(info.model, "");
        assert_eq!(info.cache_bytes, None);
    }

    #[test]
    fn first_cpu_wins() {
        let text = "processor\t: 0\nmodel name\t: A\nflags\t\t: fpu\n\nprocessor\t: 1\nmodel name\t: B\nflags\t\t: sse\n";
        let info = parse_cpuinfo(text, CpuArch::Other);
        assert_eq!(info.model, "A");
        assert_eq!(info.features, "fpu");
    }
}
