//! App versions the volunteer's `cc_config.xml` rules out (`APP_VERSION::
//! disallowed_by_config` in BOINC): `dont_use_vbox` drops versions whose plan class names
//! `vbox`, `dont_use_docker` those naming `docker`. The official client drops them when it
//! reads the state file and `app_info.xml`; their tasks cannot run.

use ferrite_proto::client_state::ProjectState;

/// Why a version of plan class `plan_class` is not used, if it is not.
pub fn disallowed_reason(
    plan_class: &str,
    dont_use_vbox: bool,
    dont_use_docker: bool,
) -> Option<&'static str> {
    if dont_use_vbox && plan_class.contains("vbox") {
        Some("Skipping VirtualBox app version: disabled in cc_config.xml")
    } else if dont_use_docker && plan_class.contains("docker") {
        Some("Skipping Docker app version: disabled in cc_config.xml")
    } else {
        None
    }
}

/// Drops the versions of `ps` that the options rule out; returns one line for each
/// (`reason (app version plan_class)`).
pub fn drop_disallowed(
    ps: &mut ProjectState,
    dont_use_vbox: bool,
    dont_use_docker: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    ps.app_versions.retain(|v| {
        match disallowed_reason(&v.plan_class, dont_use_vbox, dont_use_docker) {
            Some(why) => {
                out.push(format!(
                    "{why} ({} {} {})",
                    v.app_name, v.version_num, v.plan_class
                ));
                false
            }
            None => true,
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_proto::client_state::AppVersion;

    #[test]
    fn only_the_switched_off_kinds_are_dropped() {
        let mut ps = ProjectState::default();
        for pc in ["", "vbox64_mt", "docker", "cuda", "opencl_nvidia_vbox"] {
            ps.app_versions.push(AppVersion {
                app_name: "a".into(),
                plan_class: pc.into(),
                ..AppVersion::default()
            });
        }
        assert!(drop_disallowed(&mut ps.clone(), false, false).is_empty());
        let mut p = ps.clone();
        let lines = drop_disallowed(&mut p, true, false);
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].starts_with("Skipping VirtualBox app version"),
            "{lines:?}"
        );
        let left: Vec<&str> = p
            .app_versions
            .iter()
            .map(|v| v.plan_class.as_str())
            .collect();
        assert_eq!(left, ["", "docker", "cuda"]);
        let lines = drop_disallowed(&mut p, true, true);
        assert_eq!(lines.len(), 1);
        let left: Vec<&str> = p
            .app_versions
            .iter()
            .map(|v| v.plan_class.as_str())
            .collect();
        assert_eq!(left, ["", "cuda"]);
    }
}
