//! `get_file_transfers`'s pure parts: the files of a project waiting for or in a transfer
//! and the pieces of each `<file_transfer>` element. The reply, written from what a state
//! epoch keeps and what the transfers report live, is `daemon/rpc/file_transfers.rs`.

use ferrite_proto::client_state::{FileInfo, ProjectState};

/// The bytes a transfer of `f` moves: the compressed size of a download sent gzipped.
pub(crate) fn transfer_nbytes(f: &FileInfo, upload: bool) -> f64 {
    if f.download_gzipped && !upload {
        f.gzipped_nbytes
    } else {
        f.nbytes
    }
}

/// A writer one level inside `<file_transfer>`, for its parts written apart.
pub(crate) fn transfer_part() -> ferrite_proto::xml::XmlWriter {
    let mut w = ferrite_proto::xml::XmlWriter::new();
    w.open("file_transfer");
    w.clear();
    w
}

/// A pending transfer of file `f` (at `file` in project `project`'s files) with its
/// `<file_transfer>` element up to the parts written per reply.
pub(crate) fn transfer_head(
    project: usize,
    ps: &ProjectState,
    file: usize,
    f: &FileInfo,
    upload: bool,
) -> super::PendingTransfer {
    let p = &ps.project;
    let mut w = ferrite_proto::xml::XmlWriter::new();
    w.open("file_transfer")
        .text("project_url", &p.master_url)
        .text("project_name", &p.project_name)
        .text("name", &f.name)
        .f64("nbytes", transfer_nbytes(f, upload))
        .f64("max_nbytes", f.max_nbytes)
        .int("status", f.status);
    let record = f.persistent_file_xfer.as_deref().map(|x| {
        let mut r = transfer_part();
        r.raw(x);
        super::body::kept(r.finish())
    });
    super::PendingTransfer {
        project,
        file,
        upload,
        head: super::body::kept(w.finish()),
        record,
    }
}

/// The files of a project waiting for or in a transfer: inputs and app files not yet present
/// that an unfinished task needs, and outputs of tasks in the uploading state not yet sent.
#[cfg(test)]
pub(crate) fn pending_transfers(
    ps: &ferrite_proto::client_state::ProjectState,
) -> Vec<(&ferrite_proto::client_state::FileInfo, bool)> {
    pending_transfer_positions(ps)
        .into_iter()
        .filter_map(|(at, upload)| Some((ps.files.get(at)?, upload)))
        .collect()
}

/// The files of `ps` waiting for or in a transfer, each once, as (position in `ps.files`,
/// upload); every lookup goes through an index, so the list is linear in the number of tasks.
pub(crate) fn pending_transfer_positions(
    ps: &ferrite_proto::client_state::ProjectState,
) -> Vec<(usize, bool)> {
    use ferrite_proto::client_state::{ProjectLookup, ResultState};
    let look = ProjectLookup::new(ps);
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for r in &ps.results {
        if r.state == ResultState::FilesDownloading {
            let wu_files = look
                .workunit(&r.wu_name)
                .map(|w| w.input_files.iter())
                .into_iter()
                .flatten();
            let av_files = look
                .app_version_of(r)
                .map(|v| v.file_refs.iter())
                .into_iter()
                .flatten();
            for fr in wu_files.chain(av_files) {
                if let Some(at) = look.file_index(&fr.file_name) {
                    if ps.files[at].status == 0 && seen.insert(at) {
                        out.push((at, false));
                    }
                }
            }
        } else if r.state == ResultState::FilesUploading {
            for fr in &r.output_files {
                if let Some(at) = look.file_index(&fr.file_name) {
                    let f = &ps.files[at];
                    if f.status == 1 && !f.uploaded && seen.insert(at) {
                        out.push((at, true));
                    }
                }
            }
        }
    }
    out
}
