//! `account_<esc>.xml`: one per attached project (master URL, authenticator, project
//! preferences kept verbatim, GUI URLs), plus the two URL functions every per-project file
//! name depends on: [`canonicalize_master_url`] and [`escape_project_url`].

use crate::xml::{Parsed, Tag, XmlError, XmlReader, XmlWriter};

/// The canonical form of a project master URL (BOINC `canonicalize_master_url`): `http://`
/// added when there is no scheme (`https` kept, any other scheme becomes `http`), every `//`
/// after the scheme collapsed, a trailing `/` added, the host lower-cased.
///
/// Project identity is this string. (BOINC's loop leaves the host's last character as is when
/// the input has no path and no trailing slash; Ferrite lower-cases the whole host.)
pub fn canonicalize_master_url(url: &str) -> String {
    let url = url.trim();
    let (https, rest) = match url.find("://") {
        Some(i) => (i == 5, &url[i + 3..]),
        None => (false, url),
    };
    let mut body = String::with_capacity(rest.len() + 1);
    for c in rest.chars() {
        if c == '/' && body.ends_with('/') {
            continue;
        }
        body.push(c);
    }
    if !body.ends_with('/') {
        body.push('/');
    }
    let host_end = body.find('/').unwrap_or(body.len());
    let host = body[..host_end].to_lowercase();
    format!(
        "http{}://{host}{}",
        if https { "s" } else { "" },
        &body[host_end..]
    )
}

/// The file/directory name part for a project (BOINC `escape_project_url`): the URL after its
/// `://`, every byte other than ASCII letters, digits, `.`, `-` and `_` replaced by `_`, one
/// trailing `_` removed. `http` and `https` versions of a URL give the same name.
pub fn escape_project_url(master_url: &str) -> String {
    let rest = match master_url.find("://") {
        Some(i) => &master_url[i + 3..],
        None => master_url,
    };
    let mut out: String = rest
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_') {
                char::from(b)
            } else {
                '_'
            }
        })
        .collect();
    if out.ends_with('_') {
        out.pop();
    }
    out
}

/// The account file name for a project: `account_<esc>.xml`.
pub fn account_file_name(master_url: &str) -> String {
    format!("account_{}.xml", escape_project_url(master_url))
}

/// An account file (`account_<esc>.xml`). Its presence is what makes a project attached.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AccountFile {
    /// Canonical master URL: the project's identity.
    pub master_url: String,
    /// The account key sent in every scheduler request.
    pub authenticator: String,
    /// Project name, informational (the state file is authoritative); empty = not written.
    pub project_name: String,
    /// The contents of `<project_preferences>` from the last scheduler reply, verbatim: apps
    /// get them in `init_data.xml`, and resource share and opt-outs are read from them.
    pub project_prefs: String,
    /// The `<gui_urls>` element as received, verbatim, when there is one.
    pub gui_urls: Option<String>,
}

impl AccountFile {
    /// Reads `<account>`. `master_url` is mandatory and canonicalised.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Self, XmlError> {
        let mut a = Self::default();
        let mut have_url = false;
        if !tag.is_empty() {
            while let Some(c) = r.next_child()? {
                match c.name() {
                    "master_url" => {
                        a.master_url = canonicalize_master_url(&r.string(&c)?);
                        have_url = !a.master_url.is_empty();
                    }
                    "authenticator" => a.authenticator = r.string(&c)?,
                    "project_name" => a.project_name = r.string(&c)?,
                    "project_preferences" => {
                        // BOINC writes a newline after the start tag; the rest is verbatim.
                        let inner = r.inner_raw(&c)?;
                        a.project_prefs = inner.strip_prefix('\n').unwrap_or(inner).to_owned();
                    }
                    "gui_urls" => a.gui_urls = Some(r.raw(&c)?.to_owned()),
                    _ => r.unknown(&c, "account")?,
                }
            }
        }
        if !have_url {
            return Err(r.missing(tag, "master_url"));
        }
        Ok(a)
    }

    /// Writes `<account>` in BOINC's layout (project preferences and GUI URLs at column 0).
    pub fn write(&self, w: &mut XmlWriter) {
        let mut head = XmlWriter::new();
        head.open("account")
            .text("master_url", &self.master_url)
            .text("authenticator", &self.authenticator)
            .nonempty_text("project_name", &self.project_name);
        let mut doc = head.finish();
        doc.push_str("<project_preferences>\n");
        doc.push_str(&self.project_prefs);
        doc.push_str("</project_preferences>\n");
        if let Some(g) = &self.gui_urls {
            doc.push_str(g.trim());
            doc.push('\n');
        }
        doc.push_str("</account>");
        w.raw(&doc);
    }

    /// Parses an account file.
    pub fn parse(text: &str, file: &str) -> Result<Parsed<Self>, XmlError> {
        crate::xml::parse_document(text, file, "account", Self::read)
    }

    /// The file as BOINC writes it.
    pub fn to_xml(&self) -> String {
        crate::xml::write_document(|w| self.write(w))
    }

    /// The client-relevant values in the project preferences, for `host_venue`.
    pub fn prefs(&self, host_venue: &str) -> ProjectPrefs {
        ProjectPrefs::extract(&self.project_prefs, host_venue)
    }
}

/// What the client itself uses from the project preferences (the rest is for apps).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProjectPrefs {
    /// Resource share, when given (BOINC's default is 100; an account manager's wins).
    pub resource_share: Option<f64>,
    /// Resource names the user opted out of (`CPU`, `NVIDIA`, `ATI`, `intel_gpu`, …): no
    /// work fetch for them.
    pub no_rsc: Vec<String>,
    /// `<project_specific>` contents, verbatim, passed to apps.
    pub project_specific: Option<String>,
}

impl ProjectPrefs {
    /// Extracts the values from the `<project_preferences>` contents: top level first, then
    /// the `<venue name="host_venue">` section (if any) overrides them. Text that is not XML
    /// gives what could be read before the fault.
    pub fn extract(prefs_inner: &str, host_venue: &str) -> Self {
        let doc = format!("<project_preferences>{prefs_inner}</project_preferences>");
        let mut out = Self::default();
        let mut r = XmlReader::new(&doc, "project_preferences");
        let Ok(root) = r.root("project_preferences") else {
            return out;
        };
        let _ = scan(&mut r, &root, host_venue, &mut out, true);
        out
    }
}

fn scan<'a>(
    r: &mut XmlReader<'a>,
    _parent: &Tag<'a>,
    host_venue: &str,
    out: &mut ProjectPrefs,
    top: bool,
) -> Result<(), XmlError> {
    let mut venue_prefs: Option<ProjectPrefs> = None;
    while let Some(c) = r.next_child()? {
        match c.name() {
            "resource_share" => out.resource_share = r.num::<f64>(&c)?.or(out.resource_share),
            "no_cpu" | "no_cuda" | "no_ati" | "no_intel_gpu" => {
                let name = match c.name() {
                    "no_cpu" => "CPU",
                    "no_cuda" => "NVIDIA",
                    "no_ati" => "ATI",
                    _ => "intel_gpu",
                };
                if r.flag(&c)? && !out.no_rsc.iter().any(|n| n == name) {
                    out.no_rsc.push(name.to_owned());
                }
            }
            "no_rsc" => {
                let s = r.string(&c)?;
                if !s.is_empty() && !out.no_rsc.contains(&s) {
                    out.no_rsc.push(s);
                }
            }
            "project_specific" => out.project_specific = Some(r.inner_raw(&c)?.to_owned()),
            "venue" if top && c.attr("name").as_deref() == Some(host_venue) && !c.is_empty() => {
                let mut v = ProjectPrefs::default();
                scan(r, &c, host_venue, &mut v, false)?;
                venue_prefs = Some(v);
            }
            _ => r.skip(&c)?,
        }
    }
    if let Some(v) = venue_prefs {
        if v.resource_share.is_some() {
            out.resource_share = v.resource_share;
        }
        if !v.no_rsc.is_empty() {
            out.no_rsc = v.no_rsc;
        }
        if v.project_specific.is_some() {
            out.project_specific = v.project_specific;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_master_urls() {
        let cases = [
            ("einsteinathome.org", "http://einsteinathome.org/"),
            ("https://EinsteinAtHome.org", "https://einsteinathome.org/"),
            (
                "http://Boinc.BakerLab.org//Rosetta",
                "http://boinc.bakerlab.org/Rosetta/",
            ),
            ("http://127.0.0.1:18080/", "http://127.0.0.1:18080/"),
            ("ftp://a.b/c/", "http://a.b/c/"),
            ("  http://x.org/a//b//  ", "http://x.org/a/b/"),
        ];
        for (input, want) in cases {
            assert_eq!(canonicalize_master_url(input), want, "{input}");
        }
    }

    #[test]
    fn escaped_project_names_from_the_reference() {
        assert_eq!(
            escape_project_url("https://einsteinathome.org/"),
            "einsteinathome.org"
        );
        assert_eq!(
            escape_project_url("http://boinc.bakerlab.org/rosetta/"),
            "boinc.bakerlab.org_rosetta"
        );
        assert_eq!(
            escape_project_url("http://host:8080/proj/"),
            "host_8080_proj"
        );
        assert_eq!(
            escape_project_url("http://127.0.0.1:18080/"),
            "127.0.0.1_18080"
        );
        assert_eq!(
            escape_project_url("https://a.org/x/"),
            escape_project_url("http://a.org/x/")
        );
        assert_eq!(
            escape_project_url("http://a.org/p?q=1&r=é/"),
            "a.org_p_q_1_r___"
        );
        assert_eq!(
            account_file_name("http://127.0.0.1:18080/"),
            "account_127.0.0.1_18080.xml"
        );
    }

    #[test]
    fn project_prefs_with_venue() {
        let inner = r#"
<resource_share>50</resource_share>
<no_cuda>1</no_cuda>
<project_specific><color>red</color></project_specific>
<venue name="home">
  <resource_share>200</resource_share>
  <no_rsc>ATI</no_rsc>
</venue>
"#;
        let top = ProjectPrefs::extract(inner, "");
        assert_eq!(top.resource_share, Some(50.0));
        assert_eq!(top.no_rsc, ["NVIDIA"]);
        assert_eq!(top.project_specific.as_deref(), Some("<color>red</color>"));
        let home = ProjectPrefs::extract(inner, "home");
        assert_eq!(home.resource_share, Some(200.0));
        assert_eq!(home.no_rsc, ["ATI"]);
        assert_eq!(home.project_specific.as_deref(), Some("<color>red</color>"));
        assert_eq!(
            ProjectPrefs::extract("<broken", ""),
            ProjectPrefs::default()
        );
    }
}
