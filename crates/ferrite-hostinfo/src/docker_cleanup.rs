//! Removing the Docker/Podman images and containers of BOINC jobs that are gone, as the
//! official client does (`client/cs_apps.cpp: cleanup_docker`, `lib/util.cpp`).
//!
//! BOINC's `docker_wrapper` names a job's image `boinc__<project>__<workunit>` and its
//! container `boinc__<project>__<result>` (the project's escaped URL, all lowercase). The
//! clean-up lists the containers (`ps --all`) and images (`images`), and removes
//! (`rm -f NAME`, `image rm NAME`) every BOINC one that no job still running uses; other
//! images and containers are never touched.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// The prefix of every BOINC image and container name.
pub const BOINC_PREFIX: &str = "boinc__";

/// The image name of workunit `wu` of the project whose escaped URL is `project_esc`.
pub fn image_name(project_esc: &str, wu: &str) -> String {
    format!(
        "{BOINC_PREFIX}{}__{}",
        project_esc.to_lowercase(),
        wu.to_lowercase()
    )
}

/// The container name of result `result` of the project whose escaped URL is `project_esc`.
pub fn container_name(project_esc: &str, result: &str) -> String {
    image_name(project_esc, result)
}

/// The image name in one line of `images` output (`localhost/NAME  TAG  ID …`).
pub fn parse_image_line(line: &str) -> Option<&str> {
    if line.contains("REPOSITORY") {
        return None;
    }
    let rest = line.strip_prefix("localhost/")?;
    let end = rest.find(' ')?;
    Some(&rest[..end])
}

/// The container name in one line of `ps --all` output (its last column).
pub fn parse_container_line(line: &str) -> Option<&str> {
    if line.contains("CONTAINER") {
        return None;
    }
    let line = line.trim_end();
    let i = line.rfind(' ')?;
    Some(line[i + 1..].trim()).filter(|s| !s.is_empty())
}

/// The images and containers of jobs still running: kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InUse {
    /// Image names.
    pub images: BTreeSet<String>,
    /// Container names.
    pub containers: BTreeSet<String>,
}

/// What a clean-up did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cleanup {
    /// Containers removed.
    pub containers: Vec<String>,
    /// Images removed.
    pub images: Vec<String>,
    /// Commands that failed (`ps --all`, `rm -f NAME`, …), for the log.
    pub failed: Vec<String>,
}

/// What the clean-up removes, given the listings: BOINC containers and images not in use.
pub fn unused(ps_output: &str, images_output: &str, in_use: &InUse) -> (Vec<String>, Vec<String>) {
    let pick = |names: Vec<&str>, keep: &BTreeSet<String>| -> Vec<String> {
        let mut v: Vec<String> = names
            .into_iter()
            .filter(|n| n.starts_with(BOINC_PREFIX) && !keep.contains(*n))
            .map(str::to_owned)
            .collect();
        v.dedup();
        v
    };
    (
        pick(
            ps_output.lines().filter_map(parse_container_line).collect(),
            &in_use.containers,
        ),
        pick(
            images_output.lines().filter_map(parse_image_line).collect(),
            &in_use.images,
        ),
    )
}

/// Runs the clean-up with the CLI `program` (`podman` or `docker`): containers first, then
/// images, as the official client does.
pub fn clean_up(program: &Path, in_use: &InUse, timeout: Duration) -> Cleanup {
    let mut out = Cleanup::default();
    let run = |args: &[&str]| crate::docker::output_of(program, args, timeout);
    let ps = run(&["ps", "--all"]);
    if ps.is_none() {
        out.failed.push("ps --all".into());
    }
    let (containers, _) = unused(ps.as_deref().unwrap_or(""), "", in_use);
    for c in containers {
        if crate::docker::status_of(program, &["rm", "-f", &c], timeout) {
            out.containers.push(c);
        } else {
            out.failed.push(format!("rm -f {c}"));
        }
    }
    let images = run(&["images"]);
    if images.is_none() {
        out.failed.push("images".into());
    }
    let (_, images) = unused("", images.as_deref().unwrap_or(""), in_use);
    for i in images {
        if crate::docker::status_of(program, &["image", "rm", &i], timeout) {
            out.images.push(i);
        } else {
            out.failed.push(format!("image rm {i}"));
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const PS: &str = "CONTAINER ID  IMAGE                                      COMMAND               CREATED        STATUS                   PORTS       NAMES\n\
        6d4877e0d071  localhost/boinc__app_test__test_wu:latest  /bin/sh -c ./work...  43 hours ago   Exited (0) 21 hours ago              boinc__app_test__test_result\n\
        7d4877e0d071  localhost/boinc__p__wu2:latest  /bin/sh -c ./work...  1 hour ago   Up 1 hour              boinc__p__wu2_0\n\
        bf4ce6e19182  localhost/criu_test:latest  ./counter.sh  9 seconds ago  Up 9 seconds              competent_ishizaka\n";
    const IMAGES: &str =
        "REPOSITORY                          TAG         IMAGE ID      CREATED       SIZE\n\
        localhost/boinc__app_test__test_wu  latest      cbc1498dfc49  43 hours ago  121 MB\n\
        localhost/boinc__p__wu2  latest      cbc1498dfc50  1 hour ago  121 MB\n\
        docker.io/library/debian  latest  abc  2 days ago  120 MB\n\
        localhost/my_own_image  latest  abd  2 days ago  1 MB\n";

    #[test]
    fn names_are_the_official_ones() {
        assert_eq!(
            image_name("www.example.org_Proj", "WU_1"),
            "boinc__www.example.org_proj__wu_1"
        );
        assert_eq!(container_name("p", "R_0"), "boinc__p__r_0");
    }

    #[test]
    fn listings_parse_like_the_official_client() {
        let c: Vec<&str> = PS.lines().filter_map(parse_container_line).collect();
        assert_eq!(
            c,
            [
                "boinc__app_test__test_result",
                "boinc__p__wu2_0",
                "competent_ishizaka"
            ]
        );
        let i: Vec<&str> = IMAGES.lines().filter_map(parse_image_line).collect();
        assert_eq!(
            i,
            ["boinc__app_test__test_wu", "boinc__p__wu2", "my_own_image"]
        );
    }

    #[test]
    fn only_boinc_names_not_in_use_are_removed() {
        let in_use = InUse {
            images: ["boinc__p__wu2".to_owned()].into(),
            containers: ["boinc__p__wu2_0".to_owned()].into(),
        };
        let (c, i) = unused(PS, IMAGES, &in_use);
        assert_eq!(c, ["boinc__app_test__test_result"]);
        assert_eq!(i, ["boinc__app_test__test_wu"]);
        let (c, i) = unused(PS, IMAGES, &InUse::default());
        assert_eq!(c.len(), 2);
        assert_eq!(i.len(), 2);
    }

    #[test]
    fn a_fake_podman_is_told_to_remove_what_is_unused() {
        let d = tempfile::tempdir().expect("tmp");
        let log = d.path().join("calls");
        let p = d.path().join("podman");
        crate::test_support::write_script(
            &p,
            &format!(
                "echo \"$*\" >> {log}\ncase \"$1\" in\n\
                 ps) cat <<'EOF'\n{PS}EOF\n;;\nimages) cat <<'EOF'\n{IMAGES}EOF\n;;\n\
                 image) [ \"$3\" = boinc__p__wu2 ] && exit 1;;\nesac\nexit 0\n",
                log = log.display()
            ),
        );
        let r = clean_up(&p, &InUse::default(), Duration::from_secs(10));
        assert_eq!(
            r.containers,
            ["boinc__app_test__test_result", "boinc__p__wu2_0"]
        );
        assert_eq!(r.images, ["boinc__app_test__test_wu"]);
        assert_eq!(r.failed, ["image rm boinc__p__wu2"]);
        let calls = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            calls,
            "ps --all\nrm -f boinc__app_test__test_result\nrm -f boinc__p__wu2_0\nimages\n\
             image rm boinc__app_test__test_wu\nimage rm boinc__p__wu2\n"
        );
    }
}
