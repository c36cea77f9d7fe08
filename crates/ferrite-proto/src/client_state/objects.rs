//! The per-project objects of the state file, which the scheduler reply also carries:
//! `<app>`, `<file>`/`<file_info>`, `<app_version>`, `<workunit>`, `<result>` and `<file_ref>`.
//!
//! One type serves every document an object appears in; [`Form`] picks the layout on write
//! (the state file, a scheduler request, a scheduler reply), and reading accepts all of them.

use std::fmt::Write as _;

use crate::xml::{Tag, XmlError, XmlReader, XmlWriter};

/// The document an object is written into: each has its own subset and layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `client_state.xml` (`write(…, to_server=false)` in BOINC).
    State,
    /// A scheduler request (`to_server=true`): reported results, app-version lists.
    Request,
    /// A scheduler reply, as a project server writes it (for the loopback test server).
    Reply,
}

/// Elements BOINC accepts and ignores; kept (without a warning) so nothing is lost.
const QUIETLY_KEPT: &[&str] = &[
    "no_delete",
    "generated_locally",
    "upload_when_present",
    "no_validate",
    "max_ncpus",
    "env_vars",
];

/// Keeps an element this module does not model: silently for the names BOINC itself ignores,
/// with a warning otherwise.
pub(crate) fn keep<'a>(
    r: &mut XmlReader<'a>,
    t: &Tag<'a>,
    parent: &str,
    extra: &mut Vec<String>,
) -> Result<(), XmlError> {
    if QUIETLY_KEPT.contains(&t.name()) {
        extra.push(r.raw(t)?.to_owned());
        return Ok(());
    }
    extra.extend(r.keep_unknown(t, parent)?);
    Ok(())
}

/// Reads a block BOINC keeps as text (keys, signatures): inner text, surrounding white space
/// removed.
pub(crate) fn block_text<'a>(r: &mut XmlReader<'a>, t: &Tag<'a>) -> Result<String, XmlError> {
    Ok(r.text(t)?.trim().to_owned())
}

/// Writes `<name>\ntext\n</name>` the way BOINC writes keys and signatures.
pub(crate) fn write_block(w: &mut XmlWriter, name: &str, text: &str) {
    let mut s = String::with_capacity(text.len() + 2 * name.len() + 8);
    s.push('<');
    s.push_str(name);
    s.push_str(">\n");
    crate::xml::push_escaped(&mut s, text);
    s.push_str("\n</");
    s.push_str(name);
    s.push('>');
    w.raw(&s);
}

/// A file an app version, workunit or result uses, and the name the app opens it by.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileRef {
    /// Physical file name (a [`FileInfo`] of the same project).
    pub file_name: String,
    /// Name the application opens (the link or copy in the slot directory); empty = same.
    pub open_name: String,
    /// The app version's executable.
    pub main_program: bool,
    /// Copy the file into the slot instead of linking it.
    pub copy_file: bool,
    /// The task may run (or end) without this file.
    pub optional: bool,
    /// Elements we do not know, kept verbatim.
    pub extra: Vec<String>,
}

impl FileRef {
    /// Reads `<file_ref>`; `<file_name>` is mandatory.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<FileRef, XmlError> {
        let mut f = FileRef::default();
        let mut named = false;
        if !tag.is_empty() {
            while let Some(t) = r.next_child()? {
                match t.name() {
                    "file_name" => {
                        f.file_name = r.string(&t)?;
                        named = true;
                    }
                    "open_name" => f.open_name = r.string(&t)?,
                    "main_program" => f.main_program = r.flag(&t)?,
                    "copy_file" => f.copy_file = r.flag(&t)?,
                    "optional" => f.optional = r.flag(&t)?,
                    _ => keep(r, &t, "file_ref", &mut f.extra)?,
                }
            }
        }
        if !named {
            return Err(r.missing(tag, "file_name"));
        }
        Ok(f)
    }

    /// Writes `<file_ref>`.
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("file_ref")
            .text("file_name", &self.file_name)
            .nonempty_text("open_name", &self.open_name)
            .flag("main_program", self.main_program)
            .flag("copy_file", self.copy_file)
            .flag("optional", self.optional);
        for e in &self.extra {
            w.raw(e);
        }
        w.close("file_ref");
    }
}

/// An application of a project (`<app>`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct App {
    /// Short name; app versions and workunits refer to it.
    pub name: String,
    /// Name shown to users.
    pub user_friendly_name: String,
    /// The app uses little CPU (runs beside other work, not counted as a CPU job).
    pub non_cpu_intensive: bool,
    /// Runs sporadically (BOINC's "sporadic" apps; reply only).
    pub sporadic: bool,
    /// The app's fraction done is exact (used for time estimates; reply only).
    pub fraction_done_exact: bool,
    /// Elements we do not know, kept verbatim.
    pub extra: Vec<String>,
}

impl App {
    /// Reads `<app>`; `<name>` is mandatory. `user_friendly_name` defaults to the name.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<App, XmlError> {
        let mut a = App::default();
        if !tag.is_empty() {
            while let Some(t) = r.next_child()? {
                match t.name() {
                    "name" => a.name = r.string(&t)?,
                    "user_friendly_name" => a.user_friendly_name = r.string(&t)?,
                    "non_cpu_intensive" => a.non_cpu_intensive = r.flag(&t)?,
                    "sporadic" => a.sporadic = r.flag(&t)?,
                    "fraction_done_exact" => a.fraction_done_exact = r.flag(&t)?,
                    _ => keep(r, &t, "app", &mut a.extra)?,
                }
            }
        }
        if a.name.is_empty() {
            return Err(r.missing(tag, "name"));
        }
        if a.user_friendly_name.is_empty() {
            a.user_friendly_name = a.name.clone();
        }
        Ok(a)
    }

    /// Writes `<app>`.
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("app")
            .text("name", &self.name)
            .text("user_friendly_name", &self.user_friendly_name)
            .bool01("non_cpu_intensive", self.non_cpu_intensive)
            .flag("sporadic", self.sporadic)
            .flag("fraction_done_exact", self.fraction_done_exact);
        for e in &self.extra {
            w.raw(e);
        }
        w.close("app");
    }
}

/// A file known to the client (`<file>` in the state file, `<file_info>` on the wire).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileInfo {
    /// Physical name in the project directory.
    pub name: String,
    /// Expected size in bytes (uncompressed).
    pub nbytes: f64,
    /// Output files: size limit, part of the upload certificate.
    pub max_nbytes: f64,
    /// MD5 of the (uncompressed) content, 32 lowercase hex; empty when unknown.
    pub md5_cksum: String,
    /// 0 not present, 1 present, 2 verify pending, negative = error code.
    pub status: i32,
    /// Set the execute permission after download.
    pub executable: bool,
    /// Output file: uploaded.
    pub uploaded: bool,
    /// Keep the file after its jobs finish (locality scheduling).
    pub sticky: bool,
    /// Reply only: sticky lifetime in seconds.
    pub sticky_lifetime: f64,
    /// When the sticky flag lapses (Unix time; 0 = never).
    pub sticky_expire_time: f64,
    /// Output: gzip before upload.
    pub gzip_when_done: bool,
    /// The file is fetched gzip-compressed.
    pub download_gzipped: bool,
    /// Compressed size when `download_gzipped`.
    pub gzipped_nbytes: f64,
    /// The file must carry a valid `file_signature` (app-version files).
    pub signature_required: bool,
    /// A user file from the project preferences.
    pub is_user_file: bool,
    /// RSA signature of the MD5 (code signing), as BOINC's hex text.
    pub file_signature: Option<String>,
    /// Download URLs (state file `download_url`; reply `url` without `file_upload_handler`).
    pub download_urls: Vec<String>,
    /// Upload URLs (state file `upload_url`; reply `url` containing `file_upload_handler`).
    pub upload_urls: Vec<String>,
    /// Reply `gzipped_url`s: they replace the download list and imply `download_gzipped`.
    pub gzipped_urls: Vec<String>,
    /// `<persistent_file_xfer>` (a transfer in progress), kept verbatim.
    pub persistent_file_xfer: Option<String>,
    /// Upload certificate, echoed to the upload handler.
    pub xml_signature: Option<String>,
    /// Why the file failed, when it did.
    pub error_msg: Option<String>,
    /// Elements we do not know, kept verbatim.
    pub extra: Vec<String>,
}

impl FileInfo {
    /// Reads `<file>` or `<file_info>`; `<name>` is mandatory. Accepts both the state-file
    /// (`download_url`/`upload_url`) and the reply (`url`) forms.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<FileInfo, XmlError> {
        let mut f = FileInfo::default();
        if !tag.is_empty() {
            while let Some(t) = r.next_child()? {
                match t.name() {
                    "name" => f.name = r.string(&t)?,
                    "nbytes" => f.nbytes = r.num_or(&t, 0.0)?,
                    "max_nbytes" => f.max_nbytes = r.num_or(&t, 0.0)?,
                    "md5_cksum" => f.md5_cksum = r.string(&t)?,
                    "status" => f.status = r.num_or(&t, 0)?,
                    "executable" => f.executable = r.flag(&t)?,
                    "uploaded" => f.uploaded = r.flag(&t)?,
                    "sticky" => f.sticky = r.flag(&t)?,
                    "sticky_lifetime" => f.sticky_lifetime = r.num_or(&t, 0.0)?,
                    "sticky_expire_time" => f.sticky_expire_time = r.num_or(&t, 0.0)?,
                    "gzip_when_done" => f.gzip_when_done = r.flag(&t)?,
                    "download_gzipped" => f.download_gzipped = r.flag(&t)?,
                    "gzipped_nbytes" => f.gzipped_nbytes = r.num_or(&t, 0.0)?,
                    "signature_required" => f.signature_required = r.flag(&t)?,
                    "is_user_file" => f.is_user_file = r.flag(&t)?,
                    "file_signature" => f.file_signature = Some(block_text(r, &t)?),
                    "download_url" => f.download_urls.push(r.string(&t)?),
                    "upload_url" => f.upload_urls.push(r.string(&t)?),
                    "url" => {
                        let u = r.string(&t)?;
                        if u.contains("file_upload_handler") {
                            f.upload_urls.push(u);
                        } else {
                            f.download_urls.push(u);
                        }
                    }
                    "gzipped_url" => f.gzipped_urls.push(r.string(&t)?),
                    "persistent_file_xfer" => {
                        f.persistent_file_xfer = Some(r.raw(&t)?.to_owned());
                    }
                    "xml_signature" => f.xml_signature = Some(block_text(r, &t)?),
                    "error_msg" => f.error_msg = Some(r.string(&t)?),
                    _ => keep(r, &t, tag.name(), &mut f.extra)?,
                }
            }
        }
        if f.name.is_empty() {
            return Err(r.missing(tag, "name"));
        }
        Ok(f)
    }

    /// Writes the file in `form`: `<file>` for the state file, `<file_info>` otherwise. The
    /// request form is the one BOINC sends for uploaded outputs (no status, no signatures).
    pub fn write(&self, w: &mut XmlWriter, form: Form) {
        let el = if form == Form::State {
            "file"
        } else {
            "file_info"
        };
        w.open(el).text("name", &self.name);
        if form == Form::Reply {
            for u in self.download_urls.iter().chain(&self.upload_urls) {
                w.text("url", u);
            }
            for u in &self.gzipped_urls {
                w.text("gzipped_url", u);
            }
        }
        w.f64("nbytes", self.nbytes)
            .f64("max_nbytes", self.max_nbytes);
        w.nonempty_text("md5_cksum", &self.md5_cksum);
        if form == Form::State {
            w.num("status", self.status);
        }
        if form != Form::Request {
            w.flag("executable", self.executable)
                .flag("uploaded", self.uploaded)
                .flag("sticky", self.sticky);
            if self.sticky_lifetime != 0.0 {
                w.f64("sticky_lifetime", self.sticky_lifetime);
            }
            w.flag("gzip_when_done", self.gzip_when_done);
            if self.download_gzipped {
                w.flag("download_gzipped", true)
                    .f64("gzipped_nbytes", self.gzipped_nbytes);
            }
            w.flag("signature_required", self.signature_required)
                .flag("is_user_file", self.is_user_file);
            if let Some(s) = &self.file_signature {
                write_block(w, "file_signature", s);
            }
        }
        if self.sticky_expire_time != 0.0 {
            w.f64("sticky_expire_time", self.sticky_expire_time);
        }
        if form != Form::Reply {
            for u in &self.download_urls {
                w.text("download_url", u);
            }
            for u in &self.upload_urls {
                w.text("upload_url", u);
            }
        }
        if form != Form::Request {
            if let Some(x) = &self.persistent_file_xfer {
                w.raw(x);
            }
            if let Some(s) = &self.xml_signature {
                write_block(w, "xml_signature", s);
            }
        }
        w.opt_text("error_msg", self.error_msg.as_deref());
        if form != Form::Request {
            for e in &self.extra {
                w.raw(e);
            }
        }
        w.close(el);
    }
}

/// A coprocessor a job uses (`<coproc><type/><count/></coproc>`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CoprocUsage {
    /// Resource type name: `NVIDIA`, `ATI`, `intel_gpu`, `apple_gpu`, or user-defined
    /// (legacy `CUDA` is kept as written).
    pub rsc_type: String,
    /// Instances used (may be fractional).
    pub count: f64,
}

impl CoprocUsage {
    fn read<'a>(r: &mut XmlReader<'a>, tag: &Tag<'a>) -> Result<CoprocUsage, XmlError> {
        let mut c = CoprocUsage::default();
        if tag.is_empty() {
            return Ok(c);
        }
        while let Some(t) = r.next_child()? {
            match t.name() {
                "type" => c.rsc_type = r.string(&t)?,
                "count" => c.count = r.num_or(&t, 0.0)?,
                _ => r.unknown(&t, "coproc")?,
            }
        }
        Ok(c)
    }

    fn write(&self, w: &mut XmlWriter) {
        w.open("coproc")
            .text("type", &self.rsc_type)
            .f64("count", self.count)
            .close("coproc");
    }
}

/// Resources a job uses: CPUs, speed, GPUs (`RESOURCE_USAGE` in BOINC).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceUsage {
    /// CPUs used on average (0/absent means 1 for app versions).
    pub avg_ncpus: f64,
    /// Estimated speed of this job on this host, FLOPS.
    pub flops: f64,
    /// GPU usage (BOINC allows one type, plus a "missing coprocessor" entry).
    pub coprocs: Vec<CoprocUsage>,
    /// GPU memory needed, bytes (0 = not given).
    pub gpu_ram: f64,
}

impl ResourceUsage {
    /// Reads one resource-usage element into `self`; false if `t` is not one.
    fn read_field<'a>(&mut self, r: &mut XmlReader<'a>, t: &Tag<'a>) -> Result<bool, XmlError> {
        match t.name() {
            "avg_ncpus" => self.avg_ncpus = r.num_clamped(t, 0.0, 1e6)?.unwrap_or(0.0),
            "flops" => self.flops = r.num_clamped(t, 0.0, f64::MAX)?.unwrap_or(0.0),
            "coproc" => self.coprocs.push(CoprocUsage::read(r, t)?),
            "gpu_ram" => self.gpu_ram = r.num_or(t, 0.0)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn write(&self, w: &mut XmlWriter) {
        w.f64("avg_ncpus", self.avg_ncpus).f64("flops", self.flops);
        for c in &self.coprocs {
            c.write(w);
        }
        if self.gpu_ram != 0.0 {
            w.f64("gpu_ram", self.gpu_ram);
        }
    }
}

/// A version of an app for a platform and plan class (`<app_version>`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppVersion {
    /// The app's name.
    pub app_name: String,
    /// Version number (100 × major + minor).
    pub version_num: i32,
    /// Platform (`x86_64-pc-linux-gnu`); empty in a reply means the primary platform.
    pub platform: String,
    /// Plan class (`cuda`, `mt`, …); empty = plain CPU.
    pub plan_class: String,
    /// BOINC API version the app was built with.
    pub api_version: String,
    /// Extra command-line arguments.
    pub cmdline: String,
    /// Prefix for input/output open names (copy into a subdirectory).
    pub file_prefix: String,
    /// The version's files (executable first as a rule).
    pub file_refs: Vec<FileRef>,
    /// CPUs, speed and GPUs used.
    pub usage: ResourceUsage,
    /// Never throttle this app's CPU use.
    pub dont_throttle: bool,
    /// The executable is a wrapper (BOINC's `wrapper`, `vboxwrapper`, …).
    pub is_wrapper: bool,
    /// Needs the network to run.
    pub needs_network: bool,
    /// Elements we do not know, kept verbatim.
    pub extra: Vec<String>,
}

impl AppVersion {
    /// Reads `<app_version>`; `<app_name>` is mandatory.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<AppVersion, XmlError> {
        let mut v = AppVersion::default();
        if !tag.is_empty() {
            while let Some(t) = r.next_child()? {
                if v.usage.read_field(r, &t)? {
                    continue;
                }
                match t.name() {
                    "app_name" => v.app_name = r.string(&t)?,
                    "version_num" => v.version_num = r.num_or(&t, 0)?,
                    "platform" => v.platform = r.string(&t)?,
                    "plan_class" => v.plan_class = r.string(&t)?,
                    "api_version" => v.api_version = r.string(&t)?,
                    "cmdline" => v.cmdline = r.string(&t)?,
                    "file_prefix" => v.file_prefix = r.string(&t)?,
                    "file_ref" => v.file_refs.push(FileRef::read(r, &t)?),
                    "dont_throttle" => v.dont_throttle = r.flag(&t)?,
                    "is_wrapper" => v.is_wrapper = r.flag(&t)?,
                    "needs_network" => v.needs_network = r.flag(&t)?,
                    _ => keep(r, &t, "app_version", &mut v.extra)?,
                }
            }
        }
        if v.app_name.is_empty() {
            return Err(r.missing(tag, "app_name"));
        }
        Ok(v)
    }

    /// Writes `<app_version>`; the request form has no file references or unknown elements.
    pub fn write(&self, w: &mut XmlWriter, form: Form) {
        w.open("app_version")
            .text("app_name", &self.app_name)
            .num("version_num", self.version_num)
            .text("platform", &self.platform)
            .nonempty_text("plan_class", &self.plan_class)
            .nonempty_text("api_version", &self.api_version)
            .nonempty_text("cmdline", &self.cmdline)
            .nonempty_text("file_prefix", &self.file_prefix);
        if form != Form::Request {
            for f in &self.file_refs {
                f.write(w);
            }
        }
        self.usage.write(w);
        w.flag("dont_throttle", self.dont_throttle)
            .flag("is_wrapper", self.is_wrapper)
            .flag("needs_network", self.needs_network);
        if form != Form::Request {
            for e in &self.extra {
                w.raw(e);
            }
        }
        w.close("app_version");
    }

    /// Whether `self` is the version identified by (app, platform, version, plan class).
    pub fn is(&self, app: &str, platform: &str, version_num: i32, plan_class: &str) -> bool {
        self.app_name == app
            && self.platform == platform
            && self.version_num == version_num
            && self.plan_class == plan_class
    }
}

/// A unit of work (`<workunit>`): the inputs and bounds of one or more results.
#[derive(Debug, Clone, PartialEq)]
pub struct Workunit {
    /// Unique name within the project.
    pub name: String,
    /// The app's name.
    pub app_name: String,
    /// App version the server meant (informational).
    pub version_num: i32,
    /// Estimated floating-point operations.
    pub rsc_fpops_est: f64,
    /// Operations after which the job is aborted (time limit).
    pub rsc_fpops_bound: f64,
    /// RAM limit, bytes.
    pub rsc_memory_bound: f64,
    /// Disk limit, bytes.
    pub rsc_disk_bound: f64,
    /// Command-line arguments (trimmed).
    pub command_line: String,
    /// Input files.
    pub input_files: Vec<FileRef>,
    /// BUDA jobs: the sub-application.
    pub sub_appname: String,
    /// BUDA jobs: plan class overriding the app version's.
    pub plan_class: String,
    /// BUDA jobs: resource usage overriding the app version's.
    pub usage: Option<ResourceUsage>,
    /// Job keyword ids, as written (space-separated numbers).
    pub job_keyword_ids: Option<String>,
    /// Elements we do not know, kept verbatim.
    pub extra: Vec<String>,
}

impl Default for Workunit {
    /// BOINC's defaults for absent bounds (`WORKUNIT::parse`).
    fn default() -> Self {
        Workunit {
            name: String::new(),
            app_name: String::new(),
            version_num: 0,
            rsc_fpops_est: 6.048e14,
            rsc_fpops_bound: 2.4192e15,
            rsc_memory_bound: 1e8,
            rsc_disk_bound: 1e9,
            command_line: String::new(),
            input_files: Vec::new(),
            sub_appname: String::new(),
            plan_class: String::new(),
            usage: None,
            job_keyword_ids: None,
            extra: Vec::new(),
        }
    }
}

impl Workunit {
    /// Reads `<workunit>`; `<name>` is mandatory.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Workunit, XmlError> {
        let mut wu = Workunit::default();
        let mut usage = ResourceUsage::default();
        let mut has_usage = false;
        if !tag.is_empty() {
            while let Some(t) = r.next_child()? {
                if usage.read_field(r, &t)? {
                    has_usage = true;
                    continue;
                }
                match t.name() {
                    "name" => wu.name = r.string(&t)?,
                    "app_name" => wu.app_name = r.string(&t)?,
                    "version_num" => wu.version_num = r.num_or(&t, 0)?,
                    "rsc_fpops_est" => wu.rsc_fpops_est = positive(r, &t, 6.048e14)?,
                    "rsc_fpops_bound" => wu.rsc_fpops_bound = positive(r, &t, 2.4192e15)?,
                    "rsc_memory_bound" => wu.rsc_memory_bound = positive(r, &t, 1e8)?,
                    "rsc_disk_bound" => wu.rsc_disk_bound = positive(r, &t, 1e9)?,
                    // The last one wins (servers may write an empty one first).
                    "command_line" => wu.command_line = r.string(&t)?,
                    "file_ref" => wu.input_files.push(FileRef::read(r, &t)?),
                    "sub_appname" => wu.sub_appname = r.string(&t)?,
                    "plan_class" => wu.plan_class = r.string(&t)?,
                    "job_keyword_ids" => wu.job_keyword_ids = Some(r.string(&t)?),
                    _ => keep(r, &t, "workunit", &mut wu.extra)?,
                }
            }
        }
        if wu.name.is_empty() {
            return Err(r.missing(tag, "name"));
        }
        if has_usage {
            wu.usage = Some(usage);
        }
        Ok(wu)
    }

    /// Writes `<workunit>` (the same in the state file and a reply).
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("workunit")
            .text("name", &self.name)
            .text("app_name", &self.app_name)
            .num("version_num", self.version_num)
            .f64("rsc_fpops_est", self.rsc_fpops_est)
            .f64("rsc_fpops_bound", self.rsc_fpops_bound)
            .f64("rsc_memory_bound", self.rsc_memory_bound)
            .f64("rsc_disk_bound", self.rsc_disk_bound);
        if !self.command_line.is_empty() {
            // BOINC's layout: the arguments on a line of their own.
            w.raw(&format!(
                "<command_line>\n{}\n    </command_line>",
                quick_xml::escape::partial_escape(&self.command_line)
            ));
        }
        for f in &self.input_files {
            f.write(w);
        }
        w.nonempty_text("sub_appname", &self.sub_appname)
            .nonempty_text("plan_class", &self.plan_class);
        if let Some(u) = &self.usage {
            u.write(w);
        }
        w.opt_text("job_keyword_ids", self.job_keyword_ids.as_deref());
        for e in &self.extra {
            w.raw(e);
        }
        w.close("workunit");
    }
}

/// A positive number, or `default` with a warning (BOINC replaces non-positive bounds).
fn positive<'a>(r: &mut XmlReader<'a>, t: &Tag<'a>, default: f64) -> Result<f64, XmlError> {
    match r.num::<f64>(t)? {
        Some(v) if v > 0.0 => Ok(v),
        Some(v) => {
            r.warn(t, format!("{v} is not positive; {default} used"));
            Ok(default)
        }
        None => Ok(default),
    }
}

/// A result's state (`RESULT_*` in `lib/common_defs.h`); numerically ordered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResultState {
    /// 0: just received.
    #[default]
    New,
    /// 1: waiting for app or input files.
    FilesDownloading,
    /// 2: runnable or running.
    FilesDownloaded,
    /// 3: failed.
    ComputeError,
    /// 4: computed; outputs uploading.
    FilesUploading,
    /// 5: done, ready to report.
    FilesUploaded,
    /// 6: aborted.
    Aborted,
    /// 7: an output upload failed permanently.
    UploadFailed,
}

impl ResultState {
    /// All states, by number.
    pub const ALL: [ResultState; 8] = [
        ResultState::New,
        ResultState::FilesDownloading,
        ResultState::FilesDownloaded,
        ResultState::ComputeError,
        ResultState::FilesUploading,
        ResultState::FilesUploaded,
        ResultState::Aborted,
        ResultState::UploadFailed,
    ];

    /// BOINC's number for the state.
    pub fn as_i32(self) -> i32 {
        self as i32
    }

    /// The state with BOINC number `n`, if any.
    pub fn from_i32(n: i32) -> Option<ResultState> {
        usize::try_from(n)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
    }
}

/// A result: one task for this host (`<result>`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskResult {
    /// Unique name within the project.
    pub name: String,
    /// Its workunit.
    pub wu_name: String,
    /// Platform of the app version used.
    pub platform: String,
    /// Version number of the app version used.
    pub version_num: i32,
    /// Plan class of the app version used; empty = none.
    pub plan_class: String,
    /// CPU time at the end, seconds.
    pub final_cpu_time: f64,
    /// Wall time at the end, seconds.
    pub final_elapsed_time: f64,
    /// App exit code or client error code.
    pub exit_status: i32,
    /// Where the task is in its life.
    pub state: ResultState,
    /// App-reported FLOPS per CPU second (0 = not reported).
    pub fpops_per_cpu_sec: f64,
    /// App-reported total FLOPs (0 = not reported).
    pub fpops_cumulative: f64,
    /// App-reported integer ops per CPU second (0 = not reported).
    pub intops_per_cpu_sec: f64,
    /// App-reported total integer ops (0 = not reported).
    pub intops_cumulative: f64,
    /// Peak resident memory, bytes (0 = unknown).
    pub final_peak_working_set_size: f64,
    /// Peak swap, bytes (0 = unknown).
    pub final_peak_swap_size: f64,
    /// Peak disk use of the slot, bytes (0 = unknown).
    pub final_peak_disk_usage: f64,
    /// Request form: the workunit's version number.
    pub app_version_num: Option<i32>,
    /// Request form: the client version heading `stderr_out`.
    pub core_client_version: Option<String>,
    /// Messages and the app's stderr (without the CDATA wrapper).
    pub stderr_out: String,
    /// The server acknowledged the report; garbage collection deletes the result.
    pub got_server_ack: bool,
    /// Done; to be reported.
    pub ready_to_report: bool,
    /// Suspended by the user.
    pub suspended_via_gui: bool,
    /// Report as soon as done (from the reply).
    pub report_immediately: bool,
    /// When the result became ready to report (Unix time; 0 = not yet).
    pub completed_time: f64,
    /// Deadline (Unix time).
    pub report_deadline: f64,
    /// When it was received (Unix time); with the MD5 of the name, the run order.
    pub received_time: f64,
    /// Output files.
    pub output_files: Vec<FileRef>,
    /// Request form: the uploaded outputs' `<file_info>`s.
    pub uploaded_files: Vec<FileInfo>,
    /// Elements we do not know, kept verbatim.
    pub extra: Vec<String>,
}

impl TaskResult {
    /// Reads `<result>` in any form; `<name>` is mandatory. A state number out of range is
    /// clamped with a warning.
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<TaskResult, XmlError> {
        let mut res = TaskResult::default();
        if !tag.is_empty() {
            while let Some(t) = r.next_child()? {
                match t.name() {
                    "name" => res.name = r.string(&t)?,
                    "wu_name" => res.wu_name = r.string(&t)?,
                    "platform" => res.platform = r.string(&t)?,
                    "version_num" => res.version_num = r.num_or(&t, 0)?,
                    "plan_class" => res.plan_class = r.string(&t)?,
                    "final_cpu_time" => res.final_cpu_time = r.num_or(&t, 0.0)?,
                    "final_elapsed_time" => res.final_elapsed_time = r.num_or(&t, 0.0)?,
                    "exit_status" => res.exit_status = r.num_or(&t, 0)?,
                    "state" => {
                        let n = r.num_clamped(&t, 0, 7)?.unwrap_or(0);
                        res.state = ResultState::from_i32(n).unwrap_or_default();
                    }
                    "fpops_per_cpu_sec" => res.fpops_per_cpu_sec = r.num_or(&t, 0.0)?,
                    "fpops_cumulative" => res.fpops_cumulative = r.num_or(&t, 0.0)?,
                    "intops_per_cpu_sec" => res.intops_per_cpu_sec = r.num_or(&t, 0.0)?,
                    "intops_cumulative" => res.intops_cumulative = r.num_or(&t, 0.0)?,
                    "final_peak_working_set_size" => {
                        res.final_peak_working_set_size = r.num_or(&t, 0.0)?
                    }
                    "final_peak_swap_size" => res.final_peak_swap_size = r.num_or(&t, 0.0)?,
                    "final_peak_disk_usage" => res.final_peak_disk_usage = r.num_or(&t, 0.0)?,
                    "app_version_num" => res.app_version_num = r.num(&t)?,
                    "stderr_out" => {
                        let (v, text) = read_stderr(r, &t)?;
                        res.core_client_version = v;
                        res.stderr_out = text;
                    }
                    "got_server_ack" => res.got_server_ack = r.flag(&t)?,
                    "ready_to_report" => res.ready_to_report = r.flag(&t)?,
                    "suspended_via_gui" => res.suspended_via_gui = r.flag(&t)?,
                    "report_immediately" => res.report_immediately = r.flag(&t)?,
                    "completed_time" => res.completed_time = r.num_or(&t, 0.0)?,
                    "report_deadline" => res.report_deadline = r.num_or(&t, 0.0)?,
                    "received_time" => res.received_time = r.num_or(&t, 0.0)?,
                    "file_ref" => res.output_files.push(FileRef::read(r, &t)?),
                    "file_info" => res.uploaded_files.push(FileInfo::read(r, &t)?),
                    _ => keep(r, &t, "result", &mut res.extra)?,
                }
            }
        }
        if res.name.is_empty() {
            return Err(r.missing(tag, "name"));
        }
        Ok(res)
    }

    /// Writes `<result>` in `form`: the state file's full record, the report sent to the
    /// server, or the new-task record of a reply.
    pub fn write(&self, w: &mut XmlWriter, form: Form) {
        w.open("result").text("name", &self.name);
        if form == Form::Reply {
            w.text("wu_name", &self.wu_name)
                .f64("report_deadline", self.report_deadline);
            for f in &self.output_files {
                f.write(w);
            }
            w.text("platform", &self.platform)
                .num("version_num", self.version_num)
                .nonempty_text("plan_class", &self.plan_class)
                .flag("report_immediately", self.report_immediately);
            for e in &self.extra {
                w.raw(e);
            }
            w.close("result");
            return;
        }
        w.f64("final_cpu_time", self.final_cpu_time)
            .f64("final_elapsed_time", self.final_elapsed_time)
            .num("exit_status", self.exit_status)
            .num("state", self.state.as_i32())
            .text("platform", &self.platform)
            .num("version_num", self.version_num)
            .nonempty_text("plan_class", &self.plan_class);
        for (name, v) in [
            ("fpops_per_cpu_sec", self.fpops_per_cpu_sec),
            ("fpops_cumulative", self.fpops_cumulative),
            ("intops_per_cpu_sec", self.intops_per_cpu_sec),
            ("intops_cumulative", self.intops_cumulative),
        ] {
            if v != 0.0 {
                w.f64(name, v);
            }
        }
        for (name, v) in [
            (
                "final_peak_working_set_size",
                self.final_peak_working_set_size,
            ),
            ("final_peak_swap_size", self.final_peak_swap_size),
            ("final_peak_disk_usage", self.final_peak_disk_usage),
        ] {
            if v != 0.0 {
                w.num(name, format_args!("{v:.0}"));
            }
        }
        if form == Form::Request {
            if let Some(n) = self.app_version_num {
                w.num("app_version_num", n);
            }
        }
        if form == Form::Request || !self.stderr_out.is_empty() {
            write_stderr(
                w,
                form,
                self.core_client_version.as_deref(),
                &self.stderr_out,
            );
        }
        if form == Form::Request {
            for f in &self.uploaded_files {
                f.write(w, Form::Request);
            }
            w.close("result");
            return;
        }
        w.flag("got_server_ack", self.got_server_ack)
            .flag("ready_to_report", self.ready_to_report);
        if self.completed_time != 0.0 {
            w.f64("completed_time", self.completed_time);
        }
        w.flag("suspended_via_gui", self.suspended_via_gui)
            .flag("report_immediately", self.report_immediately)
            .text("wu_name", &self.wu_name)
            .f64("report_deadline", self.report_deadline)
            .f64("received_time", self.received_time);
        for f in &self.output_files {
            f.write(w);
        }
        for e in &self.extra {
            w.raw(e);
        }
        w.close("result");
    }

    /// Computing is over (BOINC's `computing_done`): state ≥ COMPUTE_ERROR or ready to report.
    pub fn computing_done(&self) -> bool {
        self.state >= ResultState::ComputeError || self.ready_to_report
    }
}

/// Reads `<stderr_out>`: an optional `<core_client_version>` (request form) and the text,
/// CDATA unwrapped, surrounding newlines removed.
fn read_stderr<'a>(
    r: &mut XmlReader<'a>,
    t: &Tag<'a>,
) -> Result<(Option<String>, String), XmlError> {
    let inner = r.inner_raw(t)?;
    let mut version = None;
    let mut body = inner.to_owned();
    const OPEN: &str = "<core_client_version>";
    const CLOSE: &str = "</core_client_version>";
    if let (Some(a), Some(b)) = (inner.find(OPEN), inner.find(CLOSE)) {
        // Only a version that comes before any CDATA is the header BOINC writes.
        let cdata = inner.find("<![CDATA[").unwrap_or(usize::MAX);
        if a < b && b < cdata {
            version = Some(inner[a + OPEN.len()..b].trim().to_owned());
            body = format!("{}{}", &inner[..a], &inner[b + CLOSE.len()..]);
        }
    }
    let wrapped = format!("<stderr_out>{body}</stderr_out>");
    let mut sub = XmlReader::new(&wrapped, r.file().clone());
    let text = match sub.root("stderr_out") {
        Ok(root) => sub.text(&root).unwrap_or_default(),
        Err(_) => String::new(),
    };
    Ok((version, text.trim_matches('\n').to_owned()))
}

fn write_stderr(w: &mut XmlWriter, form: Form, version: Option<&str>, text: &str) {
    let mut s = String::with_capacity(text.len() + 64);
    s.push_str("<stderr_out>\n");
    if form == Form::Request {
        let _ = writeln!(
            s,
            "<core_client_version>{}</core_client_version>",
            version.unwrap_or("")
        );
    }
    if !text.is_empty() {
        let _ = writeln!(
            s,
            "<![CDATA[\n{}\n]]>",
            text.replace("]]>", "]]]]><![CDATA[>")
        );
    }
    s.push_str("</stderr_out>");
    w.raw(&s);
}
