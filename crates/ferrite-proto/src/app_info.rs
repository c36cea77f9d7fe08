//! `app_info.xml` (per project, in `projects/<esc>/`): the anonymous platform. A volunteer who
//! runs their own build of a project's apps lists the apps, their files and their versions
//! here; the client then uses these instead of the project's and tells the server which
//! versions it has (`client/cs_statefile.cpp: parse_app_info`).
//!
//! The file holds `<app>`, `<file_info>` (or `<file>`) and `<app_version>` elements in any
//! order, in the state file's layout. One element that lacks a mandatory child (an app
//! without a name, say) is skipped with a warning, as the official client skips what it
//! cannot parse; text that is not XML or is cut short is an error.

use crate::client_state::{App, AppVersion, FileInfo, Form};
use crate::xml::{Parsed, Tag, Warning, XmlError, XmlReader, XmlWriter};

/// The whole `app_info.xml`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AppInfo {
    /// The apps, in file order.
    pub apps: Vec<App>,
    /// The files the versions use (present in the project directory; no URLs).
    pub files: Vec<FileInfo>,
    /// The versions, in file order.
    pub app_versions: Vec<AppVersion>,
}

/// Keeps `item`, or turns a missing mandatory element into a warning (the element is
/// skipped); other errors end the read.
fn keep_or_skip<T>(
    r: &mut XmlReader<'_>,
    tag: &Tag<'_>,
    item: Result<T, XmlError>,
    into: &mut Vec<T>,
) -> Result<(), XmlError> {
    match item {
        Ok(x) => into.push(x),
        Err(XmlError::MissingElement { element, .. }) => {
            r.warn(tag, format!("has no <{element}>; skipped"));
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

impl AppInfo {
    /// Reads the content of `<app_info>`.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<AppInfo, XmlError> {
        let mut info = AppInfo::default();
        if tag.is_empty() {
            return Ok(info);
        }
        while let Some(c) = r.next_child()? {
            match c.name() {
                "app" => {
                    let a = App::read(r, &c);
                    keep_or_skip(r, &c, a, &mut info.apps)?;
                }
                "file_info" | "file" => {
                    let f = FileInfo::read(r, &c);
                    keep_or_skip(r, &c, f, &mut info.files)?;
                }
                "app_version" => {
                    let v = AppVersion::read(r, &c);
                    keep_or_skip(r, &c, v, &mut info.app_versions)?;
                }
                _ => r.unknown(&c, "app_info")?,
            }
        }
        Ok(info)
    }

    /// Writes `<app_info>`: apps, then files, then versions.
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("app_info");
        for a in &self.apps {
            a.write(w);
        }
        for f in &self.files {
            f.write(w, Form::Reply);
        }
        for v in &self.app_versions {
            v.write(w, Form::State);
        }
        w.close("app_info");
    }

    /// Parses `app_info.xml`; `file` names it in errors and warnings.
    pub fn parse(text: &str, file: &str) -> Result<Parsed<Self>, XmlError> {
        crate::xml::parse_document(text, file, "app_info", Self::read)
    }

    /// The document.
    pub fn to_xml(&self) -> String {
        crate::xml::write_document(|w| self.write(w))
    }
}

/// Whether warning `w` says an element of `app_info.xml` was skipped (not merely an unknown
/// tag): the volunteer's file lost something they meant.
pub fn is_skipped_element(w: &Warning) -> bool {
    w.message.ends_with("; skipped")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const SAMPLE: &str = "<app_info>\n\
        <app>\n  <name>setiathome_v8</name>\n  <user_friendly_name>SETI@home v8</user_friendly_name>\n</app>\n\
        <file_info>\n  <name>my_seti_avx</name>\n  <executable/>\n</file_info>\n\
        <file_info>\n  <name>libcudart.so</name>\n</file_info>\n\
        <app_version>\n  <app_name>setiathome_v8</app_name>\n  <version_num>800</version_num>\n\
          <plan_class>cuda90</plan_class>\n  <avg_ncpus>0.1</avg_ncpus>\n\
          <coproc>\n    <type>NVIDIA</type>\n    <count>0.5</count>\n  </coproc>\n\
          <cmdline>-unroll 4</cmdline>\n\
          <file_ref>\n    <file_name>my_seti_avx</file_name>\n    <main_program/>\n  </file_ref>\n\
          <file_ref>\n    <file_name>libcudart.so</file_name>\n    <copy_file/>\n  </file_ref>\n\
        </app_version>\n\
        </app_info>\n";

    #[test]
    fn a_typical_file_reads_every_part() {
        let p = AppInfo::parse(SAMPLE, "app_info.xml").expect("parse");
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        let i = p.value;
        assert_eq!(i.apps.len(), 1);
        assert_eq!(i.apps[0].user_friendly_name, "SETI@home v8");
        let names: Vec<&str> = i.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["my_seti_avx", "libcudart.so"]);
        assert!(i.files[0].executable && !i.files[1].executable);
        let v = &i.app_versions[0];
        assert_eq!(
            (v.app_name.as_str(), v.version_num, v.plan_class.as_str()),
            ("setiathome_v8", 800, "cuda90")
        );
        assert_eq!(v.platform, "", "no platform: the client fills in its own");
        assert_eq!(v.usage.coprocs[0].rsc_type, "NVIDIA");
        assert_eq!(v.usage.coprocs[0].count, 0.5);
        assert_eq!(v.usage.avg_ncpus, 0.1);
        assert_eq!(v.cmdline, "-unroll 4");
        assert!(v.file_refs[0].main_program && v.file_refs[1].copy_file);
    }

    #[test]
    fn written_then_read_is_the_same() {
        let i = AppInfo::parse(SAMPLE, "app_info.xml").expect("parse").value;
        let again = AppInfo::parse(&i.to_xml(), "again").expect("reparse");
        assert!(again.warnings.is_empty(), "{:?}", again.warnings);
        assert_eq!(again.value, i);
    }

    #[test]
    fn an_element_without_its_name_is_skipped_and_the_rest_kept() {
        let text = "<app_info>\n<app><user_friendly_name>x</user_friendly_name></app>\n\
                    <app><name>ok</name></app>\n\
                    <app_version><version_num>1</version_num></app_version>\n\
                    <app_version><app_name>ok</app_name><version_num>2</version_num></app_version>\n\
                    <bogus/>\n</app_info>\n";
        let p = AppInfo::parse(text, "app_info.xml").expect("parse");
        assert_eq!(p.value.apps.len(), 1);
        assert_eq!(p.value.app_versions.len(), 1);
        assert_eq!(p.value.app_versions[0].version_num, 2);
        let skipped: Vec<&Warning> = p
            .warnings
            .iter()
            .filter(|w| is_skipped_element(w))
            .collect();
        assert_eq!(skipped.len(), 2, "{:?}", p.warnings);
        assert_eq!(skipped[0].line, 2);
        assert!(p.warnings.iter().any(|w| w.element == "bogus"));
    }

    #[test]
    fn broken_text_is_an_error_naming_the_file_and_line() {
        let e = AppInfo::parse(
            "<app_info>\n<app><name>x</name>\n",
            "projects/p/app_info.xml",
        )
        .expect_err("cut short");
        let msg = e.to_string();
        assert!(msg.contains("projects/p/app_info.xml"), "{msg}");
        assert!(matches!(e, XmlError::Truncated { .. }), "{e:?}");
        let e = AppInfo::parse("<app_config/>", "a").expect_err("wrong root");
        assert!(matches!(e, XmlError::WrongRoot { .. }), "{e:?}");
        assert!(AppInfo::parse("<app_info><app></name></app></app_info>", "a").is_err());
    }
}
