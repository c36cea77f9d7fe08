//! The configuration files a person or a project writes: `global_prefs.xml` with
//! `global_prefs_override.xml` merged on top, `cc_config.xml` and `app_config.xml`. What is
//! written back must parse again.
//!
//! Input: byte 0 picks the document; for the prefs merge the rest is split at the first
//! NUL into the network prefs and the override file.
#![no_main]

use ferrite_proto::app_config::AppConfig;
use ferrite_proto::cc_config::CcConfig;
use ferrite_proto::prefs::{working_prefs, GlobalPrefs, OverrideStatus};
use libfuzzer_sys::fuzz_target;

fn exercise(p: &GlobalPrefs) {
    for active in [false, true] {
        let _ = p.effective_cpu_usage_limit(active);
        let _ = p.effective_suspend_cpu_usage(active);
        let _ = p.usable_cpus(8, 0, active);
        let _ = p.usable_cpus(1, -1, active);
        let _ = p.available_ram(16e9, active);
    }
    let _ = p.allowed_disk_usage(1e9, 100e9, 50e9);
    let _ = p.allowed_swap(4e9);
    for h in [0.0, 5.5, 23.99] {
        for d in 0..7 {
            let _ = p.cpu_suspended_at(h, d);
            let _ = p.net_suspended_at(h, d);
        }
    }
    let xml = p.to_xml();
    match GlobalPrefs::parse(&xml, "global_prefs.xml") {
        Ok(again) => {
            let rewritten = again.value.to_xml();
            assert_eq!(
                xml, rewritten,
                "prefs change when written, read and written again"
            );
        }
        Err(e) => panic!("written prefs do not parse again: {e}\n{xml}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match sel % 4 {
        0 => {
            let (network, over) = match text.split_once('\0') {
                Some((n, o)) => (Some(n), Some(o)),
                None => (Some(text), None),
            };
            let w = working_prefs(
                network,
                over,
                "",
                &|src| (!src.is_empty()).then(|| "home".to_owned()),
                1.7e9,
            );
            exercise(&w.prefs);
            if let OverrideStatus::Applied(mask) = &w.override_file {
                // Empty when the override set no preference element.
                let xml = w.prefs.to_override_xml(mask);
                if !xml.is_empty() {
                    if let Err(e) = GlobalPrefs::parse(&xml, "global_prefs_override.xml") {
                        panic!("a written override does not parse again: {e}\n{xml}");
                    }
                }
            }
        }
        1 => {
            if let Ok(p) = CcConfig::parse(text, "cc_config.xml") {
                let xml = p.value.to_xml();
                match CcConfig::parse(&xml, "cc_config.xml") {
                    Ok(again) => assert_eq!(xml, again.value.to_xml(), "cc_config rewrite differs"),
                    Err(e) => panic!("a written cc_config does not parse again: {e}\n{xml}"),
                }
            }
        }
        2 => {
            if let Ok(p) = AppConfig::parse(text, "app_config.xml") {
                let xml = p.value.to_xml();
                match AppConfig::parse(&xml, "app_config.xml") {
                    Ok(again) => {
                        assert_eq!(xml, again.value.to_xml(), "app_config rewrite differs")
                    }
                    Err(e) => panic!("a written app_config does not parse again: {e}\n{xml}"),
                }
                let _ = p.value.report_immediately("app");
            }
        }
        _ => {
            if let Ok(p) = GlobalPrefs::parse(text, "global_prefs.xml") {
                exercise(&p.value);
            }
        }
    }
});
