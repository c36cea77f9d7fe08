//! The text messages of the BOINC app API, as pure encode/decode functions.
//!
//! Every message that crosses a shared-memory channel is a short XML-ish string. This module
//! turns typed values into those strings and back; it does no I/O. The formats follow
//! `client/app_control.cpp` (heartbeat, status parsing) and `api/boinc_api.cpp` (what apps send).

use std::fmt::Write as _;

/// A process-control request (client → app, `process_control_request` channel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlMsg {
    /// Stop computing but stay in memory.
    Suspend,
    /// Continue after a suspend.
    Resume,
    /// Exit now (status 0, no finish file); the task will be restarted from its checkpoint.
    Quit,
    /// Exit now with EXIT_ABORTED_BY_CLIENT; the task will not be restarted.
    Abort,
    /// `init_data.xml` changed; the app may reread it.
    RereadAppInfo,
}

impl ControlMsg {
    /// The exact text the official client writes.
    pub fn encode(self) -> &'static str {
        match self {
            ControlMsg::Suspend => "<suspend/>",
            ControlMsg::Resume => "<resume/>",
            ControlMsg::Quit => "<quit/>",
            ControlMsg::Abort => "<abort/>",
            ControlMsg::RereadAppInfo => "<reread_app_info/>",
        }
    }

    /// Recognises a process-control message (the API matches by substring, so do we).
    pub fn decode(text: &str) -> Option<ControlMsg> {
        [
            ControlMsg::Suspend,
            ControlMsg::Resume,
            ControlMsg::Quit,
            ControlMsg::Abort,
            ControlMsg::RereadAppInfo,
        ]
        .into_iter()
        .find(|m| text.contains(m.encode()))
    }
}

/// The heartbeat the client sends every second (client → app, `heartbeat` channel).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Heartbeat {
    /// The task's current working set in bytes (what the client measured).
    pub wss: f64,
    /// The RAM the client lets BOINC apps use, in bytes.
    pub max_wss: f64,
    /// True while network activity is suspended; apps that want the network wait for it.
    pub network_suspended: bool,
    /// Client→app state for sporadic apps; `0` (NONE) is never written.
    pub sporadic_ca: i32,
}

impl Heartbeat {
    /// Encodes as `<heartbeat/><wss>%e</wss><max_wss>%e</max_wss>[<network_suspended/>][<sporadic_ca>%d</sporadic_ca>]`.
    pub fn encode(&self) -> String {
        let mut s = String::with_capacity(96);
        s.push_str("<heartbeat/>");
        let _ = write!(s, "<wss>{}</wss>", c_exp(self.wss));
        let _ = write!(s, "<max_wss>{}</max_wss>", c_exp(self.max_wss));
        if self.network_suspended {
            s.push_str("<network_suspended/>");
        }
        if self.sporadic_ca != 0 {
            let _ = write!(s, "<sporadic_ca>{}</sporadic_ca>", self.sporadic_ca);
        }
        s
    }

    /// Decodes a heartbeat; `None` if the text is not one.
    pub fn decode(text: &str) -> Option<Heartbeat> {
        if !text.contains("<heartbeat/>") {
            return None;
        }
        Some(Heartbeat {
            wss: tag_f64(text, "wss").unwrap_or(0.0),
            max_wss: tag_f64(text, "max_wss").unwrap_or(0.0),
            network_suspended: text.contains("<network_suspended/>"),
            sporadic_ca: tag_f64(text, "sporadic_ca").map_or(0, |v| v as i32),
        })
    }
}

/// A status report from the app (app → client, `app_status` channel).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AppStatus {
    /// CPU seconds of the job so far, all episodes included (clamped to ≥ 0).
    pub current_cpu_time: f64,
    /// CPU seconds at the app's last checkpoint (clamped to ≥ 0).
    pub checkpoint_cpu_time: f64,
    /// Progress in [0, 1]; `None` until the app reported one (the API omits it before).
    pub fraction_done: Option<f64>,
    /// Working set the app reports about itself (wrappers do), in bytes.
    pub wss: Option<f64>,
    /// Whether the app asks for network access.
    pub want_network: bool,
    /// Bytes sent, as old apps reported it (kept because some apps still send it).
    pub bytes_sent: Option<f64>,
    /// Bytes received, as old apps reported it.
    pub bytes_received: Option<f64>,
    /// An extra process (e.g. a VM) whose resources count for this task.
    pub other_pid: Option<i32>,
    /// App→client sporadic state (0 NONE, 1 DONT_WANT_COMPUTE, 2 WANT_COMPUTE).
    pub sporadic_ac: i32,
}

impl AppStatus {
    /// Encodes the way the API's `update_app_progress` does (used by tests and fake apps).
    pub fn encode(&self) -> String {
        let mut s = String::with_capacity(200);
        let _ = writeln!(
            s,
            "<current_cpu_time>{}</current_cpu_time>",
            c_exp(self.current_cpu_time)
        );
        let _ = writeln!(
            s,
            "<checkpoint_cpu_time>{}</checkpoint_cpu_time>",
            c_exp(self.checkpoint_cpu_time)
        );
        let _ = writeln!(
            s,
            "<want_network>{}</want_network>",
            u8::from(self.want_network)
        );
        if let Some(fd) = self.fraction_done {
            let _ = writeln!(s, "<fraction_done>{}</fraction_done>", c_exp(fd));
        }
        if let Some(w) = self.wss {
            let _ = writeln!(s, "<wss>{w:.6}</wss>");
        }
        if let Some(b) = self.bytes_sent {
            let _ = writeln!(s, "<bytes_sent>{}</bytes_sent>", c_exp(b));
        }
        if let Some(b) = self.bytes_received {
            let _ = writeln!(s, "<bytes_received>{}</bytes_received>", c_exp(b));
        }
        if let Some(p) = self.other_pid {
            let _ = writeln!(s, "<other_pid>{p}</other_pid>");
        }
        if self.sporadic_ac != 0 {
            let _ = writeln!(s, "<sporadic_ac>{}</sporadic_ac>", self.sporadic_ac);
        }
        s
    }

    /// Decodes a status message. Unknown tags are ignored, missing CPU times read as 0 and
    /// negative ones are clamped, as the official client does. A zero fraction done counts as
    /// "not reported".
    pub fn decode(text: &str) -> AppStatus {
        let fd = tag_f64(text, "fraction_done").filter(|v| *v != 0.0);
        AppStatus {
            current_cpu_time: tag_f64(text, "current_cpu_time").unwrap_or(0.0).max(0.0),
            checkpoint_cpu_time: tag_f64(text, "checkpoint_cpu_time").unwrap_or(0.0).max(0.0),
            fraction_done: fd.map(|v| v.clamp(0.0, 1.0)),
            wss: tag_f64(text, "wss"),
            want_network: tag_f64(text, "want_network").is_some_and(|v| v != 0.0),
            bytes_sent: tag_f64(text, "bytes_sent"),
            bytes_received: tag_f64(text, "bytes_received"),
            other_pid: tag_f64(text, "other_pid").map(|v| v as i32),
            sporadic_ac: tag_f64(text, "sporadic_ac").map_or(0, |v| v as i32),
        }
    }
}

/// What the app announces on the `trickle_up` channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrickleUpNotice {
    /// The app wrote `trickle_up.xml`; the client moves it to the project directory.
    pub new_trickle_up: bool,
    /// The app asked for an intermediate upload (`boinc_ufr_*` files).
    pub new_upload_file: bool,
}

impl TrickleUpNotice {
    /// Encodes as the API does (each flag on its own line).
    pub fn encode(&self) -> String {
        let mut s = String::new();
        if self.new_trickle_up {
            s.push_str("<have_new_trickle_up/>\n");
        }
        if self.new_upload_file {
            s.push_str("<have_new_upload_file/>\n");
        }
        s
    }

    /// Decodes the flags.
    pub fn decode(text: &str) -> TrickleUpNotice {
        TrickleUpNotice {
            new_trickle_up: text.contains("<have_new_trickle_up/>"),
            new_upload_file: text.contains("<have_new_upload_file/>"),
        }
    }
}

/// What the client announces on the `trickle_down` channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrickleDownNotice {
    /// A `trickle_down_*` file was written into the slot.
    pub have_trickle_down: bool,
    /// A `boinc_ufs_*` upload status file was written into the slot.
    pub upload_file_status: bool,
}

impl TrickleDownNotice {
    /// Encodes as the official client does.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        if self.have_trickle_down {
            s.push_str("<have_trickle_down/>\n");
        }
        if self.upload_file_status {
            s.push_str("<upload_file_status/>\n");
        }
        s
    }

    /// Decodes the flags.
    pub fn decode(text: &str) -> TrickleDownNotice {
        TrickleDownNotice {
            have_trickle_down: text.contains("<have_trickle_down/>"),
            upload_file_status: text.contains("<upload_file_status/>"),
        }
    }
}

/// What a graphics-capable app reports on the `graphics_reply` channel.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GraphicsReply {
    /// URL of the app's web graphics, if any.
    pub web_graphics_url: Option<String>,
    /// Address for a remote desktop (VM apps), if any.
    pub remote_desktop_addr: Option<String>,
}

impl GraphicsReply {
    /// Decodes the two optional addresses.
    pub fn decode(text: &str) -> GraphicsReply {
        GraphicsReply {
            web_graphics_url: tag_text(text, "web_graphics_url").map(str::to_owned),
            remote_desktop_addr: tag_text(text, "remote_desktop_addr").map(str::to_owned),
        }
    }
}

/// Formats like C's `%e`: six decimals and a signed exponent of at least two digits.
pub fn c_exp(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "nan".into()
        } else if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let s = format!("{v:.6e}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

/// The text between `<tag>` and `</tag>`, trimmed.
fn tag_text<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = text.find(&open)? + open.len();
    let end = start + text[start..].find(&close)?;
    Some(text[start..end].trim())
}

/// A numeric element; unparsable numbers count as absent.
fn tag_f64(text: &str, tag: &str) -> Option<f64> {
    tag_text(text, tag)?.parse::<f64>().ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn c_exp_matches_printf() {
        assert_eq!(c_exp(0.0), "0.000000e+00");
        assert_eq!(c_exp(22748860000.0), "2.274886e+10");
        assert_eq!(c_exp(0.5), "5.000000e-01");
        assert_eq!(c_exp(1.5e-120), "1.500000e-120");
        assert_eq!(c_exp(-3.0), "-3.000000e+00");
    }

    #[test]
    fn heartbeat_round_trip_with_options() {
        let hb = Heartbeat {
            wss: 1.0e6,
            max_wss: 2.0e9,
            network_suspended: true,
            sporadic_ca: 3,
        };
        let text = hb.encode();
        assert_eq!(
            text,
            "<heartbeat/><wss>1.000000e+06</wss><max_wss>2.000000e+09</max_wss>\
             <network_suspended/><sporadic_ca>3</sporadic_ca>"
        );
        assert_eq!(Heartbeat::decode(&text), Some(hb));
        assert_eq!(Heartbeat::decode("<quit/>"), None);
    }

    #[test]
    fn app_status_as_the_api_writes_it() {
        let text = "<current_cpu_time>1.250000e+01</current_cpu_time>\n\
                    <checkpoint_cpu_time>1.000000e+01</checkpoint_cpu_time>\n\
                    <want_network>1</want_network>\n\
                    <fraction_done>4.200000e-01</fraction_done>\n";
        let st = AppStatus::decode(text);
        assert_eq!(st.current_cpu_time, 12.5);
        assert_eq!(st.checkpoint_cpu_time, 10.0);
        assert_eq!(st.fraction_done, Some(0.42));
        assert!(st.want_network);
        assert_eq!(st.wss, None);
        assert_eq!(AppStatus::decode(&st.encode()), st);
    }

    #[test]
    fn app_status_clamps_and_ignores() {
        let st = AppStatus::decode(
            "<current_cpu_time>-5</current_cpu_time><fraction_done>0</fraction_done>\
             <bytes_sent>100</bytes_sent><bytes_received>2e3</bytes_received>\
             <wss>123456.000000</wss><other_pid>77</other_pid><unknown>x</unknown>",
        );
        assert_eq!(st.current_cpu_time, 0.0);
        assert_eq!(st.checkpoint_cpu_time, 0.0);
        assert_eq!(st.fraction_done, None);
        assert_eq!(st.bytes_sent, Some(100.0));
        assert_eq!(st.bytes_received, Some(2000.0));
        assert_eq!(st.wss, Some(123456.0));
        assert_eq!(st.other_pid, Some(77));
        assert!(!st.want_network);
    }

    #[test]
    fn control_messages() {
        for m in [
            ControlMsg::Suspend,
            ControlMsg::Resume,
            ControlMsg::Quit,
            ControlMsg::Abort,
            ControlMsg::RereadAppInfo,
        ] {
            assert_eq!(ControlMsg::decode(m.encode()), Some(m));
        }
        assert_eq!(ControlMsg::Quit.encode(), "<quit/>");
        assert_eq!(ControlMsg::decode("<heartbeat/>"), None);
    }

    #[test]
    fn trickle_and_graphics() {
        let up = TrickleUpNotice::decode("<have_new_trickle_up/>\n");
        assert!(up.new_trickle_up && !up.new_upload_file);
        assert_eq!(TrickleUpNotice::decode(&up.encode()), up);
        let down = TrickleDownNotice {
            have_trickle_down: true,
            upload_file_status: false,
        };
        assert_eq!(down.encode(), "<have_trickle_down/>\n");
        assert_eq!(TrickleDownNotice::decode(&down.encode()), down);
        let g = GraphicsReply::decode("<web_graphics_url>http://x/</web_graphics_url>");
        assert_eq!(g.web_graphics_url.as_deref(), Some("http://x/"));
        assert_eq!(g.remote_desktop_addr, None);
    }
}
