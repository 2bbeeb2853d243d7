//! Confined file I/O on top of [`crate::confine`]: reads that never block on a FIFO or device,
//! the pages read_file shows, and the preparation of writes (the folder and name a write goes
//! to, the file's current bytes and metadata, and the checks that keep them). The writes
//! themselves are done by [`crate::txn`], atomically.

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

use rustix::fs::{fstat, openat, readlinkat, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::beneath::{fd_path, Parent};
use crate::confine::{Access, Roots};
use crate::error::FsError;
use crate::hash::{digest_parts, ContentDigest};
use crate::text_style::{binary_kind, Encoding};

/// Who owns a file and how it may be used, as read before changing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Permission bits and file type (`st_mode`).
    pub mode: u32,
    /// The owner.
    pub uid: u32,
    /// The group.
    pub gid: u32,
    /// Hard links to it.
    pub nlink: u64,
    /// Its size in bytes.
    pub size: u64,
}

/// A file's bytes and metadata, as read before changing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    /// Its contents.
    pub bytes: Vec<u8>,
    /// Its metadata.
    pub meta: Meta,
}

/// What is at a write's destination before the write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Original {
    /// A regular file: its bytes and metadata.
    File(Existing),
    /// A symlink (only when the destination was taken without following it): its target.
    Link(Vec<u8>),
}

impl Original {
    /// The file, unless it is a link.
    pub fn file(&self) -> Option<&Existing> {
        match self {
            Original::File(e) => Some(e),
            Original::Link(_) => None,
        }
    }
}

/// Flags for every read: never wait on a FIFO or a device that was swapped in, never make a
/// terminal ours; what it is gets checked with `fstat` before a byte is read.
pub fn read_flags() -> OFlags {
    OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC
}

/// `fstat` an opened descriptor and refuse anything but a regular file.
pub fn regular_meta(fd: BorrowedFd<'_>, shown: &str) -> Result<Meta, FsError> {
    let st = fstat(fd).map_err(|e| FsError::io("stat", shown, e.into()))?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Ok(Meta {
            mode: crate::os::stat_mode(&st) & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            nlink: crate::os::link_count(&st),
            size: st.st_size as u64,
        }),
        FileType::Directory => Err(FsError::IsDir {
            path: shown.to_string(),
        }),
        other => Err(FsError::io(
            "read",
            shown,
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not a regular file ({other:?}); only regular files are read or written"),
            ),
        )),
    }
}

/// Read all of an opened regular file, at most `max_bytes`.
fn read_all(fd: OwnedFd, shown: &str, max_bytes: u64) -> Result<Existing, FsError> {
    let meta = regular_meta(fd.as_fd(), shown)?;
    if meta.size > max_bytes {
        return Err(FsError::TooLarge {
            path: shown.to_string(),
            size: meta.size,
            limit: max_bytes,
        });
    }
    let mut bytes = Vec::with_capacity(meta.size as usize);
    std::fs::File::from(fd)
        .take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FsError::io("read", shown, e))?;
    if bytes.len() as u64 > max_bytes {
        return Err(FsError::TooLarge {
            path: shown.to_string(),
            size: bytes.len() as u64,
            limit: max_bytes,
        });
    }
    Ok(Existing { bytes, meta })
}

impl Roots {
    /// Read a confined file; `Ok(None)` when nothing exists there.
    pub fn read_existing(
        &self,
        shown: &str,
        access: Access,
        max_bytes: u64,
    ) -> Result<Option<Existing>, FsError> {
        match self.open(shown, access, read_flags()) {
            Ok(fd) => read_all(fd, shown, max_bytes).map(Some),
            Err(FsError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Read at most `max_bytes` from the start of a confined file; the bytes and the full size.
    pub fn read_head(&self, shown: &str, max_bytes: u64) -> Result<(Vec<u8>, u64), FsError> {
        let fd = self.open(shown, Access::Read, read_flags())?;
        let meta = regular_meta(fd.as_fd(), shown)?;
        let mut bytes = Vec::with_capacity(meta.size.min(max_bytes) as usize);
        std::fs::File::from(fd)
            .take(max_bytes)
            .read_to_end(&mut bytes)
            .map_err(|e| FsError::io("read", shown, e))?;
        Ok((bytes, meta.size))
    }
}

/// Where a write goes and what is there now.
#[derive(Debug)]
pub struct Target {
    /// The path as the caller gave it (for messages).
    pub shown: String,
    /// The destination's folder, open, and its name there.
    pub parent: Parent,
    /// What is there now; `None` when nothing is.
    pub original: Option<Original>,
}

impl Target {
    /// The destination's path as the kernel sees it now (for display).
    pub fn resolved(&self) -> PathBuf {
        let mut out = fd_path(self.parent.dir.as_fd()).unwrap_or_default();
        out.extend(self.parent.missing.iter());
        out.push(&self.parent.name);
        out
    }

    /// The destination's name in its folder.
    pub fn name(&self) -> &OsString {
        &self.parent.name
    }

    /// The file there now, if it is a regular file.
    pub fn existing(&self) -> Option<&Existing> {
        self.original.as_ref().and_then(Original::file)
    }
}

/// Read what is at `name` in `dir` without following a link there.
fn read_at(
    dir: BorrowedFd<'_>,
    name: &OsString,
    shown: &str,
    max_bytes: u64,
) -> Result<Option<Original>, FsError> {
    match openat(
        dir,
        name.as_os_str(),
        read_flags() | OFlags::NOFOLLOW,
        Mode::empty(),
    ) {
        Ok(fd) => read_all(fd, shown, max_bytes).map(|e| Some(Original::File(e))),
        Err(Errno::NOENT) => Ok(None),
        Err(Errno::LOOP) => readlinkat(dir, name.as_os_str(), Vec::new())
            .map(|t| Some(Original::Link(t.into_bytes())))
            .map_err(|e| FsError::io("read", shown, e.into())),
        Err(e) => Err(FsError::from_io("open", shown, e.into())),
    }
}

impl Roots {
    /// Prepare a write to `shown`: the workspace folder and name it goes to (through a symlink
    /// in the last place when `follow_last`), and, when `read`, what is there now.
    pub fn target(
        &self,
        shown: &str,
        follow_last: bool,
        read: bool,
        max_bytes: u64,
    ) -> Result<Target, FsError> {
        let parent = self.parent(shown, follow_last)?;
        let original = if read && parent.missing.is_empty() {
            read_at(parent.dir.as_fd(), &parent.name, shown, max_bytes)?
        } else if parent.missing.is_empty() {
            // Not read, but a folder in the way is still refused here rather than at the rename.
            match rustix::fs::statat(
                &parent.dir,
                parent.name.as_os_str(),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            ) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                    return Err(FsError::IsDir {
                        path: shown.to_string(),
                    })
                }
                _ => None,
            }
        } else {
            None
        };
        Ok(Target {
            shown: shown.to_string(),
            parent,
            original,
        })
    }
}

/// How a rewrite may treat a file's permissions and links.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Permit {
    /// Rewrite files whose permission bits say read-only (their bits are kept).
    pub read_only_files: bool,
}

/// Refuse rewriting in place what toolroute would damage: a file with several hard links (an
/// atomic replace would split them: the other names keep the old content) and, unless
/// permitted, a read-only file (root could write it, the owner asked for it not to be).
pub fn check_rewrite(target: &Target, permit: Permit, in_place: bool) -> Result<(), FsError> {
    let Some(e) = target.existing() else {
        return Ok(());
    };
    if in_place && e.meta.nlink > 1 {
        return Err(FsError::refused(
            &target.shown,
            format!(
                "the file has {} hard links; toolroute replaces files atomically (a new file renamed \
                 over the old), which would leave the other names with the old content, so it refuses. \
                 Edit one of the names with another tool, or remove the extra links first",
                e.meta.nlink
            ),
        ));
    }
    check_writable(&target.shown, e.meta, permit)
}

/// The read-only refusal alone (also for deleting a file).
pub fn check_writable(shown: &str, meta: Meta, permit: Permit) -> Result<(), FsError> {
    if meta.mode & 0o222 == 0 && !permit.read_only_files {
        return Err(FsError::refused(
            shown,
            format!(
                "the file is read-only (mode {:04o}); nothing was changed. Pass write_read_only=true \
                 to change it anyway (its mode is kept)",
                meta.mode
            ),
        ));
    }
    Ok(())
}

/// A page of a text file for read_file: the bytes of lines `first..` (whole lines, at most
/// `max_lines`), read from the start only as far as needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The path as the kernel resolved it.
    pub resolved: PathBuf,
    /// The file's size in bytes.
    pub size: u64,
    /// The encoding the file's byte-order mark names, if it has one.
    pub bom: Option<Encoding>,
    /// Why the file is not text (from its first 8 KiB), if it is not.
    pub binary: Option<&'static str>,
    /// Set for UTF-16/32 files (by BOM): `body` is then the whole file (up to the byte cap)
    /// and the caller splits lines after decoding.
    pub whole: bool,
    /// The page's bytes (or the whole file, when `whole`).
    pub body: Vec<u8>,
    /// 1-based number of the first line in `body` (unless `whole`).
    pub first: usize,
    /// Lines in `body` (unless `whole`).
    pub lines: usize,
    /// Total lines of the file when the read reached its end, else `None`.
    pub total: Option<usize>,
    /// Bytes scanned from the start; less than `size` when the page ended first.
    pub scanned: u64,
    /// The byte cap stopped the scan before the end of the file.
    pub capped: bool,
    /// The digest of the whole file, when asked for and this read saw all of it (the
    /// stale-read guard's record, without reading the file again).
    pub digest: Option<ContentDigest>,
}

/// A folder's entries for read_file's listing: names (folders end in `/`), sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// The folder's path as the kernel resolved it.
    pub resolved: PathBuf,
    /// Its entries' names.
    pub names: Vec<String>,
}

/// What read_file found: a page of a file, or a folder's listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOutcome {
    /// A page of a file.
    Page(Page),
    /// A folder's entries.
    Dir(Listing),
}

const SNIFF: usize = 8192;
const CHUNK: usize = 64 * 1024;
/// Files up to this size are scanned to the end, so the total line count is exact.
const COUNT_ALL_BELOW: u64 = 1 << 20;

impl Roots {
    /// One call for read_file: open the path once, list it if it is a folder, else read lines
    /// `first..first+max_lines` (1-based), scanning no further than needed.
    pub fn read_page(
        &self,
        shown: &str,
        first: usize,
        max_lines: usize,
        max_bytes: u64,
    ) -> Result<ReadOutcome, FsError> {
        self.read_page_with(shown, first, max_lines, max_bytes, false)
    }

    /// [`Roots::read_page`]; with `digest`, the page also carries the whole file's digest when
    /// the read saw all of it.
    pub fn read_page_with(
        &self,
        shown: &str,
        first: usize,
        max_lines: usize,
        max_bytes: u64,
        digest: bool,
    ) -> Result<ReadOutcome, FsError> {
        let fd = self.open(shown, Access::Read, read_flags())?;
        let resolved = fd_path(fd.as_fd()).unwrap_or_else(|_| PathBuf::from(shown));
        let st = fstat(&fd).map_err(|e| FsError::io("stat", shown, e.into()))?;
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
            return list_dir(fd, resolved, shown).map(ReadOutcome::Dir);
        }
        let meta = regular_meta(fd.as_fd(), shown)?;
        let mut file = std::fs::File::from(fd);
        let cap = max_bytes.min(meta.size.max(1));
        let mut buf: Vec<u8> = Vec::with_capacity(cap.min(CHUNK as u64 * 2) as usize);
        let mut fill = |buf: &mut Vec<u8>, upto: u64| -> Result<bool, FsError> {
            // Read until `buf` holds `upto` bytes or the end; true at the end of the file.
            while (buf.len() as u64) < upto {
                let want = (upto - buf.len() as u64).min(CHUNK as u64 * 4) as usize;
                let at = buf.len();
                buf.resize(at + want, 0);
                let n = file
                    .read(&mut buf[at..])
                    .map_err(|e| FsError::io("read", shown, e))?;
                buf.truncate(at + n);
                if n == 0 {
                    return Ok(true);
                }
            }
            Ok(false)
        };
        let mut eof = fill(&mut buf, (SNIFF as u64).min(max_bytes))?;
        let head = &buf[..buf.len().min(SNIFF)];
        let bom = Encoding::by_bom(head);
        let binary = binary_kind(head);
        let wide = bom.is_some_and(Encoding::is_wide);
        if wide || meta.size <= COUNT_ALL_BELOW {
            eof = fill(&mut buf, max_bytes)? || eof;
        }
        // The mark itself is not text: the body leaves it out.
        let mark = bom.map_or(0, |enc| enc.bom().len());
        if wide {
            let capped = !eof && (buf.len() as u64) < meta.size;
            let scanned = buf.len() as u64;
            let digest = (digest && eof).then(|| digest_parts(&[&buf]));
            buf.drain(..mark.min(buf.len()));
            return Ok(ReadOutcome::Page(Page {
                resolved,
                size: meta.size,
                bom,
                binary,
                whole: true,
                scanned,
                body: buf,
                first,
                lines: 0,
                total: None,
                capped,
                digest,
            }));
        }
        // Find the start of line `first`, then the end of line `first + max_lines - 1`; small
        // files are scanned to the end so the total is exact, large ones stop at the page.
        let count_all = meta.size <= COUNT_ALL_BELOW;
        let last = first.max(1).saturating_add(max_lines.max(1)) - 1;
        let mut line = 1usize; // the line that starts at `line_start`
        let mut line_start = 0usize;
        let mut start: Option<usize> = (first <= 1).then_some(0);
        let mut end: Option<usize> = None;
        let mut scanned_to = 0usize;
        let mut stopped = false;
        loop {
            for nl in memchr::memchr_iter(b'\n', &buf[scanned_to..]) {
                let at = scanned_to + nl + 1;
                if line == last {
                    end = Some(at);
                }
                line += 1;
                line_start = at;
                if line == first {
                    start = Some(at);
                }
                if end.is_some() && !count_all {
                    stopped = true;
                    break;
                }
            }
            if stopped || eof || buf.len() as u64 >= max_bytes {
                break;
            }
            scanned_to = buf.len();
            let more = (buf.len() as u64 + CHUNK as u64 * 4).min(max_bytes);
            eof = fill(&mut buf, more)?;
        }
        let at_end = !stopped && (eof || buf.len() as u64 >= meta.size);
        let capped = !stopped && !at_end;
        // A last line without a newline still counts, when the scan saw the end.
        let tail = at_end && line_start < buf.len();
        let total = at_end.then(|| line - 1 + usize::from(tail));
        let start_at = match start {
            Some(0) => mark.min(buf.len()),
            Some(at) => at.min(buf.len()),
            None => buf.len(),
        };
        let end_at = end.unwrap_or(buf.len()).max(start_at);
        let body = buf[start_at..end_at].to_vec();
        // The whole file was read (to its end): its digest costs no second read.
        let digest = (digest && eof && !stopped).then(|| digest_parts(&[&buf]));
        let lines = memchr::memchr_iter(b'\n', &body).count()
            + usize::from(!body.is_empty() && !body.ends_with(b"\n"));
        Ok(ReadOutcome::Page(Page {
            resolved,
            size: meta.size,
            bom,
            binary,
            whole: false,
            body,
            first,
            lines,
            total,
            scanned: buf.len() as u64,
            capped,
            digest,
        }))
    }
}

fn list_dir(fd: OwnedFd, resolved: PathBuf, shown: &str) -> Result<Listing, FsError> {
    let dir = openat(
        &fd,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| FsError::io("list", shown, e.into()))?;
    let mut names = Vec::new();
    let mut entries =
        rustix::fs::Dir::read_from(&dir).map_err(|e| FsError::io("list", shown, e.into()))?;
    for entry in entries.by_ref() {
        let entry = entry.map_err(|e| FsError::io("list", shown, e.into()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "." || name == ".." {
            continue;
        }
        let is_dir = match entry.file_type() {
            FileType::Directory => true,
            FileType::Unknown | FileType::Symlink => {
                rustix::fs::statat(&dir, entry.file_name(), rustix::fs::AtFlags::empty())
                    .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory)
            }
            _ => false,
        };
        names.push(if is_dir { format!("{name}/") } else { name });
    }
    names.sort_by(|a, b| a.trim_end_matches('/').cmp(b.trim_end_matches('/')));
    Ok(Listing { resolved, names })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots_with(files: &[(&str, &[u8])]) -> (tempfile::TempDir, Roots) {
        let d = tempfile::tempdir().unwrap();
        for (p, b) in files {
            let path = d.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b).unwrap();
        }
        let r = Roots::new(d.path(), &[]).unwrap();
        (d, r)
    }

    fn page(r: &Roots, p: &str, first: usize, n: usize, cap: u64) -> Page {
        match r.read_page(p, first, n, cap).unwrap() {
            ReadOutcome::Page(p) => p,
            ReadOutcome::Dir(_) => panic!("a folder"),
        }
    }

    #[test]
    fn pages_of_small_and_large_files() {
        let big: Vec<u8> = (0..300_000)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let (_d, r) = roots_with(&[("s.txt", b"a\nb\nc"), ("big.txt", &big), ("e.txt", b"")]);
        let p = page(&r, "s.txt", 2, 5, 1 << 20);
        assert_eq!(
            (p.body.as_slice(), p.lines, p.total),
            (b"b\nc" as &[u8], 2, Some(3))
        );
        let p = page(&r, "s.txt", 3, 1, 1 << 20);
        assert_eq!((p.body.as_slice(), p.lines), (b"c" as &[u8], 1));
        let p = page(&r, "s.txt", 4, 1, 1 << 20);
        assert_eq!((p.lines, p.total), (0, Some(3)));
        let p = page(&r, "big.txt", 1, 20, 1 << 30);
        assert_eq!(p.lines, 20);
        assert_eq!(p.total, None);
        assert!(p.scanned < big.len() as u64 / 4);
        assert!(p.body.starts_with(b"line 0\n") && p.body.ends_with(b"line 19\n"));
        let p = page(&r, "big.txt", 1000, 2, 1 << 30);
        assert_eq!(p.body, b"line 999\nline 1000\n");
        let p = page(&r, "big.txt", 1, 20, 100);
        assert!(p.capped || p.scanned <= 100);
        let p = page(&r, "e.txt", 1, 5, 100);
        assert_eq!((p.lines, p.total), (0, Some(0)));
    }

    #[test]
    fn fifo_is_refused_never_waited_on() {
        let (d, r) = roots_with(&[]);
        let fifo = d.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            assert!(matches!(
                r.read_page("fifo", 1, 1, 10),
                Err(FsError::Io { .. })
            ));
            assert!(matches!(
                r.read_existing("fifo", Access::Read, 10),
                Err(FsError::Io { .. })
            ));
        }
    }

    #[test]
    fn directories_are_listed() {
        let (_d, r) = roots_with(&[("sub/x.txt", b"x"), ("a.txt", b"a")]);
        match r.read_page(".", 1, 1, 10).unwrap() {
            ReadOutcome::Dir(l) => assert_eq!(l.names, vec!["a.txt", "sub/"]),
            ReadOutcome::Page(_) => panic!("not a folder"),
        }
    }
}
