//! A real BOINC project server (BOINC server 8.3 built from the public sources) as a test peer.
//!
//! The server comes as a kit outside this repository: a folder with `up.sh DIR`, `down.sh DIR`
//! and `mkjobs.sh DIR N` (see its README). Tests find it through the environment variable
//! `BOINC_SERVER_KIT`; when that is unset, `../shared/boinc-server` beside the workspace is
//! used if it exists. Without a kit the real-server tests say so and pass without running,
//! except under CI (`CI=true`), where a missing kit fails them: CI must run them.
//!
//! Each [`BoincServer`] is its own instance (its own MariaDB, Apache and project `test` on free
//! loopback ports, in a temporary folder); dropping it stops everything the kit started and
//! deletes the folder.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Where the kit is, if anywhere.
pub fn kit_dir() -> Option<PathBuf> {
    if let Some(v) = std::env::var_os("BOINC_SERVER_KIT").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(v));
    }
    let default = crate::workspace_root().join("../shared/boinc-server");
    default.join("up.sh").exists().then_some(default)
}

/// The kit, or `None` after saying why the test does not run. Under CI a missing kit is a
/// failure.
pub fn kit_or_skip(test: &str) -> Option<PathBuf> {
    match kit_dir() {
        Some(k) if k.join("up.sh").exists() => Some(k),
        other => {
            let why = match other {
                Some(k) => format!("BOINC_SERVER_KIT={} has no up.sh", k.display()),
                None => "no BOINC server kit (set BOINC_SERVER_KIT)".to_owned(),
            };
            crate::skip(test, &why);
            None
        }
    }
}

/// One running instance of the kit's project `test`.
#[derive(Debug)]
pub struct BoincServer {
    kit: PathBuf,
    dir: tempfile::TempDir,
    env: HashMap<String, String>,
    /// Stops the instance if the test binary is interrupted (no destructor runs then).
    _interrupt: crate::interrupt::Registration,
}

/// How to bring an instance up.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Jobs made at start.
    pub jobs: u32,
    /// CPU seconds each job burns.
    pub cpu_time: u32,
    /// Upload certificates on (the stock project has them off).
    pub upload_certs: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            jobs: 20,
            cpu_time: 2,
            upload_certs: false,
        }
    }
}

/// `result.server_state` OVER.
pub const SERVER_STATE_OVER: &str = "5";
/// `result.outcome` SUCCESS.
pub const OUTCOME_SUCCESS: &str = "1";
/// `result.validate_state` VALID.
pub const VALIDATE_VALID: &str = "1";

impl BoincServer {
    /// Brings an instance up (about 10–20 s), or `None` when the test must be skipped (see
    /// [`kit_or_skip`]). Panics, with the kit's log, when the kit fails.
    pub fn up(test: &str, opts: &ServerOptions) -> Option<BoincServer> {
        let kit = kit_or_skip(test)?;
        // A kit that fails to come up (MariaDB's first start has failed now and then on a
        // loaded machine) gets one more try on a fresh folder.
        let first = match Self::try_up(&kit, opts) {
            Ok(server) => return Some(server),
            Err(log) => log,
        };
        eprintln!("{test}: the BOINC server kit did not come up; trying once more:\n{first}");
        match Self::try_up(&kit, opts) {
            Ok(server) => Some(server),
            Err(log) => panic!("{test}: the BOINC server kit did not come up:\n{log}"),
        }
    }

    /// One start of the kit in a fresh folder; the kit's output when it fails (what it
    /// started is stopped and the folder deleted).
    fn try_up(kit: &Path, opts: &ServerOptions) -> Result<BoincServer, String> {
        // The kit runs the server as its own user, which must reach the folder.
        let dir = tempfile::Builder::new()
            .prefix("ferrite-boinc-server-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        // The kit's user must be able to pass through it (a temporary folder is 0700).
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
        // The instance's own temporary folder (MariaDB's temporary tables go there), shared
        // like /tmp by the users the kit runs as.
        let tmp = dir.path().join("tmp");
        fs::create_dir(&tmp).expect("instance tmp");
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o1777)).expect("chmod tmp");
        // From here on an interrupt stops what the kit started and deletes the folder.
        let interrupt = {
            let (kit, dir) = (kit.to_path_buf(), dir.path().to_path_buf());
            crate::interrupt::on_interrupt(move || {
                stop_instance(&kit, &dir.join("kit"));
                let _ = fs::remove_dir_all(&dir);
            })
        };
        let certs = if opts.upload_certs {
            "--upload-certs"
        } else {
            "--no-upload-certs"
        };
        let out = Command::new("bash")
            .arg(kit.join("up.sh"))
            .args([certs, "--jobs", &opts.jobs.to_string()])
            .args(["--cpu-time", &opts.cpu_time.to_string()])
            .arg(dir.path().join("kit"))
            .env("TMPDIR", &tmp)
            .output()
            .expect("run up.sh");
        let mut server = BoincServer {
            kit: kit.to_path_buf(),
            env: HashMap::new(),
            dir,
            _interrupt: interrupt,
        };
        if !out.status.success() {
            // Dropping `server` stops whatever the kit started.
            return Err(format!(
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let env_text = fs::read_to_string(server.root().join("env")).expect("kit env file");
        server.env = parse_env(&env_text);
        Ok(server)
    }

    /// The instance folder.
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("kit")
    }

    /// A variable of the instance's `env` file (`BOINC_URL`, `BOINC_ACCOUNT_KEY`, …).
    pub fn var(&self, name: &str) -> &str {
        self.env
            .get(name)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("the kit's env has no {name}"))
    }

    /// The master URL.
    pub fn url(&self) -> &str {
        self.var("BOINC_URL")
    }

    /// The test account's key.
    pub fn account_key(&self) -> &str {
        self.var("BOINC_ACCOUNT_KEY")
    }

    /// The project directory on the server.
    pub fn project_dir(&self) -> PathBuf {
        PathBuf::from(self.var("BOINC_PROJECT_DIR"))
    }

    /// The scheduler's log so far.
    pub fn scheduler_log(&self) -> String {
        self.log("scheduler.log")
    }

    /// One of the project's logs (`scheduler.log`, `file_upload_handler.log`, …).
    pub fn log(&self, name: &str) -> String {
        fs::read_to_string(Path::new(self.var("BOINC_LOG_DIR")).join(name)).unwrap_or_default()
    }

    /// Runs an SQL statement on the project database; rows of tab-separated columns.
    pub fn query(&self, sql: &str) -> Vec<Vec<String>> {
        let out = Command::new("mariadb")
            .args(["--no-defaults", "-S", self.var("BOINC_DB_SOCKET")])
            .arg(format!("-u{}", self.var("BOINC_DB_USER")))
            .arg(format!("-p{}", self.var("BOINC_DB_PASSWORD")))
            .args(["-N", "-B", "-e", sql, self.var("BOINC_DB_NAME")])
            .output()
            .expect("run mariadb");
        assert!(
            out.status.success(),
            "query {sql:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split('\t').map(str::to_owned).collect())
            .collect()
    }

    /// `(server_state, outcome, validate_state, count)` of every result, grouped.
    pub fn result_states(&self) -> Vec<(String, String, String, u32)> {
        self.query(
            "select server_state, outcome, validate_state, count(*) from result \
             group by 1, 2, 3 order by 1, 2, 3",
        )
        .into_iter()
        .map(|r| {
            (
                r[0].clone(),
                r[1].clone(),
                r[2].clone(),
                r[3].parse().unwrap_or(0),
            )
        })
        .collect()
    }

    /// Results that are over, successful and valid.
    pub fn valid_results(&self) -> u32 {
        self.result_states()
            .iter()
            .filter(|(s, o, v, _)| {
                s == SERVER_STATE_OVER && o == OUTCOME_SUCCESS && v == VALIDATE_VALID
            })
            .map(|r| r.3)
            .sum()
    }

    /// Workunits whose assimilation is done (`assimilate_state` 2).
    pub fn assimilated_workunits(&self) -> u32 {
        self.query("select count(*) from workunit where assimilate_state = 2")
            .first()
            .and_then(|r| r.first())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// Makes the scheduler keep every request it gets (and its reply) in a folder, returned
    /// (`<debug_req_reply_dir>`): files `PID_N_sched_request.xml`.
    pub fn keep_scheduler_requests(&self) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.root().join("kept_requests");
        fs::create_dir_all(&dir).expect("mkdir");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).expect("chmod");
        self.set_config("debug_req_reply_dir", &dir.to_string_lossy());
        dir
    }

    /// Adds `n` jobs.
    pub fn add_jobs(&self, n: u32) {
        let out = Command::new("bash")
            .arg(self.kit.join("mkjobs.sh"))
            .arg(self.root())
            .arg(n.to_string())
            .output()
            .expect("run mkjobs.sh");
        assert!(
            out.status.success(),
            "mkjobs.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Waits until `n` results are over, successful and valid. Whenever `quiet` passes
    /// without a new valid result, `nudge` runs: the volunteer's "Update" (a client with
    /// nothing left to fetch reports on its own schedule, which may be later than a test
    /// wants to wait). Panics with `context()` after `timeout`.
    pub fn wait_valid(
        &self,
        n: u32,
        (timeout, quiet): (Duration, Duration),
        mut nudge: impl FnMut(&BoincServer),
        context: impl Fn() -> String,
    ) {
        let mut last = (0, Instant::now());
        self.wait_until(
            &format!("{n} valid results"),
            timeout,
            |s| {
                let valid = s.valid_results();
                if valid != last.0 {
                    last = (valid, Instant::now());
                } else if last.1.elapsed() > quiet {
                    nudge(s);
                    last.1 = Instant::now();
                }
                valid >= n
            },
            context,
        );
    }

    /// [`wait_valid`](Self::wait_valid) for the usual case: `client` is a `ferrited` attached to
    /// this server whose GUI RPC listens on `port` with password `pw`. After `quiet` without a
    /// new valid result it presses "Update" for this project (`boinccmd --project URL
    /// update`); on timeout the panic shows the client's output and the scheduler's log.
    pub fn wait_valid_with_client(
        &self,
        n: u32,
        (timeout, quiet): (Duration, Duration),
        client: &crate::Proc,
        port: u16,
    ) {
        self.wait_valid(
            n,
            (timeout, quiet),
            |s| {
                let _ = crate::boinccmd(port, Some("pw"), &["--project", s.url(), "update"]);
            },
            || {
                format!(
                    "--- ferrited ---\n{}\n--- scheduler ---\n{}",
                    client.output(),
                    self.scheduler_log()
                )
            },
        );
    }

    /// Waits until `cond` holds, polling every half second; panics with the result table and
    /// `context()` after `timeout`.
    pub fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        mut cond: impl FnMut(&BoincServer) -> bool,
        context: impl Fn() -> String,
    ) {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if cond(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!(
            "timed out after {timeout:?} waiting for {what}; results on the server: {:?}\n{}",
            self.result_states(),
            context()
        );
    }
}

impl BoincServer {
    /// Runs a `bash` script in the project directory as the kit's user, with the project's
    /// tools (`bin/…`) at hand as `mkjobs.sh` has them; panics with its output when it fails.
    /// Returns its standard output.
    pub fn project_script(&self, script: &str) -> String {
        let user = fs::read_to_string(self.root().join("run/user"))
            .map(|u| u.trim().to_owned())
            .unwrap_or_default();
        let env_path = format!(
            "PATH={}:/usr/sbin:/usr/bin:/sbin:/bin",
            self.root().join("pybin").display()
        );
        let home = format!("HOME={}", self.root().join("home").display());
        // As root the kit runs its tools as its own user; otherwise as the caller.
        let mut cmd = if is_root() && !user.is_empty() && user != "root" {
            let mut c = Command::new("runuser");
            c.args([
                "-u", &user, "--", "env", &env_path, &home, "bash", "-c", script,
            ]);
            c
        } else {
            let mut c = Command::new("env");
            c.args([&env_path, &home, "bash", "-c", script]);
            c
        };
        let out = cmd
            .current_dir(self.project_dir())
            .output()
            .expect("run a project script");
        assert!(
            out.status.success(),
            "project script {script:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Sets `<tag>value</tag>` in the `<config>` of the project's `config.xml` (replacing an
    /// element of that name if there is one). The scheduler reads it on its next request.
    pub fn set_config(&self, tag: &str, value: &str) {
        let path = self.project_dir().join("config.xml");
        let text = fs::read_to_string(&path).expect("read config.xml");
        let open = format!("<{tag}>");
        let close = format!("</{tag}>");
        let element = format!("{open}{value}{close}");
        let new = match (text.find(&open), text.find(&close)) {
            (Some(a), Some(b)) if a < b => {
                format!("{}{element}{}", &text[..a], &text[b + close.len()..])
            }
            _ => text.replacen("<config>", &format!("<config>\n        {element}"), 1),
        };
        // Written in place: the file keeps its owner.
        fs::write(&path, new).expect("write config.xml");
    }

    /// When the scheduler logged each request (`Request: …` lines), in seconds since the
    /// epoch of the log's UTC clock.
    pub fn request_times(&self) -> Vec<f64> {
        self.scheduler_log()
            .lines()
            .filter(|l| l.contains("Request: ["))
            .filter_map(log_time)
            .collect()
    }

    /// Apache's access log of the instance.
    pub fn access_log(&self) -> String {
        fs::read_to_string(self.root().join("log/apache_access.log")).unwrap_or_default()
    }

    /// Makes one job like `mkjobs.sh` does, with its own result template `template` (the
    /// text of an `<output_template>`); returns the workunit's name.
    pub fn add_job_with_result_template(&self, name: &str, template: &str) -> String {
        let tpl = self.project_dir().join(format!("templates/{name}_out"));
        fs::write(&tpl, template).expect("write a result template");
        let input = self.root().join(format!("jobinputs/{name}.txt"));
        fs::create_dir_all(input.parent().expect("parent")).expect("mkdir");
        fs::write(
            &input,
            format!("the quick brown fox {name} jumps over the lazy dog\n"),
        )
        .expect("write an input");
        self.project_script(&format!(
            "bin/stage_file_native --copy {input} >/dev/null && \
             bin/create_work --appname upper_case --wu_name {name} \
             --wu_template templates/upper_case_in --result_template templates/{name}_out \
             --min_quorum 1 --target_nresults 1 --rsc_fpops_est 1e10 --rsc_fpops_bound 1e13 \
             --delay_bound 86400 {name}.txt",
            input = input.display()
        ));
        name.to_owned()
    }

    /// Adds a daemon (`<daemon><cmd>…</cmd></daemon>`) to the project's `config.xml` and
    /// starts it (`bin/start` starts the daemons that are not running).
    pub fn add_daemon(&self, cmd: &str) {
        let path = self.project_dir().join("config.xml");
        let text = fs::read_to_string(&path).expect("read config.xml");
        let new = text.replacen(
            "</daemons>",
            &format!(
                "    <daemon>\n            <cmd>{cmd}</cmd>\n        </daemon>\n    </daemons>"
            ),
            1,
        );
        assert_ne!(new, text, "config.xml has no <daemons>");
        // Written in place: the file keeps its owner.
        fs::write(&path, new).expect("write config.xml");
        self.project_script("bin/start");
    }

    /// Adds version `version` (e.g. `"1.01"`) of `upper_case` for x86_64 Linux, the same
    /// program as 1.00, signed with the project's key by `bin/update_versions`, and tells the
    /// feeder to read the versions again.
    pub fn add_app_version(&self, version: &str) {
        self.project_script(&format!(
            "set -e; d=apps/upper_case/{version}/x86_64-pc-linux-gnu; mkdir -p $d; \
             cp apps/upper_case/1.00/x86_64-pc-linux-gnu/upper_case_1.00_x86_64-pc-linux-gnu \
                $d/upper_case_{version}_x86_64-pc-linux-gnu; \
             bin/update_versions --noconfirm; touch reread_db"
        ));
    }

    /// Adds version `version` (e.g. `"1.10"`) of `upper_case` for x86_64 Linux with plan class
    /// `plan_class` (the scheduler's own `mt`, `cuda_fermi`, …): `program`, named `file_name`
    /// in the project, is its one file and main program; its API version `api_version` is
    /// given in `version.xml` (a program linked to a shared `libboinc_api` carries no
    /// `API_VERSION_` string for `update_versions` to find). Signed with the project's key by
    /// `bin/update_versions`. Returns the new `app_version.id`; the feeder reads the versions
    /// again only on [`BoincServer::only_app_version`] (or the next `reread_db`).
    pub fn add_plan_class_version(
        &self,
        version: &str,
        plan_class: &str,
        program: &Path,
        file_name: &str,
        api_version: &str,
    ) -> String {
        use std::os::unix::fs::PermissionsExt;
        // Staged where the kit's user can read it (the test's own folders may be private).
        let staged = self.root().join("appfiles").join(file_name);
        fs::create_dir_all(staged.parent().expect("parent")).expect("mkdir");
        fs::copy(program, &staged).expect("stage the program");
        fs::set_permissions(&staged, fs::Permissions::from_mode(0o755)).expect("chmod");
        self.project_script(&format!(
            "set -e; d=apps/upper_case/{version}/x86_64-pc-linux-gnu__{plan_class}; mkdir -p $d; \
             cp {staged} $d/{file_name}; \
             printf '<version>\\n<file>\\n<physical_name>{file_name}</physical_name>\\n\
             <main_program/>\\n</file>\\n<api_version>{api_version}</api_version>\\n\
             </version>\\n' > $d/version.xml; \
             bin/update_versions --noconfirm",
            staged = staged.display()
        ));
        let num: String = version.chars().filter(char::is_ascii_digit).collect();
        let rows = self.query(&format!(
            "select id from app_version where plan_class = '{plan_class}' \
             and version_num = {}",
            num.trim_start_matches('0')
        ));
        rows.first()
            .and_then(|r| r.first())
            .cloned()
            .unwrap_or_else(|| panic!("no app version {version} {plan_class} in the database"))
    }

    /// Deprecates every app version but `id`, so the scheduler sends each job for that one,
    /// and returns once the feeder has read the versions again (it deletes `reread_db` when
    /// done).
    pub fn only_app_version(&self, id: &str) {
        self.query(&format!(
            "update app_version set deprecated = 1 where id <> {id}"
        ));
        self.project_script("touch reread_db");
        let trigger = self.project_dir().join("reread_db");
        self.wait_until(
            "the feeder to read the app versions again",
            Duration::from_secs(60),
            |_| !trigger.exists(),
            || self.log("feeder.log"),
        );
    }

    /// Makes one job like `mkjobs.sh` does (the same input text for the same `name`), whose
    /// workunit carries `command_line` instead of the stock `-cpu_time N` (the stock app
    /// `upper_case` also knows `-early_exit`, `-early_crash`, `-early_sleep`); returns the
    /// workunit's name. `create_work` fails on a single quote in it (it does not escape the
    /// workunit's SQL).
    pub fn add_job_with_command_line(&self, name: &str, command_line: &str) -> String {
        let tpl = self.project_dir().join(format!("templates/{name}_in"));
        let stock = fs::read_to_string(self.project_dir().join("templates/upper_case_in"))
            .expect("the stock input template");
        let (head, rest) = stock
            .split_once("<command_line>")
            .expect("the stock template has a command line");
        let tail = rest
            .split_once("</command_line>")
            .map(|(_, t)| t)
            .expect("</command_line>");
        fs::write(
            &tpl,
            format!("{head}<command_line>{command_line}</command_line>{tail}"),
        )
        .expect("write an input template");
        let input = self.root().join(format!("jobinputs/{name}.txt"));
        fs::create_dir_all(input.parent().expect("parent")).expect("mkdir");
        fs::write(
            &input,
            "the quick brown fox jumps over the lazy dog; the quick brown fox jumps again\n",
        )
        .expect("write an input");
        self.project_script(&format!(
            "bin/stage_file_native --copy {input} >/dev/null && \
             bin/create_work --appname upper_case --wu_name {name} \
             --wu_template templates/{name}_in --result_template templates/upper_case_out \
             --min_quorum 1 --target_nresults 1 --rsc_fpops_est 1e10 --rsc_fpops_bound 1e13 \
             --delay_bound 86400 {name}.txt",
            input = input.display()
        ));
        name.to_owned()
    }

    /// Stops the project (`bin/stop`: daemons stopped, the scheduler answers "project down").
    pub fn stop_project(&self) {
        self.project_script("bin/stop");
    }

    /// Starts the project again (`bin/start`).
    pub fn start_project(&self) {
        self.project_script("bin/start");
    }
}

/// Whether this process runs as root.
fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The time of a scheduler log line (`2026-11-25 13:15:36.9300 UTC [PID=…] …`), in seconds
/// (days counted from a fixed origin; only differences matter).
fn log_time(line: &str) -> Option<f64> {
    let mut parts = line.split_whitespace();
    let date = parts.next()?;
    let time = parts.next()?;
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, dd) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.split(':');
    let (h, mi, sec) = (
        t.next()?.parse::<f64>().ok()?,
        t.next()?.parse::<f64>().ok()?,
        t.next()?.parse::<f64>().ok()?,
    );
    // Days from a civil date (proleptic Gregorian), enough for differences across midnight.
    let (y2, m2) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let days = 365 * y2 + y2 / 4 - y2 / 100 + y2 / 400 + (153 * m2 + 2) / 5 + dd;
    Some(days as f64 * 86400.0 + h * 3600.0 + mi * 60.0 + sec)
}

impl Drop for BoincServer {
    /// Stops everything the kit started and deletes the instance.
    fn drop(&mut self) {
        stop_instance(&self.kit, &self.root());
    }
}

/// The kit's `down.sh ROOT --purge`: stops what `up.sh ROOT` started and deletes ROOT.
fn stop_instance(kit: &Path, root: &Path) {
    let _ = Command::new("bash")
        .arg(kit.join("down.sh"))
        .arg(root)
        .arg("--purge")
        .output();
}

/// Reads `NAME=value` lines (values may carry shell escapes of spaces).
fn parse_env(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.replace("\\ ", " ")))
        .collect()
}
