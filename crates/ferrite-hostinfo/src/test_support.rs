//! Support for this crate's tests: the shell scripts that stand in for other programs
//! (`podman`, `VBoxManage`, the GPU detection child).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes the shell script `path` (`#!/bin/sh`, then `body`), mode 0755, ready to run at once.
///
/// A file this process writes stays open for writing, for a moment, in every child that
/// another test thread forks meanwhile (until that child execs), and running the file then
/// fails with "Text file busy" (ETXTBSY). So the script is staged beside `path` and copied
/// into place by a child process (`install`): once that child has exited, no process holds
/// `path` open for writing.
pub(crate) fn write_script(path: &Path, body: &str) {
    let mut staged = path.as_os_str().to_owned();
    staged.push(".staged");
    let staged = PathBuf::from(staged);
    std::fs::write(&staged, format!("#!/bin/sh\n{body}")).expect("write the staged script");
    let status = Command::new("install")
        .arg("-m755")
        .arg(&staged)
        .arg(path)
        .status()
        .expect("coreutils' install must be installed");
    assert!(status.success(), "install {}", path.display());
    std::fs::remove_file(&staged).expect("remove the staged script");
}
