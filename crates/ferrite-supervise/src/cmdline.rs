//! An app's command line as the official client builds it: the job's (workunit's)
//! `<command_line>` first, then the app version's `<cmdline>` (which `app_config.xml`
//! replaces when it gives one), then `--device N` for a GPU app older than API 7.5; the
//! whole line split into arguments by BOINC's `parse_command_line` rules.

/// Whitespace as C's `isspace` sees it in the "C" locale.
fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{0b}' | '\u{0c}' | '\r')
}

/// Splits a command line into arguments as BOINC's `parse_command_line` does:
/// - arguments are separated by runs of whitespace;
/// - an argument that *starts* with `"` or `'` runs, quote removed, to the next quote of the
///   same kind (or to the end of the line) and may hold whitespace; the character after it
///   starts a new argument even when it is not whitespace (`"ab"cd` is `ab`, `cd`);
/// - a quote inside an unquoted argument is an ordinary character (`a"b` stays `a"b`);
/// - no escapes.
///
/// One quirk is kept because apps see it with the official client: the character right
/// after an opening quote is always part of the argument, even when it is the same quote,
/// so `""` does not make an empty argument but opens one that starts with `"`
/// (`"" x"` is the one argument `" x`). A quote that ends the line gives an empty argument
/// (the official parser reads past the end of its buffer there).
pub fn split(line: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if is_c_space(c) {
            continue;
        }
        let mut arg = String::new();
        if c == '"' || c == '\'' {
            // The first character inside the quotes is taken as it is.
            if let Some(first) = chars.next() {
                arg.push(first);
                for d in chars.by_ref() {
                    if d == c {
                        break;
                    }
                    arg.push(d);
                }
            }
        } else {
            arg.push(c);
            for d in chars.by_ref() {
                if is_c_space(d) {
                    break;
                }
                arg.push(d);
            }
        }
        args.push(arg);
    }
    args
}

/// What goes into an app's command line.
#[derive(Debug, Clone, Copy, Default)]
pub struct CommandLine<'a> {
    /// The workunit's `<command_line>` (the job's own arguments).
    pub job: &'a str,
    /// The app version's `<cmdline>` (for multi-threaded plan classes the project's
    /// scheduler puts `--nthreads N` here).
    pub app_version: &'a str,
    /// `app_config.xml` `<app_version><cmdline>` for this version, if any: when not empty it
    /// replaces the version's own (as the official client's `config_app_versions` does).
    pub app_config: Option<&'a str>,
    /// GPU device numbers to pass as `--device N` (apps older than API 7.5 only; empty
    /// otherwise).
    pub devices: &'a [u32],
}

impl CommandLine<'_> {
    /// The arguments the app gets after its program name.
    pub fn args(&self) -> Vec<String> {
        let version = self
            .app_config
            .filter(|c| !c.is_empty())
            .unwrap_or(self.app_version);
        let mut line = format!("{} {}", self.job.trim(), version);
        for d in self.devices {
            line.push_str(&format!(" --device {d}"));
        }
        split(&line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(line: &str) -> Vec<String> {
        split(line)
    }

    #[test]
    fn whitespace_separates_arguments_and_runs_of_it_count_once() {
        assert_eq!(s("-cpu_time 12"), ["-cpu_time", "12"]);
        assert_eq!(
            s("  a \t\tb\n c\r\u{0b}d\u{0c}e  "),
            ["a", "b", "c", "d", "e"]
        );
        assert!(s("").is_empty());
        assert!(s(" \t \n ").is_empty());
    }

    #[test]
    fn a_quoted_argument_stays_whole() {
        assert_eq!(
            s(r#"-cpu_time 12 "two words""#),
            ["-cpu_time", "12", "two words"]
        );
        assert_eq!(
            s("--name 'it has  spaces' x"),
            ["--name", "it has  spaces", "x"]
        );
        // The other kind of quote is an ordinary character inside.
        assert_eq!(s(r#""it's" 'say "hi"'"#), ["it's", r#"say "hi""#]);
        // Unterminated: to the end of the line.
        assert_eq!(s(r#"a "b c"#), ["a", "b c"]);
    }

    #[test]
    fn quotes_only_open_an_argument_at_its_start() {
        assert_eq!(s(r#"a"b c"d"#), [r#"a"b"#, r#"c"d"#]);
        assert_eq!(s(r#"--opt="x y""#), [r#"--opt="x"#, r#"y""#]);
        // After a closing quote a new argument starts at once.
        assert_eq!(s(r#""ab"cd 'e'f"#), ["ab", "cd", "e", "f"]);
    }

    #[test]
    fn the_character_after_an_opening_quote_is_always_kept() {
        // As with BOINC's parser: `""` is no empty argument.
        assert_eq!(s(r#"a "" b"#), ["a", r#"" b"#]);
        assert_eq!(s(r#"a "" b" c"#), ["a", r#"" b"#, "c"]);
        assert_eq!(s("''"), ["'"]);
        assert_eq!(s(r#""x""#), ["x"]);
        // A quote that ends the line: an empty argument.
        assert_eq!(s(r#"a ""#), ["a", ""]);
    }

    #[test]
    fn non_ascii_text_is_kept() {
        assert_eq!(s("\"été 42\" ü"), ["été 42", "ü"]);
    }

    #[test]
    fn the_job_comes_first_then_the_version_then_devices() {
        let c = CommandLine {
            job: "\n-cpu_time 12 \"two words\"\n",
            app_version: "--nthreads 4",
            app_config: None,
            devices: &[],
        };
        assert_eq!(
            c.args(),
            ["-cpu_time", "12", "two words", "--nthreads", "4"]
        );
        let gpu = CommandLine { devices: &[1], ..c };
        assert_eq!(
            gpu.args(),
            [
                "-cpu_time",
                "12",
                "two words",
                "--nthreads",
                "4",
                "--device",
                "1"
            ]
        );
        let two = CommandLine {
            job: "",
            app_version: "",
            devices: &[0, 2],
            ..c
        };
        assert_eq!(two.args(), ["--device", "0", "--device", "2"]);
    }

    #[test]
    fn app_config_replaces_the_version_cmdline_when_not_empty() {
        let c = CommandLine {
            job: "j",
            app_version: "--nthreads 4",
            app_config: Some("--nthreads 2 'x y'"),
            devices: &[],
        };
        assert_eq!(c.args(), ["j", "--nthreads", "2", "x y"]);
        let empty = CommandLine {
            app_config: Some(""),
            ..c
        };
        assert_eq!(empty.args(), ["j", "--nthreads", "4"]);
    }

    #[test]
    fn nothing_gives_no_arguments() {
        assert!(CommandLine::default().args().is_empty());
    }
}
