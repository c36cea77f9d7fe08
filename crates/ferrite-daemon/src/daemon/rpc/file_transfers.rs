//! `get_file_transfers`: the files waiting for or in a transfer, each written from what a
//! state epoch keeps and what the transfers report live.

use crate::rpc::file_transfers::*;
use crate::Daemon;

impl Daemon {
    /// `get_file_transfers`: one `<file_transfer>` per file waiting for or in a transfer
    /// (official layout: `FILE_INFO::write_gui`). What stays the same within a state epoch
    /// (the file's description and retry record) is written once per epoch and shared; a
    /// file without a retry record gets one of the time, written once per reply. A transfer
    /// under way shows its live record (time so far, bytes moved) and its `<file_xfer>`; a
    /// project whose transfers in that direction back off shows `<project_backoff>`, the
    /// seconds left.
    pub(super) fn rpc_file_transfers(&self, t: f64) -> ferrite_gui_rpc::Body {
        let list = self.rpc.pending_transfers(self.state_epoch, || {
            self.state
                .projects
                .iter()
                .enumerate()
                .flat_map(|(i, ps)| {
                    pending_transfer_positions(ps)
                        .into_iter()
                        .filter_map(move |(at, upload)| {
                            let f = ps.files.get(at)?;
                            Some(transfer_head(i, ps, at, f, upload))
                        })
                })
                .collect()
        });
        let inside = transfer_part;
        let no_record = |upload: bool| {
            let mut w = inside();
            w.open("persistent_file_xfer")
                .int("num_retries", 0)
                .f64("first_request_time", t)
                .f64("next_request_time", 0.0)
                .f64("time_so_far", 0.0)
                .f64("last_bytes_xferred", 0.0)
                .bool01("is_upload", upload)
                .close("persistent_file_xfer");
            bytes::Bytes::from(w.finish())
        };
        let (mut down, mut up) = (None, None);
        // Progress is looked up only while transfers run (most listed files wait).
        let moving = self.transfers.active_count() > 0;
        // Each project's backoff per direction (download, upload), looked up once.
        let backoffs: Vec<[Option<f64>; 2]> = self
            .state
            .projects
            .iter()
            .map(|ps| {
                let url = &ps.project.master_url;
                [
                    self.transfers.project_backoff(url, false, t),
                    self.transfers.project_backoff(url, true, t),
                ]
            })
            .collect();
        let mut out = crate::rpc::body::BodyWriter::new(list.len() * 4 + 2);
        out.xml().open_flat("file_transfers");
        for x in list.iter() {
            let Some(ps) = self.state.projects.get(x.project) else {
                continue;
            };
            let Some(f) = ps.files.get(x.file) else {
                continue;
            };
            out.shared(&x.head);
            let progress = moving
                .then(|| self.transfers.gui_progress(&ps.project.master_url, f))
                .flatten();
            match (&progress, &x.record) {
                (Some(p), _) => {
                    let mut w = inside();
                    w.raw(&p.record);
                    out.xml().push_raw(w.as_str());
                }
                (None, Some(record)) => out.shared(record),
                (None, None) => {
                    let kept = if x.upload { &mut up } else { &mut down };
                    out.shared(kept.get_or_insert_with(|| no_record(x.upload)));
                }
            }
            let backoff = backoffs
                .get(x.project)
                .and_then(|b| b[usize::from(x.upload)]);
            // Most listed files neither move nor wait for their project: nothing more.
            if progress.is_some() || backoff.is_some() {
                let mut w = inside();
                if let Some(p) = &progress {
                    let nbytes = transfer_nbytes(f, x.upload);
                    let left = (nbytes - p.bytes_xferred).max(0.0);
                    let eta = if p.xfer_speed > 0.0 {
                        left / p.xfer_speed
                    } else {
                        0.0
                    };
                    w.open("file_xfer")
                        .f64("estimated_xfer_time_remaining", eta)
                        .f64("bytes_xferred", p.bytes_xferred)
                        .f64("file_offset", p.file_offset)
                        .f64("xfer_speed", p.xfer_speed)
                        .text("url", &p.url)
                        .close("file_xfer");
                }
                if let Some(b) = backoff {
                    w.f64("project_backoff", b);
                }
                out.xml().push_raw(w.as_str());
            }
            out.xml().push_raw("</file_transfer>\n");
        }
        out.xml().close_flat("file_transfers");
        out.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::rpc::projects::tests::daemon;
    use ferrite_gui_rpc::Request;
    use ferrite_proto::client_state::{FileInfo, FileRef, ResultState, TaskResult, Workunit};

    /// `get_file_transfers` as it was written before it went through the XML writer.
    fn reference_file_transfers(d: &Daemon, t: f64) -> String {
        use std::fmt::Write as _;
        let mut out = String::from("<file_transfers>\n");
        for ps in &d.state.projects {
            let p = &ps.project;
            for (f, upload) in pending_transfers(ps) {
                let nbytes = if f.download_gzipped && !upload {
                    f.gzipped_nbytes
                } else {
                    f.nbytes
                };
                let _ = write!(
                    out,
                    "<file_transfer>\n    <project_url>{}</project_url>\n    <project_name>{}</project_name>\n    <name>{}</name>\n    <nbytes>{:.6}</nbytes>\n    <max_nbytes>{:.6}</max_nbytes>\n    <status>{}</status>\n",
                    ferrite_proto::xml::escape(&p.master_url),
                    ferrite_proto::xml::escape(&p.project_name),
                    ferrite_proto::xml::escape(&f.name),
                    nbytes,
                    f.max_nbytes,
                    f.status
                );
                match &f.persistent_file_xfer {
                    Some(x) => {
                        out.push_str("    ");
                        out.push_str(x.trim());
                        out.push('\n');
                    }
                    None => {
                        let _ = write!(
                            out,
                            "    <persistent_file_xfer>\n        <num_retries>0</num_retries>\n        <first_request_time>{t:.6}</first_request_time>\n        <next_request_time>0.000000</next_request_time>\n        <time_so_far>0.000000</time_so_far>\n        <last_bytes_xferred>0.000000</last_bytes_xferred>\n        <is_upload>{}</is_upload>\n    </persistent_file_xfer>\n",
                            u8::from(upload)
                        );
                    }
                }
                out.push_str("</file_transfer>\n");
            }
        }
        out.push_str("</file_transfers>\n");
        out
    }

    #[test]
    fn file_transfers_of_a_1000_task_state_are_written_as_before() {
        let (_dir, mut d) = daemon();
        d.state = ferrite_proto::client_state::synthetic(20, 1000);
        let mut n = 0;
        for ps in &mut d.state.projects {
            ps.project.project_name = format!("{} <&> \"x\"", ps.project.project_name);
            let wus: Vec<String> = ps.workunits.iter().map(|w| w.name.clone()).collect();
            for (r, wu) in ps.results.iter_mut().zip(wus) {
                n += 1;
                match n % 4 {
                    0 => r.state = ResultState::FilesDownloading,
                    1 => r.state = ResultState::FilesUploading,
                    _ => continue,
                }
                let names: Vec<String> = if n % 4 == 0 {
                    ps.workunits
                        .iter()
                        .find(|w| w.name == wu)
                        .map(|w| w.input_files.iter().map(|f| f.file_name.clone()).collect())
                        .unwrap_or_default()
                } else {
                    r.output_files.iter().map(|f| f.file_name.clone()).collect()
                };
                for name in names {
                    let f = ps.files.iter_mut().find(|f| f.name == name).expect("file");
                    f.status = i32::from(n % 4 == 1);
                    f.download_gzipped = n % 8 == 0;
                    f.gzipped_nbytes = 1234.5678 + f64::from(n);
                    f.max_nbytes = f64::from(n) * 1e3 + 0.1;
                    if n % 3 == 0 {
                        f.persistent_file_xfer = Some(format!(
                            "<persistent_file_xfer>\n        <num_retries>{n}</num_retries>\n    </persistent_file_xfer>\n"
                        ));
                    }
                }
            }
        }
        let t = 1_795_000_000.123_456_7;
        let want = reference_file_transfers(&d, t);
        assert!(
            want.matches("<file_transfer>").count() > 500,
            "{}",
            want.len()
        );
        d.state_epoch += 1;
        assert_eq!(d.rpc_file_transfers(t).to_text(), want);
        // Again, from the list found for this epoch.
        assert_eq!(d.rpc_file_transfers(t).to_text(), want);
        // Later: the files without a retry record show the new time.
        let later = reference_file_transfers(&d, t + 1.5);
        assert_ne!(later, want);
        assert_eq!(d.rpc_file_transfers(t + 1.5).to_text(), later);
        // A new epoch after a change: written again.
        d.state.projects[0].project.project_name = "Renamed".into();
        d.state_epoch += 1;
        let renamed = reference_file_transfers(&d, t);
        assert!(renamed.contains("<project_name>Renamed</project_name>"));
        assert_eq!(d.rpc_file_transfers(t).to_text(), renamed);
    }

    #[test]
    fn file_transfers_list_missing_inputs_and_unsent_outputs() {
        let (_dir, mut d) = daemon();
        let ps = &mut d.state.projects[0];
        ps.project.project_name = "P".into();
        let file = |name: &str, status: i32| FileInfo {
            name: name.into(),
            nbytes: 10.0,
            status,
            ..FileInfo::default()
        };
        ps.files = vec![file("in_a", 0), file("in_b", 1), file("out_c", 1)];
        ps.workunits.push(Workunit {
            name: "wu".into(),
            input_files: vec![
                FileRef {
                    file_name: "in_a".into(),
                    ..FileRef::default()
                },
                FileRef {
                    file_name: "in_b".into(),
                    ..FileRef::default()
                },
            ],
            ..Workunit::default()
        });
        ps.results.push(TaskResult {
            name: "r1".into(),
            wu_name: "wu".into(),
            state: ResultState::FilesDownloading,
            ..TaskResult::default()
        });
        ps.results.push(TaskResult {
            name: "r2".into(),
            wu_name: "wu".into(),
            state: ResultState::FilesUploading,
            output_files: vec![FileRef {
                file_name: "out_c".into(),
                ..FileRef::default()
            }],
            ..TaskResult::default()
        });
        let x = d.gui_rpc_reply(Request::GetFileTransfers);
        assert_eq!(x.matches("<file_transfer>").count(), 2, "{x}");
        let a = x.find("<name>in_a</name>").expect("missing input listed");
        let c = x.find("<name>out_c</name>").expect("unsent output listed");
        assert!(a < c);
        assert!(!x.contains("in_b"), "present files are not transfers: {x}");
        assert!(x.contains("<is_upload>0</is_upload>") && x.contains("<is_upload>1</is_upload>"));
        assert!(x.contains("<project_name>P</project_name>"));
        // Marked uploaded: no longer listed.
        if let Some(f) = d.state.projects[0].file_mut("out_c") {
            f.uploaded = true;
        }
        let x = d.gui_rpc_reply(Request::GetFileTransfers);
        assert_eq!(x.matches("<file_transfer>").count(), 1, "{x}");
    }

    /// A project with two outputs waiting to be sent: `out_a` tried before (a retry record
    /// with 30 s spent), `out_b` not yet.
    fn daemon_with_two_uploads() -> (tempfile::TempDir, Daemon, String) {
        let (dir, mut d) = daemon();
        let ps = &mut d.state.projects[0];
        ps.project.project_name = "P".into();
        let url = ps.project.master_url.clone();
        let file = |name: &str| FileInfo {
            name: name.into(),
            nbytes: 1000.0,
            status: 1,
            ..FileInfo::default()
        };
        ps.files = vec![file("out_a"), file("out_b")];
        ps.files[0].persistent_file_xfer = Some(
            "<persistent_file_xfer>\n<num_retries>2</num_retries>\n\
             <first_request_time>1000.0</first_request_time>\n\
             <next_request_time>2000.0</next_request_time>\n<time_so_far>30.0</time_so_far>\n\
             <last_bytes_xferred>100.0</last_bytes_xferred>\n<is_upload>1</is_upload>\n\
             </persistent_file_xfer>"
                .into(),
        );
        ps.results.push(TaskResult {
            name: "r".into(),
            state: ResultState::FilesUploading,
            output_files: ["out_a", "out_b"]
                .iter()
                .map(|n| FileRef {
                    file_name: (*n).into(),
                    ..FileRef::default()
                })
                .collect(),
            ..TaskResult::default()
        });
        (dir, d, url)
    }

    /// The `<file_transfer>` element of file `name` in a `get_file_transfers` reply.
    fn transfer_of<'a>(x: &'a str, name: &str) -> &'a str {
        x.split("<file_transfer>")
            .find(|t| t.contains(&format!("<name>{name}</name>")))
            .unwrap_or_else(|| panic!("{name} not listed: {x}"))
    }

    #[test]
    fn uploads_held_by_the_project_backoff_show_it() {
        let (_dir, mut d, url) = daemon_with_two_uploads();
        let t = 1_795_000_000.0;
        let x = d.rpc_file_transfers(t).to_text();
        assert!(!x.contains("project_backoff"), "{x}");
        // Repeated failures: the project's uploads back off 708 s more; downloads do not.
        d.transfers.set_project_backoff(&url, true, t + 708.0);
        let x = d.rpc_file_transfers(t).to_text();
        for name in ["out_a", "out_b"] {
            let e = transfer_of(&x, name);
            assert!(
                e.contains("    <project_backoff>708.000000</project_backoff>\n</file_transfer>"),
                "{e}"
            );
        }
        // The project's properties: "File uploads deferred for".
        d.transfers
            .set_project_backoff(&url, true, crate::clock::now() + 1000.0);
        let state = d.gui_rpc_reply(Request::GetState);
        let up: f64 = state
            .split("<upload_backoff>")
            .nth(1)
            .and_then(|v| v.split('<').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no upload_backoff: {state}"));
        assert!(up > 0.0, "{up}");
        assert!(!state.contains("<download_backoff>"), "{state}");
        // Over: no backoff shown.
        d.transfers.set_project_backoff(&url, true, t + 708.0);
        let x = d.rpc_file_transfers(t + 709.0).to_text();
        assert!(!x.contains("project_backoff"), "{x}");
    }

    #[test]
    fn a_transfer_under_way_shows_its_time_so_far_and_bytes() {
        let (_dir, mut d, url) = daemon_with_two_uploads();
        let t = 1_795_000_000.0;
        // out_a has been sending for 5 s and reached byte 400.
        d.transfers.pretend_active(&url, "out_a", 5, (0, 400));
        let x = d.rpc_file_transfers(t).to_text();
        let a = transfer_of(&x, "out_a");
        let num = |e: &str, tag: &str| -> f64 {
            e.split(&format!("<{tag}>"))
                .nth(1)
                .and_then(|v| v.split('<').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {tag}: {e}"))
        };
        assert!(num(a, "time_so_far") >= 35.0, "{a}");
        assert_eq!(num(a, "last_bytes_xferred"), 400.0, "{a}");
        assert_eq!(num(a, "num_retries"), 2.0, "{a}");
        assert_eq!(num(a, "first_request_time"), 1000.0, "{a}");
        assert_eq!(num(a, "bytes_xferred"), 400.0, "{a}");
        assert!(num(a, "xfer_speed") > 0.0, "{a}");
        assert!(a.contains("<is_upload>1</is_upload>"), "{a}");
        // The persistent record comes before the live one.
        assert!(
            a.find("</persistent_file_xfer>") < a.find("<file_xfer>"),
            "{a}"
        );
        // The one waiting keeps its record of the time.
        let b = transfer_of(&x, "out_b");
        assert!(!b.contains("<file_xfer>"), "{b}");
        assert!(b.contains("<time_so_far>0.000000</time_so_far>"), "{b}");
        // A download resumed at byte 300 of its partial file: its bytes count from the
        // start of the file, its offset is 0, its speed counts this attempt's bytes only.
        let ps = &mut d.state.projects[0];
        ps.files.push(FileInfo {
            name: "in_c".into(),
            nbytes: 1000.0,
            ..FileInfo::default()
        });
        ps.workunits.push(Workunit {
            name: "wu_c".into(),
            input_files: vec![FileRef {
                file_name: "in_c".into(),
                ..FileRef::default()
            }],
            ..Workunit::default()
        });
        ps.results.push(TaskResult {
            name: "r_c".into(),
            wu_name: "wu_c".into(),
            state: ResultState::FilesDownloading,
            ..TaskResult::default()
        });
        d.transfers.pretend_active(&url, "in_c", 5, (300, 500));
        d.state_epoch += 1;
        let x = d.rpc_file_transfers(t).to_text();
        let c = transfer_of(&x, "in_c");
        assert_eq!(num(c, "bytes_xferred"), 500.0, "{c}");
        assert_eq!(num(c, "file_offset"), 0.0, "{c}");
        assert!(num(c, "xfer_speed") <= 200.0 / 5.0, "{c}");
        assert!(c.contains("<is_upload>0</is_upload>"), "{c}");
    }
}
