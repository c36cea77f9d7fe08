//! Outputs compressed before their upload (`<gzip_when_done/>`), as the official client's
//! `FILE_INFO::gzip` does when a task ends: the file is compressed with gzip and keeps its
//! name, so the project's upload directory receives the gzip stream, and the size and MD5
//! sent with the upload and reported are those of the compressed file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;
use flate2::Compression;

/// Copy buffer size.
const BUF: usize = 64 * 1024;

/// Compresses everything `from` reads into `to` as one gzip member (zlib's default level,
/// as BOINC's `gzopen(path, "wb")`); returns the bytes read.
pub fn gzip_stream<R: Read, W: Write>(mut from: R, to: W) -> io::Result<u64> {
    let mut enc = GzEncoder::new(to, Compression::default());
    let n = io::copy(&mut from, &mut enc)?;
    enc.finish()?.flush()?;
    Ok(n)
}

/// The temporary file beside `path` (BOINC's `NAME.gz`).
fn gz_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".gz");
    PathBuf::from(s)
}

/// Compresses the file at `path` in place: written to `NAME.gz` beside it, synced, then
/// renamed over the original, so a crash leaves either the whole original or the whole
/// compressed file. A link is never followed. Returns the compressed size.
pub fn compress_in_place(path: &Path) -> io::Result<u64> {
    let src = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let tmp = gz_path(path);
    let result = (|| {
        let out = File::create(&tmp)?;
        let mut w = BufWriter::with_capacity(BUF, out);
        gzip_stream(BufReader::with_capacity(BUF, src), &mut w)?;
        let out = w.into_inner().map_err(io::IntoInnerError::into_error)?;
        out.sync_all()?;
        let len = out.metadata()?.len();
        fs::rename(&tmp, path)?;
        Ok(len)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use flate2::read::GzDecoder;

    fn gunzip(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        GzDecoder::new(bytes).read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn a_stream_becomes_one_gzip_member_that_decompresses_to_it() {
        let text = b"THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG\n".repeat(100);
        let mut gz = Vec::new();
        assert_eq!(gzip_stream(&text[..], &mut gz).unwrap(), text.len() as u64);
        assert_eq!(&gz[..2], &[0x1f, 0x8b], "gzip magic");
        assert!(gz.len() < text.len());
        assert_eq!(gunzip(&gz), text);
        // An empty output is still a valid gzip file.
        let mut empty = Vec::new();
        gzip_stream(&b""[..], &mut empty).unwrap();
        assert_eq!(&empty[..2], &[0x1f, 0x8b]);
        assert!(gunzip(&empty).is_empty());
    }

    #[test]
    fn a_file_is_compressed_under_its_own_name_and_nothing_is_left_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wu_1_out_0");
        fs::write(&path, "HELLO\n".repeat(1000)).unwrap();
        let len = compress_in_place(&path).unwrap();
        let bytes = fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, len);
        assert_eq!(&bytes[..2], &[0x1f, 0x8b]);
        assert_eq!(gunzip(&bytes), "HELLO\n".repeat(1000).into_bytes());
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["wu_1_out_0"]);
    }

    #[test]
    fn a_missing_file_or_a_link_is_an_error_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone");
        assert!(compress_in_place(&path).is_err());
        let target = dir.path().join("elsewhere");
        fs::write(&target, "data").unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(compress_in_place(&path).is_err());
        assert_eq!(fs::read(&target).unwrap(), b"data");
        assert!(!gz_path(&path).exists());
    }
}
