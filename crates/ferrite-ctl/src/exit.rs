//! How `ferrite` ends: its exit statuses, and standard output that a closed pipe ends
//! quietly (`ferrite tasks | head -1` exits 0, never a panic).

use std::fmt;
use std::io::{self, Write as _};

use ferrite_gui_rpc::ClientError;

/// Success.
pub const OK: u8 = 0;
/// The client refused the operation or it failed there.
pub const REFUSED: u8 = 1;
/// Bad command line (also clap's own usage errors).
pub const USAGE: u8 = 2;
/// The client could not be reached, or the connection broke.
pub const CONNECTION: u8 = 3;
/// Authentication: no password, or a wrong one.
pub const AUTH: u8 = 4;

/// The exit statuses, as `ferrite --help` prints them.
pub const HELP: &str = "\
Exit status:
  0  success
  1  the client refused the operation, or it failed there
  2  usage error (bad command line)
  3  cannot connect to the client, or the connection broke
  4  authentication failed (no password found, or a wrong one)";

/// A bad command line found after parsing (a value out of range).
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A usage error, for `return Err(usage(…))`.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

/// The exit status for `e`.
pub fn code(e: &anyhow::Error) -> u8 {
    let mut status = REFUSED;
    for cause in e.chain() {
        if cause.is::<UsageError>() {
            return USAGE;
        }
        match cause.downcast_ref::<ClientError>() {
            Some(ClientError::Unauthorized) => return AUTH,
            Some(
                ClientError::Connect(_)
                | ClientError::Io(_)
                | ClientError::Timeout(_)
                | ClientError::Closed
                | ClientError::Malformed,
            ) => status = CONNECTION,
            _ => {}
        }
    }
    status
}

/// Writes to standard output; a closed pipe ends the program quietly with status 0 (the
/// reader has what it wanted), any other write error with a message and status 1.
pub fn write_out(args: fmt::Arguments<'_>, newline: bool) {
    let mut out = io::stdout().lock();
    let r = out.write_fmt(args).and_then(|()| {
        if newline {
            out.write_all(b"\n")
        } else {
            Ok(())
        }
    });
    if let Err(e) = r {
        end_on_write_error(&e);
    }
}

/// Flushes standard output (at the end of the program) with the same rules as
/// [`write_out`].
pub fn flush_out() {
    if let Err(e) = io::stdout().lock().flush() {
        end_on_write_error(&e);
    }
}

fn end_on_write_error(e: &io::Error) -> ! {
    if e.kind() == io::ErrorKind::BrokenPipe {
        std::process::exit(i32::from(OK));
    }
    let _ = writeln!(io::stderr(), "ferrite: cannot write the output: {e}");
    std::process::exit(i32::from(REFUSED));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_distinct_statuses() {
        let auth = anyhow::Error::from(ClientError::Unauthorized).context("authorization failed");
        assert_eq!(code(&auth), AUTH);
        let conn = anyhow::Error::from(ClientError::Connect(io::Error::from(
            io::ErrorKind::ConnectionRefused,
        )))
        .context("cannot connect to 127.0.0.1:1");
        assert_eq!(code(&conn), CONNECTION);
        assert_eq!(code(&ClientError::Closed.into()), CONNECTION);
        assert_eq!(code(&usage("--for takes a number")), USAGE);
        assert_eq!(
            code(&ClientError::Server("not attached".into()).into()),
            REFUSED
        );
        assert_eq!(code(&anyhow::anyhow!("something else")), REFUSED);
        let codes = [OK, REFUSED, USAGE, CONNECTION, AUTH];
        for c in codes {
            assert!(HELP.contains(&format!("  {c}  ")), "{c} documented");
        }
    }
}
