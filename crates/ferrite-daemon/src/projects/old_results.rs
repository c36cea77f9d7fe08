//! Tasks the servers acknowledged, kept an hour for `get_old_results`.

use ferrite_proto::xml::escape;

/// A task the server acknowledged, shown by `get_old_results` for an hour.
#[derive(Debug, Clone, PartialEq)]
pub struct OldResult {
    /// Project master URL.
    pub project_url: String,
    /// Result name.
    pub result_name: String,
    /// App name.
    pub app_name: String,
    /// Exit status.
    pub exit_status: i32,
    /// Final elapsed time, seconds.
    pub elapsed_time: f64,
    /// Final CPU time, seconds.
    pub cpu_time: f64,
    /// When it completed.
    pub completed_time: f64,
    /// When it was acknowledged (the entry's age).
    pub create_time: f64,
}

/// How long acknowledged tasks stay in `get_old_results`, seconds.
pub(crate) const OLD_RESULT_KEEP: f64 = 3600.0;

/// `get_old_results` in the official layout.
pub fn old_results_xml(old: &std::collections::VecDeque<OldResult>) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("<old_results>\n");
    for o in old {
        let _ = write!(
            out,
            "    <old_result>\n         <project_url>{}</project_url>\n         <result_name>{}</result_name>\n         <app_name>{}</app_name>\n         <exit_status>{}</exit_status>\n         <elapsed_time>{:.6}</elapsed_time>\n         <cpu_time>{:.6}</cpu_time>\n         <completed_time>{:.6}</completed_time>\n         <create_time>{:.6}</create_time>\n    </old_result>\n",
            escape(&o.project_url),
            escape(&o.result_name),
            escape(&o.app_name),
            o.exit_status,
            o.elapsed_time,
            o.cpu_time,
            o.completed_time,
            o.create_time
        );
    }
    out.push_str("</old_results>\n");
    out
}
