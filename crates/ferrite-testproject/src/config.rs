//! The server's command line (a contract other tools rely on) and its validated form.

use std::path::PathBuf;

use clap::Parser;

use crate::fault::FaultSpec;

/// Command-line options of `ferrite-testproject`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "ferrite-testproject",
    about = "A loopback BOINC project server for tests and demos",
    long_about = "A loopback BOINC project server for tests and demos.\n\n\
        Prints `ferrite-testproject listening on http://127.0.0.1:PORT/` as its first line \
        on stdout. Serves the master page (`/`), get_project_config.php, lookup_account.php, \
        create_account.php, the scheduler (`/cgi`), downloads (`/download/NAME`, with Range), \
        the upload handler (`/cgi-bin/file_upload_handler`), `/status` (JSON counters) and \
        `POST /fault` (body: a fault name, optionally `:COUNT`).",
    after_help = crate::fault::FAULT_HELP
)]
pub struct Args {
    /// Port to listen on (127.0.0.1 only); 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Directory for the state, the code-signing key and uploaded files
    /// (`DATA/results/<result>/<file>`). A temporary directory when absent.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// An executable served as an app: `NAME=PATH[,plan_class][,ncpus]`. Several allowed;
    /// the same NAME with another plan class is another version of the same app.
    #[arg(long = "app", value_parser = AppSpec::parse)]
    pub apps: Vec<AppSpec>,
    /// Input file given to every job (open name `in`); a one-line file holding `1` when
    /// absent.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Number of jobs to make at first start (a restart keeps the saved jobs), spread
    /// round-robin over the distinct app names; none without `--app`.
    #[arg(long, default_value_t = 4)]
    pub jobs: u32,
    /// Estimated floating-point operations per job.
    #[arg(long, default_value_t = 1e10)]
    pub fpops_est: f64,
    /// Seconds from sending a job to its report deadline.
    #[arg(long, default_value_t = 86400.0)]
    pub deadline: f64,
    /// Make the input one sticky file shared by every job; once no job needs it, a client
    /// that lists it is told to drop it (`<delete_file_info>`).
    #[arg(long)]
    pub sticky_input: bool,
    /// The account key the scheduler accepts (every account created gets it).
    #[arg(long, default_value = "0123456789abcdef0123456789abcdef")]
    pub account_key: String,
    /// Inject a fault: `NAME[:COUNT]` (COUNT defaults to 1; `always` never runs out).
    /// Several allowed; see the list below.
    #[arg(long = "fault", value_parser = FaultSpec::parse)]
    pub faults: Vec<FaultSpec>,
    /// Project name shown to clients.
    #[arg(long, default_value = "Ferrite Test Project")]
    pub name: String,
    /// Make upload certificates and refuse uploads without a valid one. Off by default, as
    /// in a stock BOINC project (`dont_generate_upload_certificates`,
    /// `ignore_upload_certificates`): result files then carry no `<xml_signature>`.
    #[arg(long)]
    pub upload_certs: bool,
    /// The lowest client version served, as `major*10000 + minor*100 + release`
    /// (`min_core_client_version`); older clients are told to upgrade and to come back in a
    /// day. 0 serves every version.
    #[arg(long, default_value_t = 70000)]
    pub min_core_client_version: i32,
    /// Command line of every job. Each workunit carries it the way a real BOINC server
    /// writes it: an empty `<command_line>` first and this one last.
    #[arg(long, default_value = "")]
    pub command_line: String,
    /// A message sent with priority `notice` in every scheduler reply that reaches the
    /// work step (a project's way to tell its volunteers something: clients show it as a
    /// notice from the scheduler, and drop it when a reply to a work request has none).
    #[arg(long)]
    pub notice: Option<String>,
}

/// One `--app` argument.
#[derive(Debug, Clone, PartialEq)]
pub struct AppSpec {
    /// App name (letters, digits, `_`, `-`, `.`).
    pub name: String,
    /// The executable to serve.
    pub path: PathBuf,
    /// Plan class; empty for a plain CPU version.
    pub plan_class: String,
    /// CPUs a job of this version uses.
    pub ncpus: f64,
}

/// A file or app name the server accepts: safe as a single path component and in XML.
pub fn is_safe_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

impl AppSpec {
    /// Parses `NAME=PATH[,plan_class][,ncpus]`; a field that parses as a number is ncpus.
    pub fn parse(s: &str) -> Result<AppSpec, String> {
        let (name, rest) = s
            .split_once('=')
            .ok_or_else(|| format!("`{s}`: expected NAME=PATH[,plan_class][,ncpus]"))?;
        if !is_safe_name(name) {
            return Err(format!("`{name}`: app names are letters, digits, _ - ."));
        }
        let mut parts = rest.split(',');
        let path = parts.next().unwrap_or_default();
        if path.is_empty() {
            return Err(format!("`{s}`: no path"));
        }
        let mut spec = AppSpec {
            name: name.to_owned(),
            path: PathBuf::from(path),
            plan_class: String::new(),
            ncpus: 1.0,
        };
        for p in parts {
            if let Ok(n) = p.parse::<f64>() {
                if !(n > 0.0 && n <= 1024.0) {
                    return Err(format!("`{p}`: ncpus must be in (0, 1024]"));
                }
                spec.ncpus = n;
            } else if is_safe_name(p) {
                spec.plan_class = p.to_owned();
            } else {
                return Err(format!("`{p}`: not a plan class or a CPU count"));
            }
        }
        Ok(spec)
    }

    /// The coprocessor type this version needs, from its plan class (`cuda`/`nvidia` →
    /// NVIDIA, `ati`/`amd` → ATI, `intel_gpu`, `apple_gpu`); `None` for CPU versions.
    pub fn gpu_type(&self) -> Option<&'static str> {
        let pc = self.plan_class.to_ascii_lowercase();
        if pc.contains("cuda") || pc.contains("nvidia") {
            Some("NVIDIA")
        } else if pc.contains("ati") || pc.contains("amd") {
            Some("ATI")
        } else if pc.contains("intel") {
            Some("intel_gpu")
        } else if pc.contains("apple") {
            Some("apple_gpu")
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_spec_forms() {
        let a = AppSpec::parse("work=/bin/true").expect("plain");
        assert_eq!(
            (a.name.as_str(), a.plan_class.as_str(), a.ncpus),
            ("work", "", 1.0)
        );
        let a = AppSpec::parse("work=/bin/true,mt,4").expect("mt");
        assert_eq!((a.plan_class.as_str(), a.ncpus), ("mt", 4.0));
        let a = AppSpec::parse("work=/bin/true,2").expect("ncpus only");
        assert_eq!((a.plan_class.as_str(), a.ncpus), ("", 2.0));
        let a = AppSpec::parse("g=/x,cuda").expect("gpu");
        assert_eq!(a.gpu_type(), Some("NVIDIA"));
        assert!(AppSpec::parse("noequals").is_err());
        assert!(AppSpec::parse("../x=/bin/true").is_err());
        assert!(AppSpec::parse("w=").is_err());
        assert!(AppSpec::parse("w=/x,0").is_err());
        assert!(AppSpec::parse("w=/x,a b").is_err());
    }
}
