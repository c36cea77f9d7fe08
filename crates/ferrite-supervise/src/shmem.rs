//! The `boinc_mmap_file` shared-memory segment: eight 1 KiB channels with a "full" flag each.
//!
//! The layout (lib/app_ipc.h `SHARED_MEM`) is fixed: channel `i` starts at `i × 1024`; byte 0 is
//! the flag (non-zero = an unread message), bytes 1.. hold a NUL-terminated string of at most
//! 1022 characters. The pure functions work on any byte buffer (so they can be tested against
//! captured files); [`SharedMem`] maps the real file and uses the same rules with an
//! acquire/release flag, the payload always written before the flag is set.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};

/// Name of the segment file inside a slot.
pub const MMAP_FILE_NAME: &str = "boinc_mmap_file";
/// Size of one channel.
pub const CHANNEL_SIZE: usize = 1024;
/// Size of the whole segment.
pub const SHMEM_SIZE: usize = 8 * CHANNEL_SIZE;
/// Longest payload a channel holds (the copy is `strlcpy(buf + 1, msg, 1023)`).
pub const MAX_PAYLOAD: usize = CHANNEL_SIZE - 2;

/// The eight channels, in segment order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// client → app: quit, abort, suspend, resume, reread_app_info.
    ProcessControlRequest = 0,
    /// app → client: unused.
    ProcessControlReply = 1,
    /// client → app: unused.
    GraphicsRequest = 2,
    /// app → client: web graphics URL / remote desktop address.
    GraphicsReply = 3,
    /// client → app: heartbeat and network state.
    Heartbeat = 4,
    /// app → client: CPU time, checkpoint, fraction done.
    AppStatus = 5,
    /// app → client: new trickle-up / upload request.
    TrickleUp = 6,
    /// client → app: new trickle-down / upload status.
    TrickleDown = 7,
}

impl Channel {
    /// Byte offset of the channel in the segment.
    pub fn offset(self) -> usize {
        self as usize * CHANNEL_SIZE
    }
}

/// Whether `channel` holds an unread message.
pub fn is_full(buf: &[u8], channel: Channel) -> bool {
    buf[channel.offset()] != 0
}

/// The message text in `channel`, whatever the flag says (up to the first NUL).
pub fn peek(buf: &[u8], channel: Channel) -> String {
    let data = &buf[channel.offset() + 1..channel.offset() + CHANNEL_SIZE];
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    String::from_utf8_lossy(&data[..end]).into_owned()
}

/// Reads and clears the message in `channel`; `None` if the flag is clear.
pub fn take(buf: &mut [u8], channel: Channel) -> Option<String> {
    if !is_full(buf, channel) {
        return None;
    }
    let msg = peek(buf, channel);
    buf[channel.offset()] = 0;
    Some(msg)
}

/// Writes `msg` (truncated to [`MAX_PAYLOAD`] bytes) if the channel is free, or always when
/// `overwrite` is set. Returns whether the message was written.
pub fn put(buf: &mut [u8], channel: Channel, msg: &str, overwrite: bool) -> bool {
    if !overwrite && is_full(buf, channel) {
        return false;
    }
    let bytes = truncated(msg);
    let start = channel.offset() + 1;
    buf[start..start + bytes.len()].copy_from_slice(bytes);
    buf[start + bytes.len()] = 0;
    buf[channel.offset()] = 1;
    true
}

fn truncated(msg: &str) -> &[u8] {
    let b = msg.as_bytes();
    &b[..b.len().min(MAX_PAYLOAD)]
}

/// Errors of the shared-memory segment.
#[derive(Debug, thiserror::Error)]
pub enum ShmemError {
    /// The file could not be created, sized or opened.
    #[error("cannot create {path}")]
    Create {
        /// The segment file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// mmap failed.
    #[error("cannot map {path}")]
    Map {
        /// The segment file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// A mapped `boinc_mmap_file`, the client's side of the channels.
#[derive(Debug)]
pub struct SharedMem {
    /// Start of the MAP_SHARED mapping of [`SHMEM_SIZE`] bytes; the app maps the same file.
    ptr: NonNull<u8>,
}

// SAFETY: the mapping is owned by this value and only accessed through `&self`/`&mut self`
// methods; the other party is a separate process, which no Rust aliasing rule covers.
unsafe impl Send for SharedMem {}

impl SharedMem {
    /// Creates (or reuses) the segment file at `path`, grows it to 8192 bytes if needed,
    /// maps it and zeroes every channel, as the client does before each start.
    pub fn create(path: &Path) -> Result<SharedMem, ShmemError> {
        let shm = SharedMem::map(path)?;
        shm.reset();
        Ok(shm)
    }

    /// Maps the segment file of an app that is already running (one a previous client
    /// started), keeping what the channels hold.
    pub fn open(path: &Path) -> Result<SharedMem, ShmemError> {
        SharedMem::map(path)
    }

    fn map(path: &Path) -> Result<SharedMem, ShmemError> {
        let create_err = |source| ShmemError::Create {
            path: path.to_owned(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o666)
            .open(path)
            .map_err(create_err)?;
        let len = file.metadata().map_err(create_err)?.len();
        if len < SHMEM_SIZE as u64 {
            file.set_len(SHMEM_SIZE as u64).map_err(create_err)?;
        }
        // SAFETY: a fresh shared mapping of a file we just sized to at least SHMEM_SIZE bytes.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SHMEM_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(ShmemError::Map {
                path: path.to_owned(),
                source: io::Error::last_os_error(),
            });
        }
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| ShmemError::Map {
            path: path.to_owned(),
            source: io::Error::other("null mapping"),
        })?;
        Ok(SharedMem { ptr })
    }

    /// Zeroes the whole segment.
    pub fn reset(&self) {
        // SAFETY: the mapping is SHMEM_SIZE bytes long and writable.
        unsafe { std::ptr::write_bytes(self.ptr.as_ptr(), 0, SHMEM_SIZE) };
    }

    fn flag(&self, channel: Channel) -> &AtomicU8 {
        // SAFETY: the offset is inside the mapping, which lives as long as `self`; u8 has no
        // alignment requirement and the byte is only accessed atomically on our side.
        unsafe { AtomicU8::from_ptr(self.ptr.as_ptr().add(channel.offset())) }
    }

    /// Whether `channel` holds an unread message.
    pub fn is_full(&self, channel: Channel) -> bool {
        self.flag(channel).load(Ordering::Acquire) != 0
    }

    /// Sends `msg` if the channel is free; returns whether it was written.
    pub fn send(&self, channel: Channel, msg: &str) -> bool {
        if self.is_full(channel) {
            return false;
        }
        self.write_payload(channel, msg);
        true
    }

    /// Sends `msg` whatever the flag says.
    pub fn send_overwrite(&self, channel: Channel, msg: &str) {
        self.write_payload(channel, msg);
    }

    fn write_payload(&self, channel: Channel, msg: &str) {
        let bytes = truncated(msg);
        // SAFETY: offset + 1 + len + 1 ≤ offset + CHANNEL_SIZE, inside the mapping.
        unsafe {
            let dst = self.ptr.as_ptr().add(channel.offset() + 1);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len());
            dst.add(bytes.len()).write_volatile(0);
        }
        self.flag(channel).store(1, Ordering::Release);
    }

    /// Reads and clears the message in `channel`, if there is one.
    pub fn receive(&self, channel: Channel) -> Option<String> {
        if !self.is_full(channel) {
            return None;
        }
        let mut data = [0u8; CHANNEL_SIZE - 1];
        // SAFETY: the payload area lies inside the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(channel.offset() + 1),
                data.as_mut_ptr(),
                data.len(),
            );
        }
        self.flag(channel).store(0, Ordering::Release);
        let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
        Some(String::from_utf8_lossy(&data[..end]).into_owned())
    }

    /// A copy of the whole segment (for diagnostics and tests).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut v = vec![0u8; SHMEM_SIZE];
        // SAFETY: the mapping is SHMEM_SIZE bytes long.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), v.as_mut_ptr(), SHMEM_SIZE) };
        v
    }
}

impl Drop for SharedMem {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping this value owns; nothing refers to it afterwards.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), SHMEM_SIZE);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn channel_offsets_in_documented_order() {
        assert_eq!(Channel::ProcessControlRequest.offset(), 0);
        assert_eq!(Channel::GraphicsReply.offset(), 3072);
        assert_eq!(Channel::Heartbeat.offset(), 4096);
        assert_eq!(Channel::AppStatus.offset(), 5120);
        assert_eq!(Channel::TrickleDown.offset(), 7168);
    }

    #[test]
    fn put_respects_flag_and_truncates() {
        let mut buf = vec![0u8; SHMEM_SIZE];
        assert!(put(&mut buf, Channel::Heartbeat, "<heartbeat/>", false));
        assert!(!put(&mut buf, Channel::Heartbeat, "<other/>", false));
        assert_eq!(
            take(&mut buf, Channel::Heartbeat).as_deref(),
            Some("<heartbeat/>")
        );
        assert_eq!(take(&mut buf, Channel::Heartbeat), None);
        let long = "x".repeat(2000);
        assert!(put(&mut buf, Channel::AppStatus, &long, true));
        assert_eq!(peek(&buf, Channel::AppStatus).len(), MAX_PAYLOAD);
        // The neighbour channel is untouched.
        assert!(!is_full(&buf, Channel::TrickleUp));
    }

    #[test]
    fn mapped_file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MMAP_FILE_NAME);
        std::fs::write(&path, b"junk").unwrap();
        let shm = SharedMem::create(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), SHMEM_SIZE as u64);
        assert!(shm.snapshot().iter().all(|&b| b == 0));
        assert!(shm.send(Channel::ProcessControlRequest, "<quit/>"));
        assert!(!shm.send(Channel::ProcessControlRequest, "<abort/>"));
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(
            peek(&on_disk, Channel::ProcessControlRequest),
            "<quit/>".to_string()
        );
        assert!(is_full(&on_disk, Channel::ProcessControlRequest));
        assert_eq!(
            shm.receive(Channel::ProcessControlRequest).as_deref(),
            Some("<quit/>")
        );
        assert!(!shm.is_full(Channel::ProcessControlRequest));
    }
}
