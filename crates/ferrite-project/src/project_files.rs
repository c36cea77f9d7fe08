//! A project's own files (`<project_files>` in a scheduler reply, from the server's
//! `project_files.xml`: a logo the Manager shows as `stat_icon`, a slide show, ...).
//!
//! As the official client does (`client/project.cpp`: `link_project_files`,
//! `write_symlink_for_project_file`; `client/cs_files.cpp`, `client/client_state.cpp`
//! garbage collection): each file a `<file_ref>` names is downloaded like any other file,
//! is kept while the project lists it, and once present gets a link file in the project
//! directory named after the `<open_name>`, holding `<soft_link>projects/<dir>/<file>
//! </soft_link>` (the path relative to the data directory). The daemon writes what
//! [`links`] returns and downloads what [`to_download`] names.

use ferrite_proto::account::escape_project_url;
use ferrite_proto::client_state::ProjectState;

/// One link file to write in the project directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The link file's name in the project directory (the `<open_name>`).
    pub open_name: String,
    /// The physical file it points to.
    pub file_name: String,
    /// What the link file holds.
    pub text: String,
}

/// The names of the files `<project_files>` refers to, in its order.
pub fn referenced(ps: &ProjectState) -> impl Iterator<Item = &str> {
    ps.project_files.iter().map(|fr| fr.file_name.as_str())
}

/// Whether `<project_files>` refers to `file`.
pub fn is_project_file(ps: &ProjectState, file: &str) -> bool {
    referenced(ps).any(|n| n == file)
}

/// The project files to fetch: listed, not present, not failed, with a download URL.
pub fn to_download(ps: &ProjectState) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for name in referenced(ps) {
        if out.contains(&name) {
            continue;
        }
        if ps
            .file(name)
            .is_some_and(|f| f.status == 0 && !f.download_urls.is_empty())
        {
            out.push(name);
        }
    }
    out
}

/// The link files for the project files that are present (all of them, or only those of
/// `only`, a file that just arrived). A reference without an open name, or whose open name
/// is the name of a file of the project (its own or another's), has no link: writing it
/// would replace that file.
pub fn links(ps: &ProjectState, only: Option<&str>) -> Vec<Link> {
    let dir = escape_project_url(&ps.project.master_url);
    ps.project_files
        .iter()
        .filter(|fr| only.is_none_or(|o| o == fr.file_name))
        .filter(|fr| !fr.open_name.is_empty() && ps.file(&fr.open_name).is_none())
        .filter(|fr| ps.file(&fr.file_name).is_some_and(|f| f.status == 1))
        .map(|fr| Link {
            open_name: fr.open_name.clone(),
            file_name: fr.file_name.clone(),
            text: format!("<soft_link>projects/{dir}/{}</soft_link>\n", fr.file_name),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_proto::client_state::{FileInfo, FileRef};

    fn state() -> ProjectState {
        let mut ps = ProjectState::default();
        ps.project.master_url = "http://127.0.0.1:8080/test/".into();
        ps.files.push(FileInfo {
            name: "logo_181.png".into(),
            download_urls: vec!["http://127.0.0.1:8080/test/download/logo_181.png".into()],
            ..FileInfo::default()
        });
        ps.project_files.push(FileRef {
            file_name: "logo_181.png".into(),
            open_name: "stat_icon".into(),
            ..FileRef::default()
        });
        ps
    }

    #[test]
    fn a_listed_file_not_present_is_fetched_and_has_no_link_yet() {
        let ps = state();
        assert_eq!(to_download(&ps), vec!["logo_181.png"]);
        assert!(links(&ps, None).is_empty());
        assert!(is_project_file(&ps, "logo_181.png"));
        assert!(!is_project_file(&ps, "other"));
    }

    #[test]
    fn a_present_file_gets_its_link_under_the_open_name() {
        let mut ps = state();
        ps.files[0].status = 1;
        assert!(to_download(&ps).is_empty());
        let want = vec![Link {
            open_name: "stat_icon".into(),
            file_name: "logo_181.png".into(),
            text: "<soft_link>projects/127.0.0.1_8080_test/logo_181.png</soft_link>\n".into(),
        }];
        assert_eq!(links(&ps, None), want);
        assert_eq!(links(&ps, Some("logo_181.png")), want);
        assert!(links(&ps, Some("other")).is_empty());
    }

    #[test]
    fn one_file_under_two_open_names_gets_two_links_and_one_download() {
        let mut ps = state();
        ps.project_files.push(FileRef {
            file_name: "logo_181.png".into(),
            open_name: "slideshow_00".into(),
            ..FileRef::default()
        });
        assert_eq!(to_download(&ps), vec!["logo_181.png"]);
        ps.files[0].status = 1;
        let names: Vec<String> = links(&ps, None).into_iter().map(|l| l.open_name).collect();
        assert_eq!(names, ["stat_icon", "slideshow_00"]);
    }

    #[test]
    fn no_link_replaces_a_file_of_the_project_or_has_no_name() {
        let mut ps = state();
        ps.files[0].status = 1;
        ps.project_files[0].open_name = "logo_181.png".into();
        assert!(links(&ps, None).is_empty());
        ps.project_files[0].open_name.clear();
        assert!(links(&ps, None).is_empty());
        ps.files.push(FileInfo {
            name: "wu_1_in".into(),
            ..FileInfo::default()
        });
        ps.project_files[0].open_name = "wu_1_in".into();
        assert!(links(&ps, None).is_empty());
    }

    #[test]
    fn a_failed_or_urlless_file_is_not_fetched() {
        let mut ps = state();
        ps.files[0].status = -119;
        assert!(to_download(&ps).is_empty());
        ps.files[0].status = 0;
        ps.files[0].download_urls.clear();
        assert!(to_download(&ps).is_empty());
    }
}
