//! `init_data.xml` (`<app_init_data>`): what the client tells an app in its slot directory
//! before starting it — identity, directories, shared-memory key, resource usage and bounds,
//! GPU assignment, credit, the host description, the working global preferences and the
//! project preferences. Written for every start; read back for round trips and tools.

use crate::cc_config::ProxyInfo;
use crate::host::{HostInfo, HostInfoForm};
use crate::prefs::GlobalPrefs;
use crate::xml::{Parsed, Tag, XmlError, XmlReader, XmlWriter};

/// The `shm_key` that tells an app to use the memory-mapped file `boinc_mmap_file` (API ≥ 6).
pub const SHM_KEY_MMAP: i64 = -1;

/// BOINC `APP_INIT_DATA`, in the order the client writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct AppInitData {
    /// Client version, major part (apps log it and some check it).
    pub major_version: i32,
    /// Client version, minor part.
    pub minor_version: i32,
    /// Client version, release part.
    pub release: i32,
    /// Version number of the app version being run.
    pub app_version: i32,
    /// The user's id at the project.
    pub userid: i64,
    /// The user's team id (0 = none).
    pub teamid: i64,
    /// This host's id at the project.
    pub hostid: i64,
    /// The app's short name.
    pub app_name: String,
    /// Plan class of the app version (or the workunit's, for BUDA jobs); empty = none.
    pub plan_class: String,
    /// Symbol store URL for crash dumps; empty = none.
    pub symstore: String,
    /// Account manager URL, when one is in use.
    pub acct_mgr_url: String,
    /// Project preferences, verbatim XML (what `account_<esc>.xml` holds); empty = omitted.
    pub project_preferences: String,
    /// Team name, when in a team.
    pub team_name: String,
    /// User name.
    pub user_name: String,
    /// Absolute path of the project directory.
    pub project_dir: String,
    /// Absolute path of the data directory.
    pub boinc_dir: String,
    /// Account key (some apps use it for trickle messages).
    pub authenticator: String,
    /// Workunit name.
    pub wu_name: String,
    /// Result name.
    pub result_name: String,
    /// Shared-memory key: [`SHM_KEY_MMAP`] for the memory-mapped file, else a SysV key.
    pub shm_key: i64,
    /// Slot number (the slot directory's name).
    pub slot: i32,
    /// The client's PID: apps exit when it disappears.
    pub client_pid: i32,
    /// CPU time at the last checkpoint, all episodes, seconds.
    pub wu_cpu_time: f64,
    /// Elapsed time at the last checkpoint, seconds.
    pub starting_elapsed_time: f64,
    /// The app runs under a separate sandbox user.
    pub using_sandbox: bool,
    /// Hardware virtualisation is present but disabled.
    pub vm_extensions_disabled: bool,
    /// The user's total credit at the project.
    pub user_total_credit: f64,
    /// The user's recent average credit.
    pub user_expavg_credit: f64,
    /// This host's total credit.
    pub host_total_credit: f64,
    /// This host's recent average credit.
    pub host_expavg_credit: f64,
    /// Project share ÷ total share of runnable CPU projects (1 if the total is 0).
    pub resource_share_fraction: f64,
    /// Minimum seconds between checkpoints (global pref `disk_interval`).
    pub checkpoint_period: f64,
    /// Fraction done reported at the start of this run (0).
    pub fraction_done_start: f64,
    /// Fraction done reported at the end (1).
    pub fraction_done_end: f64,
    /// GPU type (`NVIDIA`, `ATI`, `intel_gpu`, or an OpenCL vendor); empty for CPU jobs.
    pub gpu_type: String,
    /// Device number of the first assigned GPU instance; -1 for CPU jobs.
    pub gpu_device_num: i32,
    /// OpenCL device index of that GPU; -1 for CPU jobs.
    pub gpu_opencl_dev_index: i32,
    /// GPU instances per job (0 for CPU jobs).
    pub gpu_usage: f64,
    /// Average CPUs the job uses.
    pub ncpus: f64,
    /// Estimated FLOPs of the job.
    pub rsc_fpops_est: f64,
    /// FLOPs after which the job is aborted.
    pub rsc_fpops_bound: f64,
    /// Working-set size bound, bytes.
    pub rsc_memory_bound: f64,
    /// Disk usage bound, bytes.
    pub rsc_disk_bound: f64,
    /// Report deadline (Unix time).
    pub computation_deadline: f64,
    /// cc_config `vbox_window`.
    pub vbox_window: bool,
    /// cc_config `no_priority_change`.
    pub no_priority_change: bool,
    /// cc_config `process_priority` (-1 unspecified, 0 lowest … 5 realtime).
    pub process_priority: i32,
    /// cc_config `process_priority_special`.
    pub process_priority_special: i32,
    /// The host, as in the state file (with net info and coprocessors).
    pub host_info: HostInfo,
    /// Proxy settings, written only when a proxy is in use.
    pub proxy_info: Option<ProxyInfo>,
    /// The working global preferences.
    pub global_prefs: GlobalPrefs,
    /// File names (not paths) of the app version's files, for wrappers.
    pub app_files: Vec<String>,
}

impl Default for AppInitData {
    fn default() -> Self {
        Self {
            major_version: 0,
            minor_version: 0,
            release: 0,
            app_version: 0,
            userid: 0,
            teamid: 0,
            hostid: 0,
            app_name: String::new(),
            plan_class: String::new(),
            symstore: String::new(),
            acct_mgr_url: String::new(),
            project_preferences: String::new(),
            team_name: String::new(),
            user_name: String::new(),
            project_dir: String::new(),
            boinc_dir: String::new(),
            authenticator: String::new(),
            wu_name: String::new(),
            result_name: String::new(),
            shm_key: SHM_KEY_MMAP,
            slot: 0,
            client_pid: 0,
            wu_cpu_time: 0.0,
            starting_elapsed_time: 0.0,
            using_sandbox: false,
            vm_extensions_disabled: false,
            user_total_credit: 0.0,
            user_expavg_credit: 0.0,
            host_total_credit: 0.0,
            host_expavg_credit: 0.0,
            resource_share_fraction: 1.0,
            checkpoint_period: 60.0,
            fraction_done_start: 0.0,
            fraction_done_end: 1.0,
            gpu_type: String::new(),
            gpu_device_num: -1,
            gpu_opencl_dev_index: -1,
            gpu_usage: 0.0,
            ncpus: 1.0,
            rsc_fpops_est: 0.0,
            rsc_fpops_bound: 0.0,
            rsc_memory_bound: 0.0,
            rsc_disk_bound: 0.0,
            computation_deadline: 0.0,
            vbox_window: false,
            no_priority_change: false,
            process_priority: -1,
            process_priority_special: -1,
            host_info: HostInfo::default(),
            proxy_info: None,
            global_prefs: GlobalPrefs::default(),
            app_files: Vec::new(),
        }
    }
}

impl AppInitData {
    /// Writes `<app_init_data>` in BOINC's order and layout (children at column 0).
    pub fn write(&self, w: &mut XmlWriter) {
        w.open_flat("app_init_data")
            .num("major_version", self.major_version)
            .num("minor_version", self.minor_version)
            .num("release", self.release)
            .num("app_version", self.app_version)
            .num("userid", self.userid)
            .num("teamid", self.teamid)
            .num("hostid", self.hostid)
            .text("app_name", &self.app_name)
            .nonempty_text("plan_class", &self.plan_class)
            .nonempty_text("symstore", &self.symstore)
            .nonempty_text("acct_mgr_url", &self.acct_mgr_url);
        if !self.project_preferences.is_empty() {
            w.raw(&format!(
                "<project_preferences>\n{}</project_preferences>",
                self.project_preferences
            ));
        }
        w.nonempty_text("team_name", &self.team_name)
            .nonempty_text("user_name", &self.user_name)
            .text("project_dir", &self.project_dir)
            .text("boinc_dir", &self.boinc_dir)
            .text("authenticator", &self.authenticator)
            .text("wu_name", &self.wu_name)
            .text("result_name", &self.result_name)
            .num("shm_key", self.shm_key)
            .num("slot", self.slot)
            .num("client_pid", self.client_pid)
            .f64("wu_cpu_time", self.wu_cpu_time)
            .f64("starting_elapsed_time", self.starting_elapsed_time)
            .bool01("using_sandbox", self.using_sandbox)
            .bool01("vm_extensions_disabled", self.vm_extensions_disabled)
            .f64("user_total_credit", self.user_total_credit)
            .f64("user_expavg_credit", self.user_expavg_credit)
            .f64("host_total_credit", self.host_total_credit)
            .f64("host_expavg_credit", self.host_expavg_credit)
            .f64("resource_share_fraction", self.resource_share_fraction)
            .f64("checkpoint_period", self.checkpoint_period)
            .f64("fraction_done_start", self.fraction_done_start)
            .f64("fraction_done_end", self.fraction_done_end)
            .text("gpu_type", &self.gpu_type)
            .num("gpu_device_num", self.gpu_device_num)
            .num("gpu_opencl_dev_index", self.gpu_opencl_dev_index)
            .f64("gpu_usage", self.gpu_usage)
            .f64("ncpus", self.ncpus)
            .f64("rsc_fpops_est", self.rsc_fpops_est)
            .f64("rsc_fpops_bound", self.rsc_fpops_bound)
            .f64("rsc_memory_bound", self.rsc_memory_bound)
            .f64("rsc_disk_bound", self.rsc_disk_bound)
            .f64("computation_deadline", self.computation_deadline)
            .bool01("vbox_window", self.vbox_window)
            .bool01("no_priority_change", self.no_priority_change)
            .num("process_priority", self.process_priority)
            .num("process_priority_special", self.process_priority_special);
        self.host_info.write(w, HostInfoForm::STATE_FILE);
        if let Some(p) = &self.proxy_info {
            p.write(w);
        }
        self.global_prefs.write(w);
        for f in &self.app_files {
            w.text("app_file", f);
        }
        w.close_flat("app_init_data");
    }

    /// Reads `<app_init_data>`. Nothing is mandatory (the app API has defaults for all).
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Self, XmlError> {
        let mut d = Self::default();
        if tag.is_empty() {
            return Ok(d);
        }
        while let Some(c) = r.next_child()? {
            macro_rules! num {
                ($field:expr) => {{
                    if let Some(v) = r.num(&c)? {
                        $field = v;
                    }
                }};
            }
            match c.name() {
                "major_version" => num!(d.major_version),
                "minor_version" => num!(d.minor_version),
                "release" => num!(d.release),
                "app_version" => num!(d.app_version),
                "userid" => num!(d.userid),
                "teamid" => num!(d.teamid),
                "hostid" => num!(d.hostid),
                "app_name" => d.app_name = r.string(&c)?,
                "plan_class" => d.plan_class = r.string(&c)?,
                "symstore" => d.symstore = r.string(&c)?,
                "acct_mgr_url" => d.acct_mgr_url = r.string(&c)?,
                "project_preferences" => {
                    let inner = r.inner_raw(&c)?;
                    d.project_preferences = inner.strip_prefix('\n').unwrap_or(inner).to_owned();
                }
                "team_name" => d.team_name = r.string(&c)?,
                "user_name" => d.user_name = r.string(&c)?,
                "project_dir" => d.project_dir = r.string(&c)?,
                "boinc_dir" => d.boinc_dir = r.string(&c)?,
                "authenticator" => d.authenticator = r.string(&c)?,
                "wu_name" => d.wu_name = r.string(&c)?,
                "result_name" => d.result_name = r.string(&c)?,
                "shm_key" => num!(d.shm_key),
                "slot" => num!(d.slot),
                "client_pid" => num!(d.client_pid),
                "wu_cpu_time" => num!(d.wu_cpu_time),
                "starting_elapsed_time" => num!(d.starting_elapsed_time),
                "using_sandbox" => d.using_sandbox = r.flag(&c)?,
                "vm_extensions_disabled" => d.vm_extensions_disabled = r.flag(&c)?,
                "user_total_credit" => num!(d.user_total_credit),
                "user_expavg_credit" => num!(d.user_expavg_credit),
                "host_total_credit" => num!(d.host_total_credit),
                "host_expavg_credit" => num!(d.host_expavg_credit),
                "resource_share_fraction" => num!(d.resource_share_fraction),
                "checkpoint_period" => num!(d.checkpoint_period),
                "fraction_done_start" => num!(d.fraction_done_start),
                "fraction_done_end" => num!(d.fraction_done_end),
                "gpu_type" => d.gpu_type = r.string(&c)?,
                "gpu_device_num" => num!(d.gpu_device_num),
                "gpu_opencl_dev_index" => num!(d.gpu_opencl_dev_index),
                "gpu_usage" => num!(d.gpu_usage),
                "ncpus" => num!(d.ncpus),
                "rsc_fpops_est" => num!(d.rsc_fpops_est),
                "rsc_fpops_bound" => num!(d.rsc_fpops_bound),
                "rsc_memory_bound" => num!(d.rsc_memory_bound),
                "rsc_disk_bound" => num!(d.rsc_disk_bound),
                "computation_deadline" => num!(d.computation_deadline),
                "vbox_window" => d.vbox_window = r.flag(&c)?,
                "no_priority_change" => d.no_priority_change = r.flag(&c)?,
                "process_priority" => num!(d.process_priority),
                "process_priority_special" => num!(d.process_priority_special),
                "host_info" => d.host_info = HostInfo::read(r, &c)?,
                "proxy_info" => d.proxy_info = Some(ProxyInfo::read(r, &c)?),
                "global_preferences" => d.global_prefs = GlobalPrefs::read(r, &c)?,
                "app_file" => d.app_files.push(r.string(&c)?),
                _ => r.unknown(&c, "app_init_data")?,
            }
        }
        Ok(d)
    }

    /// Parses an `init_data.xml`.
    pub fn parse(text: &str, file: &str) -> Result<Parsed<Self>, XmlError> {
        crate::xml::parse_document(text, file, "app_init_data", Self::read)
    }

    /// The file as the client writes it.
    pub fn to_xml(&self) -> String {
        crate::xml::write_document(|w| self.write(w))
    }
}
