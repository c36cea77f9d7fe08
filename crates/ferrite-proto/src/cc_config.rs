//! `cc_config.xml`: the client configuration (`<log_flags>` and `<options>`), read at start-up
//! and on the GUI "read config" request, and written for the GUI RPC `get_cc_config`.
//!
//! Also owns `<proxy_info>`, which appears in `cc_config.xml` options, in the state file and in
//! `init_data.xml`.

use crate::account::canonicalize_master_url;
use crate::xml::{Parsed, Tag, XmlError, XmlReader, XmlWriter};

macro_rules! log_flags {
    ($( $(#[$doc:meta])* $name:ident = $default:literal ),* $(,)?) => {
        /// `<log_flags>`: which classes of event-log messages are written. Each flag is named
        /// after its element.
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[allow(missing_docs)]
        pub struct LogFlags {
            $( $(#[$doc])* pub $name: bool, )*
        }

        impl Default for LogFlags {
            fn default() -> Self {
                Self { $( $name: $default, )* }
            }
        }

        impl LogFlags {
            /// Every flag's element name, in the order BOINC writes them.
            pub const NAMES: &'static [&'static str] = &[$( stringify!($name), )*];

            /// The flag named `name`, for code that looks flags up by name.
            pub fn get(&self, name: &str) -> Option<bool> {
                match name {
                    $( stringify!($name) => Some(self.$name), )*
                    _ => None,
                }
            }

            fn slot(&mut self, name: &str) -> Option<&mut bool> {
                match name {
                    $( stringify!($name) => Some(&mut self.$name), )*
                    _ => None,
                }
            }

            /// Reads `<log_flags>`; unknown flags are warned about and ignored.
            pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Self, XmlError> {
                let mut f = Self::default();
                if tag.is_empty() {
                    return Ok(f);
                }
                while let Some(child) = r.next_child()? {
                    let v = if f.get(child.name()).is_some() {
                        Some(r.flag(&child)?)
                    } else {
                        None
                    };
                    match (v, f.slot(child.name())) {
                        (Some(v), Some(slot)) => *slot = v,
                        _ => r.unknown(&child, "log_flags")?,
                    }
                }
                Ok(f)
            }

            /// Writes `<log_flags>` with every flag as 0/1.
            pub fn write(&self, w: &mut XmlWriter) {
                w.open("log_flags");
                $( w.bool01(stringify!($name), self.$name); )*
                w.close("log_flags");
            }
        }
    };
}

log_flags! {
    /// File transfer starts and ends.
    file_xfer = true,
    /// Scheduler RPCs.
    sched_ops = true,
    /// Task starts, ends, suspensions.
    task = true,
    android_debug = false,
    app_msg_receive = false,
    app_msg_send = false,
    async_file_debug = false,
    benchmark_debug = false,
    checkpoint_debug = false,
    coproc_debug = false,
    cpu_sched = false,
    cpu_sched_debug = false,
    cpu_sched_status = false,
    dcf_debug = false,
    disk_usage_debug = false,
    priority_debug = false,
    file_xfer_debug = false,
    gui_rpc_debug = false,
    gui_rpc_msg_debug = false,
    heartbeat_debug = false,
    http_debug = false,
    http_xfer_debug = false,
    idle_detection_debug = false,
    mem_usage_debug = false,
    network_status_debug = false,
    notice_debug = false,
    poll_debug = false,
    proxy_debug = false,
    rr_simulation = false,
    rrsim_detail = false,
    sched_op_debug = false,
    scrsave_debug = false,
    slot_debug = false,
    sporadic_debug = false,
    state_debug = false,
    statefile_debug = false,
    suspend_debug = false,
    task_debug = false,
    time_debug = false,
    trickle_debug = false,
    unparsed_xml = false,
    work_fetch_debug = false,
}

/// A user-declared coprocessor (`<coproc>` in options).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConfigCoproc {
    /// Resource type name; becomes a scheduling resource of its own.
    pub rsc_type: String,
    /// Number of instances.
    pub count: i32,
    /// Peak FLOPS of one instance (for work-fetch estimates).
    pub peak_flops: f64,
    /// Device numbers given to apps; `0..count` when the file gives none.
    pub device_nums: Vec<i32>,
    /// Not a GPU (apps are not told a GPU device).
    pub non_gpu: bool,
}

/// `<exclude_gpu>`: do not use a GPU for a project (or one of its apps).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExcludeGpu {
    /// The project's canonical master URL.
    pub url: String,
    /// Device number; `None` = all devices.
    pub device_num: Option<i32>,
    /// GPU type (`NVIDIA`, `ATI`, `intel_gpu`, …); `None` = all types.
    pub rsc_type: Option<String>,
    /// App name; `None` = all the project's apps.
    pub app: Option<String>,
}

/// Proxy settings (`<proxy_info>`, BOINC `PROXY_INFO`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyInfo {
    /// Use the HTTP proxy (set when `http_server_name` is given in cc_config).
    pub use_http_proxy: bool,
    /// Use the SOCKS proxy.
    pub use_socks_proxy: bool,
    /// Authenticate to the HTTP proxy.
    pub use_http_auth: bool,
    /// SOCKS server host.
    pub socks_server_name: String,
    /// SOCKS server port.
    pub socks_server_port: i32,
    /// HTTP proxy host.
    pub http_server_name: String,
    /// HTTP proxy port.
    pub http_server_port: i32,
    /// SOCKS5 user.
    pub socks5_user_name: String,
    /// SOCKS5 password.
    pub socks5_user_passwd: String,
    /// Resolve names through the SOCKS5 proxy.
    pub socks5_remote_dns: bool,
    /// HTTP proxy user.
    pub http_user_name: String,
    /// HTTP proxy password.
    pub http_user_passwd: String,
    /// Hosts not to reach through the proxy (comma-separated).
    pub no_proxy: String,
    /// Do not auto-detect proxy settings.
    pub no_autodetect: bool,
}

impl Default for ProxyInfo {
    fn default() -> Self {
        Self {
            use_http_proxy: false,
            use_socks_proxy: false,
            use_http_auth: false,
            socks_server_name: String::new(),
            socks_server_port: 80,
            http_server_name: String::new(),
            http_server_port: 80,
            socks5_user_name: String::new(),
            socks5_user_passwd: String::new(),
            socks5_remote_dns: false,
            http_user_name: String::new(),
            http_user_passwd: String::new(),
            no_proxy: String::new(),
            no_autodetect: false,
        }
    }
}

impl ProxyInfo {
    /// Whether a proxy is configured (a server name is set), which is when BOINC writes it
    /// into `init_data.xml`.
    pub fn present(&self) -> bool {
        !self.http_server_name.is_empty() || !self.socks_server_name.is_empty()
    }

    /// Reads `<proxy_info>` as stored (the `use_*` flags as written).
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Self, XmlError> {
        let mut p = Self::default();
        if tag.is_empty() {
            return Ok(p);
        }
        while let Some(c) = r.next_child()? {
            match c.name() {
                "use_http_proxy" => p.use_http_proxy = r.flag(&c)?,
                "use_socks_proxy" => p.use_socks_proxy = r.flag(&c)?,
                "use_http_auth" => p.use_http_auth = r.flag(&c)?,
                "socks_server_name" => p.socks_server_name = r.string(&c)?,
                "socks_server_port" => p.socks_server_port = r.num_or(&c, 80)?,
                "http_server_name" => p.http_server_name = r.string(&c)?,
                "http_server_port" => p.http_server_port = r.num_or(&c, 80)?,
                "socks5_user_name" => p.socks5_user_name = r.string(&c)?,
                "socks5_user_passwd" => p.socks5_user_passwd = r.string(&c)?,
                "socks5_remote_dns" => p.socks5_remote_dns = r.flag(&c)?,
                "http_user_name" => p.http_user_name = r.string(&c)?,
                "http_user_passwd" => p.http_user_passwd = r.string(&c)?,
                "no_proxy" => p.no_proxy = r.string(&c)?,
                "no_autodetect" => p.no_autodetect = r.flag(&c)?,
                // Written by BOINC only when auto-detected; not configuration.
                "autodetect_protocol" | "autodetect_server_name" | "autodetect_port" => {
                    r.skip(&c)?
                }
                _ => r.unknown(&c, "proxy_info")?,
            }
        }
        Ok(p)
    }

    /// Reads `<proxy_info>` from `cc_config.xml`: a server or user name given turns the
    /// matching `use_*` flag on (BOINC `parse_config`).
    pub fn read_config(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Self, XmlError> {
        let mut p = Self::read(r, tag)?;
        p.use_http_proxy |= !p.http_server_name.is_empty();
        p.use_socks_proxy |= !p.socks_server_name.is_empty();
        p.use_http_auth |= !p.http_user_name.is_empty();
        Ok(p)
    }

    /// Writes `<proxy_info>` as BOINC does.
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("proxy_info")
            .flag("use_http_proxy", self.use_http_proxy)
            .flag("use_socks_proxy", self.use_socks_proxy)
            .flag("use_http_auth", self.use_http_auth)
            .text("socks_server_name", &self.socks_server_name)
            .num("socks_server_port", self.socks_server_port)
            .text("http_server_name", &self.http_server_name)
            .num("http_server_port", self.http_server_port)
            .text("socks5_user_name", &self.socks5_user_name)
            .text("socks5_user_passwd", &self.socks5_user_passwd)
            .bool01("socks5_remote_dns", self.socks5_remote_dns)
            .text("http_user_name", &self.http_user_name)
            .text("http_user_passwd", &self.http_user_passwd)
            .text("no_proxy", &self.no_proxy)
            .bool01("no_autodetect", self.no_autodetect)
            .close("proxy_info");
    }
}

/// `<options>` (BOINC `CC_CONFIG`). Booleans default to false unless noted.
#[derive(Debug, Clone, PartialEq)]
pub struct CcOptions {
    /// Abort all jobs and report them on exit.
    pub abort_jobs_on_exit: bool,
    /// Accept GUI RPCs over HTTP GET.
    pub allow_gui_rpc_get: bool,
    /// Several clients per host; also sent to the scheduler.
    pub allow_multiple_clients: bool,
    /// Accept GUI RPC connections from any host.
    pub allow_remote_gui_rpc: bool,
    /// Extra platform names for scheduler requests, after the detected ones.
    pub alt_platforms: Vec<String>,
    /// User-declared coprocessors.
    pub coprocs: Vec<ConfigCoproc>,
    /// Name reported instead of the host name.
    pub device_name: String,
    /// Refuse project attaches.
    pub disallow_attach: bool,
    /// Skip file size checks.
    pub dont_check_file_sizes: bool,
    /// Don't probe a reference site / fetch the project list.
    pub dont_contact_ref_site: bool,
    /// Never suspend non-CPU-intensive tasks.
    pub dont_suspend_nci: bool,
    /// Reject VirtualBox app versions.
    pub dont_use_vbox: bool,
    /// Reject WSL app versions.
    pub dont_use_wsl: bool,
    /// Reject Docker/Podman app versions; also sent to the scheduler.
    pub dont_use_docker: bool,
    /// WSL distributions not to use.
    pub disallowed_wsls: Vec<String>,
    /// GPUs not to use for given projects/apps.
    pub exclude_gpus: Vec<ExcludeGpu>,
    /// Programs whose running suspends computing (names containing "boinc" are dropped).
    pub exclusive_apps: Vec<String>,
    /// Programs whose running suspends GPU computing.
    pub exclusive_gpu_apps: Vec<String>,
    /// Exit after a task finishes (testing).
    pub exit_after_finish: bool,
    /// Exit just before starting a task (testing).
    pub exit_before_start: bool,
    /// Exit when no tasks remain; implies `report_results_immediately`.
    pub exit_when_idle: bool,
    /// One job per device, then no more fetches.
    pub fetch_minimal_work: bool,
    /// A user "Update" also fetches work.
    pub fetch_on_update: bool,
    /// Proxy authentication method, lower case (`default`, `basic`, `digest`, …).
    pub force_auth: String,
    /// Use HTTP/1.0.
    pub http_1_0: bool,
    /// Abort a transfer slower than `http_transfer_timeout_bps` for this many seconds.
    pub http_transfer_timeout: i32,
    /// See `http_transfer_timeout`, bytes/s.
    pub http_transfer_timeout_bps: i32,
    /// NVIDIA device numbers to ignore (`ignore_nvidia_dev`, alias `ignore_cuda_dev`).
    pub ignore_nvidia_dev: Vec<i32>,
    /// AMD device numbers to ignore.
    pub ignore_ati_dev: Vec<i32>,
    /// Intel GPU device numbers to ignore.
    pub ignore_intel_dev: Vec<i32>,
    /// Apple GPU device numbers to ignore.
    pub ignore_apple_dev: Vec<i32>,
    /// TTYs ignored by idle detection.
    pub ignore_tty: Vec<String>,
    /// Run the client itself at low priority.
    pub lower_client_priority: bool,
    /// Event-log messages kept in memory.
    pub max_event_log_lines: i32,
    /// Concurrent transfers per direction.
    pub max_file_xfers: i32,
    /// Concurrent transfers per project and direction.
    pub max_file_xfers_per_project: i32,
    /// Abort running tasks overdue by more than this many days (< 0 = off).
    pub max_overdue_days: f64,
    /// Rotation size of `stderrdae.txt`, bytes (0 = default).
    pub max_stderr_file_size: f64,
    /// Rotation size of `stdoutdae.txt`, bytes (0 = default).
    pub max_stdout_file_size: f64,
    /// Most results reported per scheduler request (0 = no limit).
    pub max_tasks_reported: i32,
    /// Act as if the host had this many CPUs (> 0); -1 = detected.
    pub ncpus: i32,
    /// Report only the primary platform.
    pub no_alt_platform: bool,
    /// Omit `<disk_usage>` from requests.
    pub no_disk_usage: bool,
    /// Don't use GPUs.
    pub no_gpus: bool,
    /// Don't fetch the project list or new-version info.
    pub no_info_fetch: bool,
    /// Don't detect or use OpenCL.
    pub no_opencl: bool,
    /// Run apps at normal priority.
    pub no_priority_change: bool,
    /// (Windows) don't treat Remote Desktop as GPU-unusable.
    pub no_rdp_check: bool,
    /// Use only OS randomness for secrets.
    pub os_random_only: bool,
    /// The CPU scheduler favours GPU jobs.
    pub prioritize_gpu: bool,
    /// App priority for normal jobs (-1 unspecified, 0 lowest … 5 realtime).
    pub process_priority: i32,
    /// App priority for GPU and wrapper jobs.
    pub process_priority_special: i32,
    /// Proxy settings, when given.
    pub proxy_info: Option<ProxyInfo>,
    /// Half-life of recent estimated credit, days (≤ 0 → 10).
    pub rec_half_life_days: f64,
    /// Report each result as soon as it is uploaded.
    pub report_results_immediately: bool,
    /// Debugging: don't launch apps.
    pub run_apps_manually: bool,
    /// Days of credit history kept in `statistics_*.xml`.
    pub save_stats_days: i32,
    /// Hint to the manager.
    pub simple_gui_only: bool,
    /// Don't run CPU benchmarks.
    pub skip_cpu_benchmarks: bool,
    /// Seconds to wait after start before computing.
    pub start_delay: f64,
    /// Report the head instead of the tail of app stderr.
    pub stderr_head: bool,
    /// Omit IP address and host name from requests.
    pub suppress_net_info: bool,
    /// Skip code-signature checks (testing).
    pub unsigned_apps_ok: bool,
    /// Use all GPUs, not only the most capable of each vendor.
    pub use_all_gpus: bool,
    /// Accept certificate-based app signatures.
    pub use_certs: bool,
    /// Accept only certificate-based app signatures.
    pub use_certs_only: bool,
    /// Show VirtualBox VM windows.
    pub vbox_window: bool,
    /// Ferrite only: serve OpenMetrics (Prometheus) text on `127.0.0.1:PORT/metrics`; 0 = off.
    /// Opt-in because it opens a port; loopback only because it is unauthenticated. Written
    /// back only when set, so a file Ferrite writes stays free of it for the official client.
    pub ferrite_metrics_port: u16,
    /// Ferrite only: `<ferrite_confine_apps>0</ferrite_confine_apps>` runs every app without
    /// Landlock confinement (default on); written back only when off.
    pub ferrite_confine_apps: bool,
    /// Ferrite only: `<ferrite_unconfined_project>URL</ferrite_unconfined_project>`, once per
    /// project whose apps run without confinement (canonical master URLs).
    pub ferrite_unconfined_projects: Vec<String>,
    /// Ferrite only: `<ferrite_checkpoint_grace>SECS</ferrite_checkpoint_grace>`, how long a
    /// task that checkpoints may run on to its next checkpoint when computing is suspended
    /// for a reason that can wait (default 300; 0 = suspend at once); written back only when
    /// not the default.
    pub ferrite_checkpoint_grace: f64,
}

/// The default of `ferrite_checkpoint_grace`, seconds.
pub const CHECKPOINT_GRACE_DEFAULT_SECS: f64 = 300.0;

impl Default for CcOptions {
    fn default() -> Self {
        Self {
            abort_jobs_on_exit: false,
            allow_gui_rpc_get: false,
            allow_multiple_clients: false,
            allow_remote_gui_rpc: false,
            alt_platforms: Vec::new(),
            coprocs: Vec::new(),
            device_name: String::new(),
            disallow_attach: false,
            dont_check_file_sizes: false,
            dont_contact_ref_site: false,
            dont_suspend_nci: false,
            dont_use_vbox: false,
            dont_use_wsl: false,
            dont_use_docker: false,
            disallowed_wsls: Vec::new(),
            exclude_gpus: Vec::new(),
            exclusive_apps: Vec::new(),
            exclusive_gpu_apps: Vec::new(),
            exit_after_finish: false,
            exit_before_start: false,
            exit_when_idle: false,
            fetch_minimal_work: false,
            fetch_on_update: false,
            force_auth: "default".to_owned(),
            http_1_0: false,
            http_transfer_timeout: 300,
            http_transfer_timeout_bps: 10,
            ignore_nvidia_dev: Vec::new(),
            ignore_ati_dev: Vec::new(),
            ignore_intel_dev: Vec::new(),
            ignore_apple_dev: Vec::new(),
            ignore_tty: Vec::new(),
            lower_client_priority: false,
            max_event_log_lines: 2000,
            max_file_xfers: 8,
            max_file_xfers_per_project: 2,
            max_overdue_days: -1.0,
            max_stderr_file_size: 0.0,
            max_stdout_file_size: 0.0,
            max_tasks_reported: 0,
            ncpus: -1,
            no_alt_platform: false,
            no_disk_usage: false,
            no_gpus: false,
            no_info_fetch: false,
            no_opencl: false,
            no_priority_change: false,
            no_rdp_check: false,
            os_random_only: false,
            prioritize_gpu: false,
            process_priority: -1,
            process_priority_special: -1,
            proxy_info: None,
            rec_half_life_days: 10.0,
            report_results_immediately: false,
            run_apps_manually: false,
            save_stats_days: 30,
            simple_gui_only: false,
            skip_cpu_benchmarks: false,
            start_delay: 0.0,
            stderr_head: false,
            suppress_net_info: false,
            unsigned_apps_ok: false,
            use_all_gpus: false,
            use_certs: false,
            use_certs_only: false,
            vbox_window: false,
            ferrite_metrics_port: 0,
            ferrite_confine_apps: true,
            ferrite_unconfined_projects: Vec::new(),
            ferrite_checkpoint_grace: CHECKPOINT_GRACE_DEFAULT_SECS,
        }
    }
}

impl CcOptions {
    fn bool_slot(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "abort_jobs_on_exit" => &mut self.abort_jobs_on_exit,
            "allow_gui_rpc_get" => &mut self.allow_gui_rpc_get,
            "allow_multiple_clients" => &mut self.allow_multiple_clients,
            "allow_remote_gui_rpc" => &mut self.allow_remote_gui_rpc,
            "disallow_attach" => &mut self.disallow_attach,
            "dont_check_file_sizes" => &mut self.dont_check_file_sizes,
            "dont_contact_ref_site" => &mut self.dont_contact_ref_site,
            "lower_client_priority" => &mut self.lower_client_priority,
            "dont_suspend_nci" => &mut self.dont_suspend_nci,
            "dont_use_vbox" => &mut self.dont_use_vbox,
            "dont_use_docker" | "dont_use_podman" => &mut self.dont_use_docker,
            "dont_use_wsl" => &mut self.dont_use_wsl,
            "exit_after_finish" => &mut self.exit_after_finish,
            "exit_before_start" => &mut self.exit_before_start,
            "ferrite_confine_apps" => &mut self.ferrite_confine_apps,
            "fetch_minimal_work" => &mut self.fetch_minimal_work,
            "fetch_on_update" => &mut self.fetch_on_update,
            "http_1_0" => &mut self.http_1_0,
            "no_alt_platform" => &mut self.no_alt_platform,
            "no_disk_usage" => &mut self.no_disk_usage,
            "no_gpus" => &mut self.no_gpus,
            "no_info_fetch" => &mut self.no_info_fetch,
            "no_opencl" => &mut self.no_opencl,
            "no_priority_change" => &mut self.no_priority_change,
            "no_rdp_check" => &mut self.no_rdp_check,
            "os_random_only" => &mut self.os_random_only,
            "prioritize_gpu" => &mut self.prioritize_gpu,
            "report_results_immediately" => &mut self.report_results_immediately,
            "run_apps_manually" => &mut self.run_apps_manually,
            "simple_gui_only" => &mut self.simple_gui_only,
            "skip_cpu_benchmarks" => &mut self.skip_cpu_benchmarks,
            "stderr_head" => &mut self.stderr_head,
            "suppress_net_info" => &mut self.suppress_net_info,
            "unsigned_apps_ok" => &mut self.unsigned_apps_ok,
            "use_all_gpus" => &mut self.use_all_gpus,
            "use_certs" => &mut self.use_certs,
            "use_certs_only" => &mut self.use_certs_only,
            "vbox_window" => &mut self.vbox_window,
            _ => return None,
        })
    }

    fn i32_slot(&mut self, name: &str) -> Option<&mut i32> {
        Some(match name {
            "http_transfer_timeout" => &mut self.http_transfer_timeout,
            "http_transfer_timeout_bps" => &mut self.http_transfer_timeout_bps,
            "max_event_log_lines" => &mut self.max_event_log_lines,
            "max_file_xfers" => &mut self.max_file_xfers,
            "max_file_xfers_per_project" => &mut self.max_file_xfers_per_project,
            "max_tasks_reported" => &mut self.max_tasks_reported,
            "ncpus" => &mut self.ncpus,
            "process_priority" => &mut self.process_priority,
            "process_priority_special" => &mut self.process_priority_special,
            "save_stats_days" => &mut self.save_stats_days,
            _ => return None,
        })
    }

    fn f64_slot(&mut self, name: &str) -> Option<&mut f64> {
        Some(match name {
            "max_overdue_days" => &mut self.max_overdue_days,
            "max_stderr_file_size" => &mut self.max_stderr_file_size,
            "max_stdout_file_size" => &mut self.max_stdout_file_size,
            "start_delay" => &mut self.start_delay,
            "ferrite_checkpoint_grace" => &mut self.ferrite_checkpoint_grace,
            _ => return None,
        })
    }

    /// Reads `<options>`.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Self, XmlError> {
        let mut o = Self::default();
        if tag.is_empty() {
            return Ok(o);
        }
        while let Some(c) = r.next_child()? {
            let name = c.name();
            if o.bool_slot(name).is_some() {
                let v = r.flag(&c)?;
                if let Some(slot) = o.bool_slot(name) {
                    *slot = v;
                }
                continue;
            }
            if o.i32_slot(name).is_some() {
                if let Some(v) = r.num::<i32>(&c)? {
                    if let Some(slot) = o.i32_slot(name) {
                        *slot = v;
                    }
                }
                continue;
            }
            if o.f64_slot(name).is_some() {
                if let Some(v) = r.num::<f64>(&c)? {
                    if let Some(slot) = o.f64_slot(name) {
                        *slot = v;
                    }
                }
                continue;
            }
            match name {
                "alt_platform" => o.alt_platforms.push(r.string(&c)?),
                "coproc" => {
                    if let Some(cp) = read_coproc(r, &c)? {
                        o.coprocs.push(cp);
                    }
                }
                "device_name" => o.device_name = r.string(&c)?,
                "disallowed_wsl" => o.disallowed_wsls.push(r.string(&c)?),
                "exclude_gpu" => {
                    if let Some(e) = read_exclude_gpu(r, &c)? {
                        o.exclude_gpus.push(e);
                    }
                }
                "exclusive_app" | "exclusive_gpu_app" => {
                    let s = r.string(&c)?;
                    if s.contains("boinc") {
                        r.warn(&c, format!("'{s}' names a BOINC program; ignored"));
                    } else if name == "exclusive_app" {
                        o.exclusive_apps.push(s);
                    } else {
                        o.exclusive_gpu_apps.push(s);
                    }
                }
                "exit_when_idle" => {
                    o.exit_when_idle = r.flag(&c)?;
                    if o.exit_when_idle {
                        o.report_results_immediately = true;
                    }
                }
                "force_auth" => o.force_auth = r.string(&c)?.to_lowercase(),
                "ignore_nvidia_dev" | "ignore_cuda_dev" | "ignore_ati_dev" | "ignore_intel_dev"
                | "ignore_apple_dev" => {
                    if let Some(n) = r.num::<i32>(&c)? {
                        match name {
                            "ignore_ati_dev" => o.ignore_ati_dev.push(n),
                            "ignore_intel_dev" => o.ignore_intel_dev.push(n),
                            "ignore_apple_dev" => o.ignore_apple_dev.push(n),
                            _ => o.ignore_nvidia_dev.push(n),
                        }
                    }
                }
                "ignore_tty" => o.ignore_tty.push(r.string(&c)?),
                "ferrite_metrics_port" => {
                    if let Some(v) = r.num::<i64>(&c)? {
                        match u16::try_from(v) {
                            Ok(port) => o.ferrite_metrics_port = port,
                            Err(_) => r.warn(&c, format!("{v} is not a TCP port; metrics off")),
                        }
                    }
                }
                "ferrite_unconfined_project" => o
                    .ferrite_unconfined_projects
                    .push(canonicalize_master_url(&r.string(&c)?)),
                "proxy_info" => o.proxy_info = Some(ProxyInfo::read_config(r, &c)?),
                "rec_half_life_days" => {
                    if let Some(v) = r.num::<f64>(&c)? {
                        o.rec_half_life_days = if v <= 0.0 {
                            r.warn(&c, format!("{v} is not positive; 10 used"));
                            10.0
                        } else {
                            v
                        };
                    }
                }
                // Moved to nvc_config.xml; older clients wrote them here.
                "client_download_url"
                | "client_new_version_text"
                | "client_version_check_url"
                | "network_test_url" => r.skip(&c)?,
                _ => r.unknown(&c, "options")?,
            }
        }
        Ok(o)
    }

    /// Writes `<options>` with every option, in BOINC's order.
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("options")
            .bool01("abort_jobs_on_exit", self.abort_jobs_on_exit)
            .bool01("allow_gui_rpc_get", self.allow_gui_rpc_get)
            .bool01("allow_multiple_clients", self.allow_multiple_clients)
            .bool01("allow_remote_gui_rpc", self.allow_remote_gui_rpc);
        for s in &self.alt_platforms {
            w.text("alt_platform", s);
        }
        for c in &self.coprocs {
            let nums: Vec<String> = c.device_nums.iter().map(i32::to_string).collect();
            w.open("coproc")
                .text("type", &c.rsc_type)
                .num("count", c.count)
                .f64("peak_flops", c.peak_flops)
                .text("device_nums", &nums.join(" "))
                .flag("non_gpu", c.non_gpu)
                .close("coproc");
        }
        w.bool01("disallow_attach", self.disallow_attach)
            .bool01("dont_check_file_sizes", self.dont_check_file_sizes)
            .bool01("dont_contact_ref_site", self.dont_contact_ref_site)
            .bool01("lower_client_priority", self.lower_client_priority)
            .bool01("dont_suspend_nci", self.dont_suspend_nci)
            .bool01("dont_use_vbox", self.dont_use_vbox)
            .bool01("dont_use_wsl", self.dont_use_wsl)
            .bool01("dont_use_docker", self.dont_use_docker);
        for s in &self.disallowed_wsls {
            w.text("disallowed_wsl", s);
        }
        for e in &self.exclude_gpus {
            w.open("exclude_gpu").text("url", &e.url);
            if let Some(d) = e.device_num {
                w.num("device_num", d);
            }
            w.opt_text("type", e.rsc_type.as_deref())
                .opt_text("app", e.app.as_deref())
                .close("exclude_gpu");
        }
        for s in &self.exclusive_apps {
            w.text("exclusive_app", s);
        }
        for s in &self.exclusive_gpu_apps {
            w.text("exclusive_gpu_app", s);
        }
        w.bool01("exit_after_finish", self.exit_after_finish)
            .bool01("exit_before_start", self.exit_before_start)
            .bool01("exit_when_idle", self.exit_when_idle)
            .bool01("fetch_minimal_work", self.fetch_minimal_work)
            .bool01("fetch_on_update", self.fetch_on_update)
            .text("force_auth", &self.force_auth)
            .bool01("http_1_0", self.http_1_0)
            .num("http_transfer_timeout", self.http_transfer_timeout)
            .num("http_transfer_timeout_bps", self.http_transfer_timeout_bps);
        for (name, list) in [
            ("ignore_nvidia_dev", &self.ignore_nvidia_dev),
            ("ignore_ati_dev", &self.ignore_ati_dev),
            ("ignore_intel_dev", &self.ignore_intel_dev),
            ("ignore_apple_dev", &self.ignore_apple_dev),
        ] {
            for d in list {
                w.num(name, d);
            }
        }
        w.num("max_event_log_lines", self.max_event_log_lines)
            .num("max_file_xfers", self.max_file_xfers)
            .num(
                "max_file_xfers_per_project",
                self.max_file_xfers_per_project,
            )
            .f64("max_overdue_days", self.max_overdue_days)
            .f64("max_stderr_file_size", self.max_stderr_file_size)
            .f64("max_stdout_file_size", self.max_stdout_file_size)
            .num("max_tasks_reported", self.max_tasks_reported)
            .num("ncpus", self.ncpus)
            .bool01("no_alt_platform", self.no_alt_platform)
            .bool01("no_disk_usage", self.no_disk_usage)
            .bool01("no_gpus", self.no_gpus)
            .bool01("no_info_fetch", self.no_info_fetch)
            .bool01("no_opencl", self.no_opencl)
            .bool01("no_priority_change", self.no_priority_change)
            .bool01("no_rdp_check", self.no_rdp_check)
            .bool01("os_random_only", self.os_random_only)
            .bool01("prioritize_gpu", self.prioritize_gpu)
            .num("process_priority", self.process_priority)
            .num("process_priority_special", self.process_priority_special);
        if let Some(p) = &self.proxy_info {
            p.write(w);
        }
        w.f64("rec_half_life_days", self.rec_half_life_days)
            .bool01(
                "report_results_immediately",
                self.report_results_immediately,
            )
            .bool01("run_apps_manually", self.run_apps_manually)
            .num("save_stats_days", self.save_stats_days)
            .bool01("skip_cpu_benchmarks", self.skip_cpu_benchmarks)
            .bool01("simple_gui_only", self.simple_gui_only)
            .f64("start_delay", self.start_delay)
            .bool01("stderr_head", self.stderr_head)
            .bool01("suppress_net_info", self.suppress_net_info)
            .bool01("unsigned_apps_ok", self.unsigned_apps_ok)
            .bool01("use_all_gpus", self.use_all_gpus)
            .bool01("use_certs", self.use_certs)
            .bool01("use_certs_only", self.use_certs_only)
            .bool01("vbox_window", self.vbox_window);
        for s in &self.ignore_tty {
            w.text("ignore_tty", s);
        }
        w.nonempty_text("device_name", &self.device_name);
        if self.ferrite_metrics_port != 0 {
            w.num("ferrite_metrics_port", self.ferrite_metrics_port);
        }
        if !self.ferrite_confine_apps {
            w.bool01("ferrite_confine_apps", false);
        }
        for url in &self.ferrite_unconfined_projects {
            w.text("ferrite_unconfined_project", url);
        }
        if self.ferrite_checkpoint_grace != CHECKPOINT_GRACE_DEFAULT_SECS {
            w.f64("ferrite_checkpoint_grace", self.ferrite_checkpoint_grace);
        }
        w.close("options");
    }
}

/// Reads a user-declared `<coproc>`; one without a `<type>` (or of type `CPU`) is dropped
/// with a warning (BOINC rejects the whole file for the former).
fn read_coproc<'a>(r: &mut XmlReader<'a>, tag: &Tag<'a>) -> Result<Option<ConfigCoproc>, XmlError> {
    let mut c = ConfigCoproc::default();
    let mut nums: Option<Vec<i32>> = None;
    if !tag.is_empty() {
        while let Some(ch) = r.next_child()? {
            match ch.name() {
                "type" => c.rsc_type = r.string(&ch)?,
                "count" => c.count = r.num_or(&ch, 0)?,
                "peak_flops" => c.peak_flops = r.num_or(&ch, 0.0)?,
                "device_nums" => {
                    let s = r.string(&ch)?;
                    let mut v = Vec::new();
                    for part in s.split_whitespace() {
                        match part.parse::<i32>() {
                            Ok(n) => v.push(n),
                            Err(_) => r.warn(&ch, format!("'{part}' is not a device number")),
                        }
                    }
                    nums = Some(v);
                }
                "non_gpu" => c.non_gpu = r.flag(&ch)?,
                // Detection details and usage figures; not configuration.
                "coproc_opencl" | "req_secs" | "req_instances" => r.skip(&ch)?,
                _ => r.unknown(&ch, "coproc")?,
            }
        }
    }
    if c.rsc_type.is_empty() {
        r.warn(tag, "<coproc> without <type>; ignored");
        return Ok(None);
    }
    if c.rsc_type == "CPU" {
        r.warn(tag, "<coproc> of type CPU; ignored");
        return Ok(None);
    }
    c.device_nums = nums.unwrap_or_else(|| (0..c.count.max(0)).collect());
    Ok(Some(c))
}

/// Reads `<exclude_gpu>`; one without `<url>` is dropped with a warning.
fn read_exclude_gpu<'a>(
    r: &mut XmlReader<'a>,
    tag: &Tag<'a>,
) -> Result<Option<ExcludeGpu>, XmlError> {
    let mut e = ExcludeGpu::default();
    let mut have_url = false;
    if !tag.is_empty() {
        while let Some(ch) = r.next_child()? {
            match ch.name() {
                "url" => {
                    e.url = canonicalize_master_url(&r.string(&ch)?);
                    have_url = true;
                }
                "device_num" => e.device_num = r.num::<i32>(&ch)?.filter(|d| *d >= 0),
                "type" => e.rsc_type = Some(r.string(&ch)?).filter(|s| !s.is_empty()),
                "app" => e.app = Some(r.string(&ch)?).filter(|s| !s.is_empty()),
                _ => r.unknown(&ch, "exclude_gpu")?,
            }
        }
    }
    if !have_url {
        r.warn(tag, "<exclude_gpu> without <url>; ignored");
        return Ok(None);
    }
    Ok(Some(e))
}

/// The whole `cc_config.xml`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CcConfig {
    /// Event-log classes.
    pub log_flags: LogFlags,
    /// Client options.
    pub options: CcOptions,
}

impl CcConfig {
    /// Reads `<cc_config>`.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Self, XmlError> {
        let mut c = Self::default();
        if tag.is_empty() {
            return Ok(c);
        }
        while let Some(ch) = r.next_child()? {
            match ch.name() {
                "log_flags" => c.log_flags = LogFlags::read(r, &ch)?,
                "options" => c.options = CcOptions::read(r, &ch)?,
                _ => r.unknown(&ch, "cc_config")?,
            }
        }
        Ok(c)
    }

    /// Writes `<cc_config>` with every flag and option.
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("cc_config");
        self.log_flags.write(w);
        self.options.write(w);
        w.close("cc_config");
    }

    /// Parses `cc_config.xml`. (A missing file means [`CcConfig::default`].)
    pub fn parse(text: &str, file: &str) -> Result<Parsed<Self>, XmlError> {
        crate::xml::parse_document(text, file, "cc_config", Self::read)
    }

    /// The document as BOINC writes it.
    pub fn to_xml(&self) -> String {
        crate::xml::write_document(|w| self.write(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ferrite_metrics_port_round_trips_and_is_written_only_when_set() {
        let text = "<cc_config><options><ferrite_metrics_port>9187</ferrite_metrics_port>\
                    </options></cc_config>";
        let parsed = CcConfig::parse(text, "cc_config.xml").expect("parses");
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        assert_eq!(parsed.value.options.ferrite_metrics_port, 9187);
        let xml = parsed.value.to_xml();
        assert!(
            xml.contains("<ferrite_metrics_port>9187</ferrite_metrics_port>"),
            "{xml}"
        );
        let again = CcConfig::parse(&xml, "again").expect("re-parses");
        assert!(again.warnings.is_empty(), "{:?}", again.warnings);
        assert_eq!(again.value, parsed.value);

        let off = CcConfig::default();
        assert_eq!(off.options.ferrite_metrics_port, 0);
        assert!(!off.to_xml().contains("ferrite_metrics_port"));
    }

    #[test]
    fn ferrite_metrics_port_out_of_range_is_warned_and_off() {
        for bad in ["70000", "-1", "port"] {
            let text = format!(
                "<cc_config><options><ferrite_metrics_port>{bad}</ferrite_metrics_port>\
                 </options></cc_config>"
            );
            let parsed = CcConfig::parse(&text, "cc_config.xml").expect("parses");
            assert_eq!(parsed.value.options.ferrite_metrics_port, 0, "{bad}");
            assert_eq!(parsed.warnings.len(), 1, "{bad}: {:?}", parsed.warnings);
        }
    }

    #[test]
    fn app_confinement_is_on_unless_turned_off_for_all_or_one_project() {
        assert!(CcConfig::default().options.ferrite_confine_apps);
        assert!(!CcConfig::default().to_xml().contains("confine"));
        let text = "<cc_config><options><ferrite_confine_apps>0</ferrite_confine_apps>\
                    <ferrite_unconfined_project>HTTPS://p.example/x</ferrite_unconfined_project>\
                    </options></cc_config>";
        let parsed = CcConfig::parse(text, "cc_config.xml").expect("parses");
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        let o = &parsed.value.options;
        assert!(!o.ferrite_confine_apps);
        assert_eq!(o.ferrite_unconfined_projects, ["https://p.example/x/"]);
        let again = CcConfig::parse(&parsed.value.to_xml(), "again").expect("re-parses");
        assert_eq!(again.value, parsed.value);
    }

    #[test]
    fn checkpoint_grace_defaults_to_five_minutes_and_is_written_only_when_set() {
        assert_eq!(CcConfig::default().options.ferrite_checkpoint_grace, 300.0);
        assert!(!CcConfig::default().to_xml().contains("checkpoint_grace"));
        let text = "<cc_config><options><ferrite_checkpoint_grace>0</ferrite_checkpoint_grace>\
                    </options></cc_config>";
        let parsed = CcConfig::parse(text, "cc_config.xml").expect("parses");
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        assert_eq!(parsed.value.options.ferrite_checkpoint_grace, 0.0);
        let again = CcConfig::parse(&parsed.value.to_xml(), "again").expect("re-parses");
        assert_eq!(again.value, parsed.value);
    }
}
