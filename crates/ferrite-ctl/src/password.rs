//! Finding the GUI RPC password the way `boinccmd` does: `--passwd`, else `gui_rpc_auth.cfg`
//! in `--dir` or the current directory, then in the `data_dir=` of
//! `/etc/boinc-client/config.properties`, then Ferrite's packaged data directory
//! (`/var/lib/ferrite/gui_rpc_auth.cfg`), then `/var/lib/boinc/gui_rpc_auth.cfg`.

use std::fs;
use std::path::{Path, PathBuf};

/// The password file's name.
pub const PASSWORD_FILE: &str = "gui_rpc_auth.cfg";

/// Where the system-wide files are; tests point this at a temporary tree.
#[derive(Debug, Clone)]
pub struct SystemPaths {
    /// Debian's `config.properties` (with a `data_dir=` line).
    pub config_properties: PathBuf,
    /// The password file of Ferrite's packaged data directory.
    pub ferrite_password_file: PathBuf,
    /// The default data directory's password file.
    pub default_password_file: PathBuf,
}

impl Default for SystemPaths {
    fn default() -> Self {
        Self {
            config_properties: PathBuf::from("/etc/boinc-client/config.properties"),
            ferrite_password_file: PathBuf::from("/var/lib/ferrite").join(PASSWORD_FILE),
            default_password_file: PathBuf::from("/var/lib/boinc").join(PASSWORD_FILE),
        }
    }
}

/// The first line of a password file, whitespace trimmed (`None` if it cannot be read).
fn read_password_file(path: &Path) -> Option<String> {
    let bytes = fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    Some(text.lines().next().unwrap_or("").trim().to_owned())
}

/// The `data_dir=` value of a `config.properties` file.
fn data_dir_of(config_properties: &Path) -> Option<PathBuf> {
    let text = fs::read_to_string(config_properties).ok()?;
    text.lines().find_map(|l| {
        let v = l.trim().strip_prefix("data_dir=")?.trim();
        (!v.is_empty()).then(|| PathBuf::from(v))
    })
}

/// The password files looked at, in order (after `--passwd`).
fn candidates(dir: Option<&Path>, cwd: &Path, system: &SystemPaths) -> Vec<PathBuf> {
    let mut out = vec![dir.unwrap_or(cwd).join(PASSWORD_FILE)];
    if let Some(d) = data_dir_of(&system.config_properties) {
        out.push(d.join(PASSWORD_FILE));
    }
    out.push(system.ferrite_password_file.clone());
    out.push(system.default_password_file.clone());
    out
}

/// Where the password was looked for and what was found at each place, and how to give
/// one: the text that follows an authentication error.
pub fn search_report(
    explicit: Option<&str>,
    dir: Option<&Path>,
    cwd: &Path,
    system: &SystemPaths,
) -> String {
    let mut lines = vec!["The GUI RPC password was looked for in:".to_owned()];
    match explicit {
        Some(_) => lines.push("  --passwd: given (and refused by the client)".to_owned()),
        None => {
            lines.push("  --passwd: not given".to_owned());
            let mut used = false;
            for path in candidates(dir, cwd, system) {
                let what = match fs::read(&path) {
                    Ok(_) if used => "present, not used".to_owned(),
                    Ok(b) if String::from_utf8_lossy(&b).trim().is_empty() => {
                        used = true;
                        "used: empty (no password sent)".to_owned()
                    }
                    Ok(_) => {
                        used = true;
                        "used (refused by the client)".to_owned()
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => "missing".to_owned(),
                    Err(e) => format!("cannot read it: {e}"),
                };
                lines.push(format!("  {}: {what}", path.display()));
            }
        }
    }
    lines.push(
        "Give the password with --passwd PASSWORD, or --dir DATA_DIR (the client's data \
         directory, holding gui_rpc_auth.cfg), or run ferrite in that directory; reading \
         /var/lib/boinc's file may need membership in the boinc group."
            .to_owned(),
    );
    lines.join("\n")
}

/// The password to use and where it came from (`None` when nothing was found: then no
/// authentication is attempted, which works for the read-only ops on a local connection).
pub fn find_password(
    explicit: Option<&str>,
    dir: Option<&Path>,
    cwd: &Path,
    system: &SystemPaths,
) -> Option<(String, String)> {
    if let Some(p) = explicit {
        return Some((p.to_owned(), "--passwd".to_owned()));
    }
    candidates(dir, cwd, system)
        .into_iter()
        .find_map(|path| read_password_file(&path).map(|p| (p, path.display().to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_order_matches_boinccmd() {
        let root = tempfile::tempdir().expect("tempdir");
        let cwd = root.path().join("cwd");
        let data = root.path().join("data");
        let var = root.path().join("var");
        let packaged = root.path().join("ferrite");
        for d in [&cwd, &data, &var, &packaged] {
            fs::create_dir_all(d).expect("mkdir");
        }
        let system = SystemPaths {
            config_properties: root.path().join("config.properties"),
            ferrite_password_file: packaged.join(PASSWORD_FILE),
            default_password_file: var.join(PASSWORD_FILE),
        };
        assert_eq!(find_password(None, None, &cwd, &system), None);

        fs::write(var.join(PASSWORD_FILE), "from-var\n").expect("w");
        assert_eq!(
            find_password(None, None, &cwd, &system).map(|p| p.0),
            Some("from-var".into())
        );
        fs::write(packaged.join(PASSWORD_FILE), "from-package\n").expect("w");
        assert_eq!(
            find_password(None, None, &cwd, &system).map(|p| p.0),
            Some("from-package".into())
        );
        fs::write(
            &system.config_properties,
            format!("# Debian\ndata_dir={}\n", data.display()),
        )
        .expect("w");
        fs::write(data.join(PASSWORD_FILE), "  from-data  \nsecond line\n").expect("w");
        assert_eq!(
            find_password(None, None, &cwd, &system).map(|p| p.0),
            Some("from-data".into())
        );
        fs::write(cwd.join(PASSWORD_FILE), "from-cwd").expect("w");
        assert_eq!(
            find_password(None, None, &cwd, &system).map(|p| p.0),
            Some("from-cwd".into())
        );
        // --dir replaces the current directory; --passwd wins over everything.
        assert_eq!(
            find_password(None, Some(&var), &cwd, &system).map(|p| p.0),
            Some("from-var".into())
        );
        assert_eq!(
            find_password(Some("x"), Some(&var), &cwd, &system).map(|p| p.0),
            Some("x".into())
        );
        let report = search_report(None, None, &cwd, &system);
        assert!(
            report.contains(&format!("{}: used", cwd.join(PASSWORD_FILE).display())),
            "{report}"
        );
        assert!(
            report.contains(&format!(
                "{}: present, not used",
                data.join(PASSWORD_FILE).display()
            )),
            "{report}"
        );
        assert!(report.contains("--passwd: not given"), "{report}");
        assert!(
            report.contains("Give the password with --passwd"),
            "{report}"
        );
        // An empty file means "no password".
        fs::write(cwd.join(PASSWORD_FILE), "\n").expect("w");
        assert_eq!(
            find_password(None, None, &cwd, &system).map(|p| p.0),
            Some(String::new())
        );
    }
}
