//! Looking at what `ferrited` leaves behind: its apps' processes (by their working directory
//! in a slot) and its state files; and waiting for a condition within a bound.

use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use ferrite_proto::client_state::ClientState;

/// The `/proc/PID/stat` fields after the command name (the state letter first).
pub fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// The `/proc` state letter of `pid` (`R`, `S`, `T`, `Z`, …).
pub fn state_letter(pid: i32) -> Option<char> {
    stat_fields(pid)?.first()?.chars().next()
}

/// Live (not zombie) processes whose working directory is inside `dir/slots`:
/// (pid, state letter, working directory). None before the first slot exists.
pub fn slot_processes(dir: &Path) -> Vec<(i32, char, PathBuf)> {
    let Ok(slots) = fs::canonicalize(dir.join("slots")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cwd) = fs::read_link(e.path().join("cwd")) else {
            continue;
        };
        if !cwd.starts_with(&slots) {
            continue;
        }
        match state_letter(pid) {
            Some(st) if st != 'Z' && st != 'X' => out.push((pid, st, cwd)),
            _ => {}
        }
    }
    out
}

/// Polls `cond` every 100 ms until it holds; panics naming `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if cond() {
            return;
        }
        thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out after {timeout:?} waiting until {what}");
}

/// Makes everything under `dir` writable by its owner (fixture copies are read-only).
pub fn make_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    for e in fs::read_dir(dir).expect("read dir") {
        let p = e.expect("entry").path();
        let mut perm = fs::metadata(&p).expect("stat").permissions();
        perm.set_mode(perm.mode() | 0o200);
        fs::set_permissions(&p, perm).expect("chmod");
        if p.is_dir() {
            make_writable(&p);
        }
    }
}

/// The state file `dir/name`, parsed (panics if it does not load).
pub fn load_state(dir: &Path, name: &str) -> ClientState {
    let text = fs::read_to_string(dir.join(name)).expect("read state");
    ClientState::parse(&text, name).expect("parse state").value
}

/// The names of every result in `state`, sorted.
pub fn result_names(state: &ClientState) -> Vec<String> {
    let mut v: Vec<String> = state
        .projects
        .iter()
        .flat_map(|p| p.results.iter().map(|r| r.name.clone()))
        .collect();
    v.sort();
    v
}

/// Makes the state files of data directory `dir` describe file `name` of the project whose
/// directory is `project` (`projects/…`) as it now is on disk: its size, and no MD5. For
/// tests that put their own app or input into a fixture: `ferrited` checks every file
/// against the state at start-up and fetches again what does not match.
pub fn refit_file(dir: &Path, project: &str, name: &str) {
    let len = fs::metadata(dir.join(project).join(name))
        .expect("the file is there")
        .len();
    // A client killed between writing `client_state_next.xml` and renaming it leaves the
    // newer state there, and the next start loads that one: both are refitted.
    for state in ["client_state.xml", "client_state_next.xml"] {
        let path = dir.join(state);
        if state != "client_state.xml" && !path.exists() {
            continue;
        }
        let text = fs::read_to_string(&path).expect("state");
        let at = text
            .find(&format!("<name>{name}</name>"))
            .unwrap_or_else(|| panic!("no file {name} in {state}"));
        let start = text[..at].rfind("<file>").expect("<file>");
        let end = at + text[at..].find("</file>").expect("</file>");
        let block: String = text[start..end]
            .lines()
            .filter(|l| !l.trim_start().starts_with("<md5_cksum>"))
            .map(|l| {
                if l.trim_start().starts_with("<nbytes>") {
                    format!("    <nbytes>{len}</nbytes>\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        let new = format!("{}{}{}", &text[..start], block, &text[end..]);
        fs::write(&path, new).expect("state");
    }
}
