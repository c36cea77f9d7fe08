//! Shared test (and bench) support: builds the C++ BOINC API test app against
//! libboinc-app-dev, lays out a temporary data directory with a project and slots, and drives a
//! task until it exits.
#![allow(clippy::unwrap_used)]
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ferrite_supervise::{
    Checkpoint, FileRole, Limits, LinkMode, Priority, Slot, SlotFile, SlotManager, Task,
    TaskConfig, TaskEvent, TaskExit, Timing,
};

/// Escaped project directory name used by the tests.
pub const PROJECT: &str = "127.0.0.1_18080";

const APP_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/apps/test_app.cpp");

/// The directory holding `boinc_api.h`, found through `dpkg -L libboinc-app-dev`.
fn boinc_include_dir() -> PathBuf {
    let listed = Command::new("dpkg")
        .args(["-L", "libboinc-app-dev"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut headers: Vec<&str> = listed
        .lines()
        .filter(|l| l.ends_with("/boinc_api.h"))
        .collect();
    // Prefer the top-level copy (/usr/include/boinc/boinc_api.h), whose siblings include app_ipc.h.
    headers.sort_by_key(|l| l.len());
    headers
        .first()
        .and_then(|h| Path::new(h).parent())
        .map_or_else(|| PathBuf::from("/usr/include/boinc"), Path::to_path_buf)
}

/// The compiled test app (built once per test binary, atomically renamed into place).
pub fn test_app() -> &'static Path {
    static APP: OnceLock<PathBuf> = OnceLock::new();
    APP.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ferrite-supervise-apps");
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("test_app");
        let tmp = dir.join(format!("test_app.{}", std::process::id()));
        let status = Command::new("g++")
            .arg("-O1")
            .arg("-I")
            .arg(boinc_include_dir())
            .arg("-o")
            .arg(&tmp)
            .arg(APP_SOURCE)
            .args(["-lboinc_api", "-lboinc", "-lpthread"])
            .status()
            .expect("g++ must be installed");
        assert!(status.success(), "building the BOINC test app failed");
        std::fs::rename(&tmp, &out).unwrap();
        out
    })
}

/// A temporary BOINC data directory with one project.
pub struct DataDir {
    /// Keeps the directory alive.
    pub tmp: tempfile::TempDir,
    /// Slot allocation.
    pub slots: SlotManager,
}

impl DataDir {
    pub fn new() -> DataDir {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("projects").join(PROJECT)).unwrap();
        let slots = SlotManager::new(tmp.path(), 100);
        DataDir { tmp, slots }
    }

    pub fn project_dir(&self) -> PathBuf {
        self.tmp.path().join("projects").join(PROJECT)
    }

    /// Puts a project file in place.
    pub fn project_file(&self, name: &str, contents: &[u8]) {
        std::fs::write(self.project_dir().join(name), contents).unwrap();
    }

    /// Puts an executable project file (a shell app) in place; returns its path.
    pub fn project_program(&self, name: &str, contents: &[u8]) -> PathBuf {
        self.project_file(name, contents);
        let path = self.project_dir().join(name);
        make_executable(&path);
        path
    }

    /// Installs the C++ test app as a project file.
    pub fn install_test_app(&self) {
        let dst = self.project_dir().join("test_app");
        if !dst.exists() {
            install_program(test_app(), &dst);
        }
    }
}

/// Copies the program `src` to `dst`, mode 0755, through a child process (`install`).
///
/// A file this process writes stays open for writing, for a moment, in every child that
/// another test thread forks meanwhile (until that child execs), and running the file then
/// fails with "Text file busy" (ETXTBSY). A file written by a child that has exited is open
/// for writing nowhere, so it can be run at once.
pub fn install_program(src: &Path, dst: &Path) {
    let status = Command::new("install")
        .arg("-m755")
        .arg(src)
        .arg(dst)
        .status()
        .expect("coreutils' install must be installed");
    assert!(
        status.success(),
        "install {} {}",
        src.display(),
        dst.display()
    );
}

/// Makes the file `path` (written by this process) executable and safe to run at once: it is
/// replaced by a copy that [`install_program`] writes.
pub fn make_executable(path: &Path) {
    let mut fresh = path.as_os_str().to_owned();
    fresh.push(".exec");
    let fresh = PathBuf::from(fresh);
    install_program(path, &fresh);
    std::fs::rename(&fresh, path).unwrap();
}

/// A minimal `init_data.xml` as the daemon would write it (shared memory by mmap).
pub fn init_data(slot: u32, resume: Checkpoint) -> String {
    format!(
        "<app_init_data>\n<major_version>7</major_version>\n<minor_version>20</minor_version>\n\
         <release>5</release>\n<app_version>100</app_version>\n<app_name>test_app</app_name>\n\
         <wu_name>wu</wu_name>\n<result_name>wu_0</result_name>\n<shm_key>-1</shm_key>\n\
         <slot>{slot}</slot>\n<client_pid>{}</client_pid>\n<wu_cpu_time>{:.6}</wu_cpu_time>\n\
         <starting_elapsed_time>{:.6}</starting_elapsed_time>\n\
         <checkpoint_period>0.000000</checkpoint_period>\n\
         <fraction_done_start>0.000000</fraction_done_start>\n\
         <fraction_done_end>1.000000</fraction_done_end>\n</app_init_data>\n",
        std::process::id(),
        resume.cpu_time,
        resume.elapsed_time,
    )
}

/// Fast timings for tests.
pub fn fast_timing() -> Timing {
    Timing {
        poll_period: Duration::from_millis(200),
        quit_timeout: Duration::from_secs(3),
        term_grace: Duration::from_secs(2),
        suspend_grace: Duration::from_millis(600),
        ..Timing::default()
    }
}

/// The standard file mapping of the C++ app: the program, input `in` and output `out`.
pub fn api_app_files(input: &str, output: &str) -> Vec<SlotFile> {
    let f = |open: &str, file: &str, role| SlotFile {
        open_name: open.into(),
        project_dir: PROJECT.into(),
        file_name: file.into(),
        mode: LinkMode::SoftLinkFile,
        role,
    };
    vec![
        f("test_app", "test_app", FileRole::Input),
        f("in", input, FileRole::Input),
        f("out", output, FileRole::Output),
    ]
}

/// Sets up a new slot for the C++ app with `steps` in its input and returns the config.
pub fn api_task(dd: &DataDir, name: &str, steps: u32, args: &[&str]) -> (Slot, TaskConfig) {
    dd.install_test_app();
    let input = format!("{name}_in");
    dd.project_file(&input, format!("{steps}\n").as_bytes());
    let slot = dd.slots.allocate().unwrap();
    slot.setup(
        &api_app_files(&input, &format!("{name}_out")),
        &init_data(slot.number(), Checkpoint::default()),
    )
    .unwrap();
    let cfg = config_for(&slot, name, args);
    (slot, cfg)
}

/// A config for the C++ app in `slot`.
pub fn config_for(slot: &Slot, name: &str, args: &[&str]) -> TaskConfig {
    TaskConfig {
        result_name: format!("{name}_0"),
        slot: slot.number(),
        slot_dir: slot.dir().to_path_buf(),
        project_dir_name: PROJECT.into(),
        program: PathBuf::from(format!("../../projects/{PROJECT}/test_app")),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: vec![],
        uses_api: true,
        priority: Priority::Unchanged,
        project_master_url: Some("http://127.0.0.1:18080/".into()),
        limits: Limits::default(),
        timing: fast_timing(),
        max_wss: 4e9,
        resume_from: Checkpoint::default(),
        stderr_head: false,
        confine: None,
    }
}

/// Polls every 50 ms until the task exits or `timeout` passes; returns the exit (None on
/// timeout) and every event seen.
pub fn run(task: &mut Task, timeout: Duration) -> (Option<TaskExit>, Vec<TaskEvent>) {
    run_until(task, timeout, |_| false)
}

/// Like [`run`] but also stops (returning `None`) once `stop` says so for an event.
pub fn run_until(
    task: &mut Task,
    timeout: Duration,
    mut stop: impl FnMut(&TaskEvent) -> bool,
) -> (Option<TaskExit>, Vec<TaskEvent>) {
    let deadline = Instant::now() + timeout;
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        for ev in task.poll(Instant::now()) {
            if let TaskEvent::Exited(x) = &ev {
                let x = x.clone();
                seen.push(ev);
                return (Some(x), seen);
            }
            let halt = stop(&ev);
            seen.push(ev);
            if halt {
                return (None, seen);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (None, seen)
}

/// Polls for `d` (keeping heartbeats and sampling going).
pub fn idle(task: &mut Task, d: Duration) -> Vec<TaskEvent> {
    let end = Instant::now() + d;
    let mut seen = Vec::new();
    while Instant::now() < end {
        seen.extend(task.poll(Instant::now()));
        std::thread::sleep(Duration::from_millis(50));
    }
    seen
}
