//! `nvc_config.xml`: the official client's new-version-check settings
//! (`client/current_version.cpp`). Ferrite checks for no new version; it uses the page GUIs
//! are sent to for a download (`get_newer_version`'s `<download_url>`).

use crate::xml::{parse_document, Parsed, Tag, XmlError, XmlReader};

/// The file's name in the data directory.
pub const NVC_CONFIG_FILE: &str = "nvc_config.xml";

/// The official client's default download page.
pub const DEFAULT_DOWNLOAD_URL: &str = "https://boinc.berkeley.edu/download.php";

/// What Ferrite uses of `nvc_config.xml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvcConfig {
    /// `<client_download_url>`, lower-cased as the official client does.
    pub client_download_url: String,
}

impl Default for NvcConfig {
    fn default() -> Self {
        NvcConfig {
            client_download_url: DEFAULT_DOWNLOAD_URL.to_owned(),
        }
    }
}

impl NvcConfig {
    /// Parses the file; elements not given keep their defaults.
    pub fn parse(text: &str, file: &str) -> Result<Parsed<Self>, XmlError> {
        parse_document(text, file, "nvc_config", Self::read)
    }

    fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Self, XmlError> {
        let mut c = Self::default();
        if tag.is_empty() {
            return Ok(c);
        }
        while let Some(t) = r.next_child()? {
            match t.name() {
                "client_download_url" => {
                    let url = r.string(&t)?;
                    if !url.trim().is_empty() {
                        c.client_download_url = url.trim().to_ascii_lowercase();
                    }
                }
                // The version check's own settings: no check is made.
                "client_new_version_name" | "client_version_check_url" | "network_test_url" => {
                    r.skip(&t)?;
                }
                _ => r.unknown(&t, "nvc_config")?,
            }
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_download_url_is_read_lower_cased_and_defaults_to_the_official_page() {
        let c = NvcConfig::parse(
            "<nvc_config>\n<client_download_url>HTTPS://Example.org/Get</client_download_url>\n\
             <client_version_check_url>https://x/</client_version_check_url>\n</nvc_config>\n",
            NVC_CONFIG_FILE,
        )
        .expect("parses");
        assert_eq!(c.value.client_download_url, "https://example.org/get");
        let c = NvcConfig::parse("<nvc_config>\n</nvc_config>\n", NVC_CONFIG_FILE).expect("ok");
        assert_eq!(c.value, NvcConfig::default());
        assert_eq!(
            NvcConfig::default().client_download_url,
            "https://boinc.berkeley.edu/download.php"
        );
    }
}
