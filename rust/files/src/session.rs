//! What one session (a conversation) last saw of each file: the stale-read guard.
//!
//! A read records the digest of the whole file; a committed write records the digest of what it
//! wrote; a rewrite of an existing file is refused when the file's digest now differs from the
//! one recorded (someone else changed it since), and, in strict mode, when nothing was recorded
//! (the session never read it). Content, not modification times: a formatter that rewrites a
//! file with the same bytes, or a `touch`, refuses nothing.

use std::collections::HashMap;
use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::beneath::fd_path;
use crate::confine::{Access, Roots};
use crate::error::FsError;
use crate::fs::{read_flags, regular_meta, Target};
use crate::hash::{digest_parts, ContentDigest};

/// Most files one session remembers; past it, the oldest half is forgotten (a forgotten file is
/// a file never read: allowed, or refused in strict mode, with the same advice to read it).
const MAX_REMEMBERED: usize = 100_000;

/// One session's view of the files it read or wrote, keyed by resolved path.
#[derive(Debug, Default)]
pub struct Session {
    strict: bool,
    seen: Mutex<Seen>,
    /// Held by a writer from reading the file it rewrites to committing it, so concurrent writes
    /// of one session (parallel lanes of a batch) apply in order, each to what the one before
    /// left, instead of one silently undoing another.
    writing: Mutex<()>,
}

#[derive(Debug, Default)]
struct Seen {
    by_path: HashMap<PathBuf, (Known, u64)>,
    clock: u64,
}

/// What a session knows of a file's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    /// Its digest (a file read whole, or written by the session).
    Digest(ContentDigest),
    /// Its stamps, settled when taken (a page of a large file: hashing all of it would cost a
    /// page read many times over). Any write since changes the change time, which no process
    /// can set back, so equal stamps mean the same content.
    Stamp(Stamp),
}

/// The stamps of a file that any change of its content changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    #[allow(clippy::unnecessary_cast)] // the fields are narrower on some systems
    fn of(st: &rustix::fs::Stat) -> Self {
        Self {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            size: st.st_size as u64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
        }
    }

    /// Changed more than a second ago: a later change cannot share these stamps within the
    /// clock's granularity.
    fn settled(&self) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        self.ctime.0 + 1 < now
    }
}

/// Files larger than this, read a page of, are remembered by their settled stamps rather than
/// hashed whole (read_file reads smaller ones whole anyway, and hashes what it read).
const HASH_UP_TO: u64 = 1 << 20;

impl Session {
    /// A new session; `strict`: also refuse rewriting a file it never read.
    pub fn new(strict: bool) -> Self {
        Self {
            strict,
            seen: Mutex::default(),
            writing: Mutex::default(),
        }
    }

    /// Hold the session's writes back until the guard is dropped (see `writing`).
    pub fn exclusive(&self) -> std::sync::MutexGuard<'_, ()> {
        self.writing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a rewrite of a file never read is refused.
    pub fn strict(&self) -> bool {
        self.strict
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        // A panic while holding the lock leaves a valid map.
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Record that the session now knows `path` holds content with `digest`.
    pub fn note(&self, path: PathBuf, digest: ContentDigest) {
        self.remember(path, Known::Digest(digest));
    }

    fn remember(&self, path: PathBuf, known: Known) {
        let mut seen = self.seen();
        seen.clock += 1;
        let now = seen.clock;
        if seen.by_path.len() >= MAX_REMEMBERED && !seen.by_path.contains_key(&path) {
            let mut ages: Vec<u64> = seen.by_path.values().map(|(_, t)| *t).collect();
            let (_, median, _) = ages.select_nth_unstable(MAX_REMEMBERED / 2);
            let cutoff = *median;
            seen.by_path.retain(|_, (_, t)| *t > cutoff);
        }
        seen.by_path.insert(path, (known, now));
    }

    /// Forget `path` (it was removed by this session).
    pub fn forget(&self, path: &Path) {
        self.seen().by_path.remove(path);
    }

    /// The digest of what the session last saw at `path`, if it knows it by digest.
    pub fn known(&self, path: &Path) -> Option<ContentDigest> {
        match self.seen().by_path.get(path) {
            Some((Known::Digest(d), _)) => Some(*d),
            _ => None,
        }
    }

    fn record(&self, path: &Path) -> Option<Known> {
        self.seen().by_path.get(path).map(|(k, _)| *k)
    }

    /// Files the session remembers.
    pub fn len(&self) -> usize {
        self.seen().by_path.len()
    }

    /// Whether it remembers none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Refuse a rewrite of `target`'s existing file if it changed since the session saw it (or,
    /// strict, if the session never saw it). `bytes`: the file's current bytes, as read for the
    /// write. Call before the target's bytes are moved out.
    pub fn check(&self, target: &Target, bytes: &[u8]) -> Result<(), FsError> {
        let path = target.resolved();
        let fresh = match self.record(&path) {
            Some(Known::Digest(d)) => Some(d == digest_parts(&[bytes])),
            Some(Known::Stamp(then)) => Some(
                rustix::fs::statat(
                    &target.parent.dir,
                    target.parent.name.as_os_str(),
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                )
                .is_ok_and(|st| Stamp::of(&st) == then),
            ),
            None => None,
        };
        match fresh {
            Some(true) => Ok(()),
            Some(false) => Err(FsError::Stale {
                path: target.shown.clone(),
                reason: "it changed since you last read or wrote it (by another process, a \
                         command or the user)"
                    .into(),
            }),
            None if self.strict => Err(FsError::Stale {
                path: target.shown.clone(),
                reason: "you have not read it in this session".into(),
            }),
            None => Ok(()),
        }
    }

    /// Record what read_file just read at `shown` (a page, not the whole file): a large file
    /// whose stamps are settled by its stamps, any other by the digest of the whole file (read
    /// again by descriptor, streaming, up to `max_bytes`; a larger file is not recorded).
    pub fn note_read(&self, roots: &Roots, shown: &str, max_bytes: u64) -> Result<(), FsError> {
        let fd = roots.open(shown, Access::Read, read_flags())?;
        let Ok(meta) = regular_meta(fd.as_fd(), shown) else {
            return Ok(()); // a folder's listing records nothing
        };
        if meta.size > max_bytes {
            return Ok(());
        }
        let resolved = fd_path(fd.as_fd()).map_err(|e| FsError::io("resolve", shown, e))?;
        let stamp = rustix::fs::fstat(&fd).ok().map(|st| Stamp::of(&st));
        if let Some(stamp) = stamp.filter(|s| s.size > HASH_UP_TO && s.settled()) {
            self.remember(resolved, Known::Stamp(stamp));
            return Ok(());
        }
        let mut h = blake3::Hasher::new();
        let mut file = std::fs::File::from(fd);
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = file
                .read(&mut buf)
                .map_err(|e| FsError::io("read", shown, e))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        self.note(resolved, h.finalize().into());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::Original;

    /// A workspace holding `a.txt`, and its roots.
    fn ws() -> (tempfile::TempDir, Roots) {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.txt"), "one\n").unwrap();
        let r = Roots::new(d.path(), &[]).unwrap();
        (d, r)
    }

    /// Check a rewrite of `shown` as a writer does: against the bytes it reads now.
    fn check(s: &Session, r: &Roots, shown: &str) -> Result<(), FsError> {
        let target = r.target(shown, true, true, 1 << 20).unwrap();
        let bytes = match &target.original {
            Some(Original::File(e)) => e.bytes.clone(),
            _ => panic!("{shown} is not a file"),
        };
        s.check(&target, &bytes)
    }

    fn is_stale(result: Result<(), FsError>) -> bool {
        matches!(result, Err(FsError::Stale { .. }))
    }

    /// Why a rewrite was refused as stale (panics if it was not).
    fn stale_reason(result: Result<(), FsError>) -> String {
        match result {
            Err(FsError::Stale { reason, .. }) => reason,
            other => panic!("not refused as stale: {other:?}"),
        }
    }

    #[test]
    fn a_file_read_and_unchanged_may_be_rewritten() {
        let (_d, r) = ws();
        let s = Session::new(true);
        s.note_read(&r, "a.txt", 1 << 20).unwrap();
        assert!(check(&s, &r, "a.txt").is_ok());
    }

    #[test]
    fn a_file_changed_since_it_was_read_is_refused() {
        let (d, r) = ws();
        let s = Session::new(false);
        s.note_read(&r, "a.txt", 1 << 20).unwrap();
        std::fs::write(d.path().join("a.txt"), "two\n").unwrap();
        let reason = stale_reason(check(&s, &r, "a.txt"));
        assert!(reason.contains("changed since you last read"), "{reason}");
        // Read again, it may be rewritten.
        s.note_read(&r, "a.txt", 1 << 20).unwrap();
        assert!(check(&s, &r, "a.txt").is_ok());
    }

    #[test]
    fn the_same_bytes_put_back_or_touched_refuse_nothing() {
        // By content, not by time: a formatter writing the same bytes, or a touch.
        let (d, r) = ws();
        let s = Session::new(true);
        s.note_read(&r, "a.txt", 1 << 20).unwrap();
        std::fs::write(d.path().join("a.txt"), "two\n").unwrap();
        std::fs::write(d.path().join("a.txt"), "one\n").unwrap();
        let f = std::fs::File::options()
            .append(true)
            .open(d.path().join("a.txt"))
            .unwrap();
        f.set_modified(std::time::SystemTime::now()).unwrap();
        assert!(check(&s, &r, "a.txt").is_ok());
    }

    #[test]
    fn what_the_session_wrote_counts_as_read() {
        let (d, r) = ws();
        let s = Session::new(true);
        let path = d.path().canonicalize().unwrap().join("a.txt");
        s.note(path.clone(), digest_parts(&[b"one\n"]));
        assert!(check(&s, &r, "a.txt").is_ok());
        // Removed by the session, it is forgotten: strict refuses it as never read.
        s.forget(&path);
        assert!(s.known(&path).is_none());
        assert!(is_stale(check(&s, &r, "a.txt")));
    }

    #[test]
    fn a_file_never_read_is_refused_only_in_strict_mode() {
        let (_d, r) = ws();
        let reason = stale_reason(check(&Session::new(true), &r, "a.txt"));
        assert!(reason.contains("have not read it"), "{reason}");
        assert!(check(&Session::new(false), &r, "a.txt").is_ok());
    }

    #[test]
    fn a_large_file_remembered_by_its_stamps_is_refused_once_they_change() {
        let (d, r) = ws();
        let s = Session::new(true);
        let path = d.path().canonicalize().unwrap().join("a.txt");
        let st = rustix::fs::stat(&path).unwrap();
        s.remember(path.clone(), Known::Stamp(Stamp::of(&st)));
        assert!(s.known(&path).is_none(), "known by stamps, not by digest");
        assert!(check(&s, &r, "a.txt").is_ok());
        std::fs::write(&path, "one more\n").unwrap();
        assert!(is_stale(check(&s, &r, "a.txt")));
    }

    #[test]
    fn only_large_settled_files_are_remembered_by_stamps() {
        let (d, r) = ws();
        let s = Session::new(true);
        let big = vec![b'x'; (HASH_UP_TO + 1) as usize];
        std::fs::write(d.path().join("big.log"), &big).unwrap();
        // Just written: not settled, so hashed whole.
        s.note_read(&r, "big.log", 1 << 30).unwrap();
        let path = d.path().canonicalize().unwrap().join("big.log");
        assert_eq!(s.known(&path), Some(digest_parts(&[&big])));
        // Over the reader's limit: nothing is recorded.
        let s = Session::new(true);
        s.note_read(&r, "big.log", 10).unwrap();
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn stamps_settle_a_second_after_the_last_change() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let at = |ctime: i64| Stamp {
            dev: 1,
            ino: 2,
            size: 3,
            mtime: (ctime, 0),
            ctime: (ctime, 0),
        };
        assert!(at(now - 10).settled());
        assert!(!at(now).settled());
        assert!(!at(now - 1).settled());
    }

    #[test]
    fn one_writer_at_a_time() {
        let s = Session::new(false);
        let held = s.exclusive();
        assert!(s.writing.try_lock().is_err());
        drop(held);
        assert!(s.writing.try_lock().is_ok());
    }

    #[test]
    fn remembers_a_bounded_number_of_files() {
        let s = Session::new(false);
        for i in 0..(MAX_REMEMBERED + 10) {
            s.note(PathBuf::from(format!("/f{i}")), [0; 32]);
        }
        assert!(s.len() <= MAX_REMEMBERED / 2 + 11);
        // The newest are kept.
        assert!(s
            .known(Path::new(&format!("/f{}", MAX_REMEMBERED + 9)))
            .is_some());
        assert!(s.known(Path::new("/f0")).is_none());
    }

    #[test]
    fn digest_of_parts_is_the_digest_of_their_concatenation() {
        assert_eq!(digest_parts(&[b"ab", b"c"]), digest_parts(&[b"abc"]));
        assert_ne!(digest_parts(&[b"abc"]), digest_parts(&[b"abd"]));
    }
}
