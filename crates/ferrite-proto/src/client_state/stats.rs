//! `<time_stats>`, `<net_stats>`, `<active_task>` and `<user_cpid>`: the state file's
//! host-wide records (`client/time_stats.cpp`, `client/net_stats.cpp`, `client/app.cpp`).

use super::objects::{keep, Form};
use crate::xml::{Tag, XmlError, XmlReader, XmlWriter};

/// How much the host is on, connected and allowed to compute (`<time_stats>`).
#[derive(Debug, Clone, PartialEq)]
pub struct TimeStats {
    /// Fraction of time the client runs.
    pub on_frac: f64,
    /// Fraction of time connected to the network (-1 = unknown).
    pub connected_frac: f64,
    /// Fraction of time both computing and network are allowed.
    pub cpu_and_network_available_frac: f64,
    /// Fraction of time computing is allowed.
    pub active_frac: f64,
    /// Fraction of time GPU computing is allowed.
    pub gpu_active_frac: f64,
    /// When this client session started (Unix time).
    pub client_start_time: f64,
    /// When statistics started.
    pub total_start_time: f64,
    /// Seconds the client has run since `total_start_time`.
    pub total_duration: f64,
    /// Seconds computing was allowed.
    pub total_active_duration: f64,
    /// Seconds GPU computing was allowed.
    pub total_gpu_active_duration: f64,
    /// Length of the previous session, seconds.
    pub previous_uptime: f64,
    /// State file: last update of the averages (Unix time).
    pub last_update: f64,
    /// Request form: the time the request was made.
    pub now: f64,
    /// Request form: seconds computing was allowed this session.
    pub session_active_duration: f64,
    /// Request form: seconds GPU computing was allowed this session.
    pub session_gpu_active_duration: f64,
    /// Elements we do not know, kept verbatim.
    pub extra: Vec<String>,
}

impl Default for TimeStats {
    fn default() -> Self {
        TimeStats {
            on_frac: 1.0,
            connected_frac: 1.0,
            cpu_and_network_available_frac: 1.0,
            active_frac: 1.0,
            gpu_active_frac: 1.0,
            client_start_time: 0.0,
            total_start_time: 0.0,
            total_duration: 0.0,
            total_active_duration: 0.0,
            total_gpu_active_duration: 0.0,
            previous_uptime: 0.0,
            last_update: 0.0,
            now: 0.0,
            session_active_duration: 0.0,
            session_gpu_active_duration: 0.0,
            extra: Vec::new(),
        }
    }
}

/// A fraction in [0, 1] (`allow_unknown`: also -1), clamped with a warning.
fn frac<'a>(r: &mut XmlReader<'a>, t: &Tag<'a>, allow_unknown: bool) -> Result<f64, XmlError> {
    let Some(v) = r.num::<f64>(t)? else {
        return Ok(1.0);
    };
    if allow_unknown && v == -1.0 {
        return Ok(v);
    }
    if !(0.0..=1.0).contains(&v) {
        let c = v.clamp(0.0, 1.0);
        r.warn(t, format!("{v} is not a fraction; clamped to {c}"));
        return Ok(c);
    }
    Ok(v)
}

impl TimeStats {
    /// Reads `<time_stats>` (either form). Fractions out of range are clamped with a warning.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<TimeStats, XmlError> {
        let mut s = TimeStats::default();
        if tag.is_empty() {
            return Ok(s);
        }
        while let Some(t) = r.next_child()? {
            match t.name() {
                "on_frac" => s.on_frac = frac(r, &t, false)?,
                "connected_frac" => s.connected_frac = frac(r, &t, true)?,
                "cpu_and_network_available_frac" => {
                    s.cpu_and_network_available_frac = frac(r, &t, false)?
                }
                "active_frac" => s.active_frac = frac(r, &t, false)?,
                "gpu_active_frac" => s.gpu_active_frac = frac(r, &t, false)?,
                "client_start_time" => s.client_start_time = r.num_or(&t, 0.0)?,
                "total_start_time" => s.total_start_time = r.num_or(&t, 0.0)?,
                "total_duration" => s.total_duration = r.num_or(&t, 0.0)?,
                "total_active_duration" => s.total_active_duration = r.num_or(&t, 0.0)?,
                "total_gpu_active_duration" => s.total_gpu_active_duration = r.num_or(&t, 0.0)?,
                "previous_uptime" => s.previous_uptime = r.num_or(&t, 0.0)?,
                "last_update" => s.last_update = r.num_or(&t, 0.0)?,
                "now" => s.now = r.num_or(&t, 0.0)?,
                "session_active_duration" => s.session_active_duration = r.num_or(&t, 0.0)?,
                "session_gpu_active_duration" => {
                    s.session_gpu_active_duration = r.num_or(&t, 0.0)?
                }
                _ => keep(r, &t, "time_stats", &mut s.extra)?,
            }
        }
        Ok(s)
    }

    /// Writes `<time_stats>`: [`Form::State`] ends with `last_update`, [`Form::Request`] with
    /// `now` and the session durations.
    pub fn write(&self, w: &mut XmlWriter, form: Form) {
        w.open("time_stats")
            .f64("on_frac", self.on_frac)
            .f64("connected_frac", self.connected_frac)
            .f64(
                "cpu_and_network_available_frac",
                self.cpu_and_network_available_frac,
            )
            .f64("active_frac", self.active_frac)
            .f64("gpu_active_frac", self.gpu_active_frac)
            .f64("client_start_time", self.client_start_time)
            .f64("total_start_time", self.total_start_time)
            .f64("total_duration", self.total_duration)
            .f64("total_active_duration", self.total_active_duration)
            .f64("total_gpu_active_duration", self.total_gpu_active_duration);
        if form == Form::State {
            w.f64("previous_uptime", self.previous_uptime)
                .f64("last_update", self.last_update);
        } else {
            w.f64("now", self.now)
                .f64("previous_uptime", self.previous_uptime)
                .f64("session_active_duration", self.session_active_duration)
                .f64(
                    "session_gpu_active_duration",
                    self.session_gpu_active_duration,
                );
        }
        for e in &self.extra {
            w.raw(e);
        }
        w.close("time_stats");
    }
}

/// Network throughput estimates (`<net_stats>`), bytes/s, exponentially averaged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetStats {
    /// Upload bandwidth estimate.
    pub bwup: f64,
    /// Averaged upload bytes.
    pub avg_up: f64,
    /// When `avg_up` was last updated.
    pub avg_time_up: f64,
    /// Download bandwidth estimate.
    pub bwdown: f64,
    /// Averaged download bytes.
    pub avg_down: f64,
    /// When `avg_down` was last updated.
    pub avg_time_down: f64,
    /// Elements we do not know, kept verbatim.
    pub extra: Vec<String>,
}

impl NetStats {
    /// Reads `<net_stats>`.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<NetStats, XmlError> {
        let mut s = NetStats::default();
        if tag.is_empty() {
            return Ok(s);
        }
        while let Some(t) = r.next_child()? {
            match t.name() {
                "bwup" => s.bwup = r.num_or(&t, 0.0)?,
                "avg_up" => s.avg_up = r.num_or(&t, 0.0)?,
                "avg_time_up" => s.avg_time_up = r.num_or(&t, 0.0)?,
                "bwdown" => s.bwdown = r.num_or(&t, 0.0)?,
                "avg_down" => s.avg_down = r.num_or(&t, 0.0)?,
                "avg_time_down" => s.avg_time_down = r.num_or(&t, 0.0)?,
                _ => keep(r, &t, "net_stats", &mut s.extra)?,
            }
        }
        Ok(s)
    }

    /// Writes `<net_stats>` (the same in every document).
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("net_stats")
            .f64("bwup", self.bwup)
            .f64("avg_up", self.avg_up)
            .f64("avg_time_up", self.avg_time_up)
            .f64("bwdown", self.bwdown)
            .f64("avg_down", self.avg_down)
            .f64("avg_time_down", self.avg_time_down);
        for e in &self.extra {
            w.raw(e);
        }
        w.close("net_stats");
    }
}

/// A task that was running (or preempted in memory) when the file was written
/// (`<active_task>`): enough to restart it from its checkpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ActiveTask {
    /// Project of the result.
    pub project_master_url: String,
    /// The result.
    pub result_name: String,
    /// Process state number (`PROCESS_*`; ignored on read by BOINC).
    pub active_task_state: i32,
    /// App version number.
    pub app_version_num: i32,
    /// Slot directory number.
    pub slot: i32,
    /// CPU time at the last checkpoint, seconds.
    pub checkpoint_cpu_time: f64,
    /// Elapsed time at the last checkpoint, seconds.
    pub checkpoint_elapsed_time: f64,
    /// Fraction done at the last checkpoint.
    pub checkpoint_fraction_done: f64,
    /// Elapsed time when that fraction was reached.
    pub checkpoint_fraction_done_elapsed_time: f64,
    /// CPU time so far, seconds.
    pub current_cpu_time: f64,
    /// Ran in deadline (EDF) mode once.
    pub once_ran_edf: bool,
    /// Virtual memory size, bytes (written by newer clients).
    pub virtual_size: Option<f64>,
    /// Swap size, bytes.
    pub swap_size: f64,
    /// Resident set size, bytes.
    pub working_set_size: f64,
    /// Smoothed resident set size, bytes.
    pub working_set_size_smoothed: f64,
    /// Page fault rate (written by older clients).
    pub page_fault_rate: Option<f64>,
    /// Bytes sent by the app (written by older clients).
    pub bytes_sent: Option<f64>,
    /// Bytes received by the app (written by older clients).
    pub bytes_received: Option<f64>,
    /// Elements we do not know, kept verbatim.
    pub extra: Vec<String>,
}

impl ActiveTask {
    /// Reads `<active_task>`; `<project_master_url>` and `<result_name>` are mandatory.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<ActiveTask, XmlError> {
        let mut a = ActiveTask::default();
        if !tag.is_empty() {
            while let Some(t) = r.next_child()? {
                match t.name() {
                    "project_master_url" => a.project_master_url = r.string(&t)?,
                    "result_name" => a.result_name = r.string(&t)?,
                    "active_task_state" => a.active_task_state = r.num_or(&t, 0)?,
                    "app_version_num" => a.app_version_num = r.num_or(&t, 0)?,
                    "slot" => a.slot = r.num_clamped(&t, 0, 1 << 20)?.unwrap_or(0),
                    "checkpoint_cpu_time" => a.checkpoint_cpu_time = r.num_or(&t, 0.0)?,
                    "checkpoint_elapsed_time" => a.checkpoint_elapsed_time = r.num_or(&t, 0.0)?,
                    "checkpoint_fraction_done" => {
                        a.checkpoint_fraction_done = r.num_clamped(&t, 0.0, 1.0)?.unwrap_or(0.0)
                    }
                    "checkpoint_fraction_done_elapsed_time" => {
                        a.checkpoint_fraction_done_elapsed_time = r.num_or(&t, 0.0)?
                    }
                    "current_cpu_time" => a.current_cpu_time = r.num_or(&t, 0.0)?,
                    "once_ran_edf" => a.once_ran_edf = r.flag(&t)?,
                    "virtual_size" => a.virtual_size = r.num(&t)?,
                    "swap_size" => a.swap_size = r.num_or(&t, 0.0)?,
                    "working_set_size" => a.working_set_size = r.num_or(&t, 0.0)?,
                    "working_set_size_smoothed" => {
                        a.working_set_size_smoothed = r.num_or(&t, 0.0)?
                    }
                    "page_fault_rate" => a.page_fault_rate = r.num(&t)?,
                    "bytes_sent" => a.bytes_sent = r.num(&t)?,
                    "bytes_received" => a.bytes_received = r.num(&t)?,
                    _ => keep(r, &t, "active_task", &mut a.extra)?,
                }
            }
        }
        if a.project_master_url.is_empty() {
            return Err(r.missing(tag, "project_master_url"));
        }
        if a.result_name.is_empty() {
            return Err(r.missing(tag, "result_name"));
        }
        Ok(a)
    }

    /// Writes `<active_task>`.
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("active_task")
            .text("project_master_url", &self.project_master_url)
            .text("result_name", &self.result_name)
            .num("active_task_state", self.active_task_state)
            .num("app_version_num", self.app_version_num)
            .num("slot", self.slot)
            .f64("checkpoint_cpu_time", self.checkpoint_cpu_time)
            .f64("checkpoint_elapsed_time", self.checkpoint_elapsed_time)
            .f64("checkpoint_fraction_done", self.checkpoint_fraction_done)
            .f64(
                "checkpoint_fraction_done_elapsed_time",
                self.checkpoint_fraction_done_elapsed_time,
            )
            .f64("current_cpu_time", self.current_cpu_time)
            .bool01("once_ran_edf", self.once_ran_edf);
        if let Some(v) = self.virtual_size {
            w.f64("virtual_size", v);
        }
        w.f64("swap_size", self.swap_size)
            .f64("working_set_size", self.working_set_size)
            .f64("working_set_size_smoothed", self.working_set_size_smoothed);
        for (name, v) in [
            ("page_fault_rate", self.page_fault_rate),
            ("bytes_sent", self.bytes_sent),
            ("bytes_received", self.bytes_received),
        ] {
            if let Some(v) = v {
                w.f64(name, v);
            }
        }
        for e in &self.extra {
            w.raw(e);
        }
        w.close("active_task");
    }
}

/// A user's cross-project id as learned from one e-mail hash (`<user_cpid>`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UserCpid {
    /// MD5 of the e-mail address.
    pub email_hash: String,
    /// The oldest CPID known for it.
    pub cpid: String,
    /// The account creation time that CPID came with.
    pub time: f64,
}

impl UserCpid {
    /// Reads `<user_cpid>`.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<UserCpid, XmlError> {
        let mut u = UserCpid::default();
        if tag.is_empty() {
            return Ok(u);
        }
        while let Some(t) = r.next_child()? {
            match t.name() {
                "email_hash" => u.email_hash = r.string(&t)?,
                "cpid" => u.cpid = r.string(&t)?,
                "time" => u.time = r.num_or(&t, 0.0)?,
                _ => r.unknown(&t, "user_cpid")?,
            }
        }
        Ok(u)
    }

    /// Writes `<user_cpid>`.
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("user_cpid")
            .text("email_hash", &self.email_hash)
            .text("cpid", &self.cpid)
            .f64("time", self.time)
            .close("user_cpid");
    }
}
