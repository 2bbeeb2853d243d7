//! A multi-file transaction's journal, and the names of what a transaction stages.
//!
//! The journal (`.toolroute-<pid>-<start>-<n>.journal`, in the workspace root) is written whole,
//! in one write, before any temp exists: every temp with its destination and the digest of the
//! content it must hold, every removal, then `end`. It is synced with the temps, in one wave
//! (see [`crate::txn`]); there is no separate commit record. Recovery ([`crate::recover`]) rolls
//! a complete journal forward when every temp it names holds its digest's content (or its
//! destination already does), and back otherwise: a temp cut short by a crash, or lost with an
//! unsynced disk cache, cannot match.
//!
//! Version 3 (this one) carries the digests. Versions 1 and 2 (no digests; `end` written after
//! the temps were synced, so it was the commit point; version 2 adds `swap <i> <inode>` lines for
//! changes published by exchange) are still read, with their own rule.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use rustix::fs::{openat, unlinkat, AtFlags, Mode, OFlags};

use crate::beneath::{fd_path, Parent, Root};
use crate::hash::ContentDigest;

/// How toolroute's temps and journals are named (then the owner's pid and start time).
pub const TEMP_PREFIX: &str = ".toolroute-";
pub(crate) const MAGIC: &str = "toolroute-journal 3";
pub(crate) const MAGIC_V2: &str = "toolroute-journal 2";
pub(crate) const MAGIC_V1: &str = "toolroute-journal 1";
const JOURNAL_SUFFIX: &str = ".journal";

fn proc_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// This process's tag in staged names: pid and start time (pids are reused, start times not).
fn owner_tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let pid = std::process::id();
        format!("{pid}-{}", proc_start_time(pid).unwrap_or(0))
    })
}

/// A new transaction's id: its owner's tag and a number.
pub(crate) fn next_txid() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        owner_tag(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// The process a staged name's tag (`<pid>-<start>-…`) names: its pid and start time.
fn owner(tag: &str) -> Option<(u32, u64)> {
    let mut parts = tag.split(['-', '.']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Whether the process that staged `tag` is still running (or cannot be told apart from one).
fn owner_alive((pid, start): (u32, u64)) -> bool {
    if !Path::new("/proc/self/stat").exists() {
        return true; // cannot tell: never remove what might be live
    }
    proc_start_time(pid) == Some(start)
}

/// The name of temp `i` of transaction `txid`.
pub(crate) fn temp_name(txid: &str, i: usize) -> OsString {
    OsString::from(format!("{TEMP_PREFIX}{txid}.{i}.tmp"))
}

/// What every temp of transaction `txid` is named: this, then `<i>.tmp`.
pub(crate) fn temps_of(txid: &str) -> Vec<u8> {
    format!("{TEMP_PREFIX}{txid}.").into_bytes()
}

/// A staged name (temp or journal) of a process that is no longer running, by its name alone:
/// its transaction's id, and whether it is a journal.
pub(crate) fn dead_owner(name: &[u8]) -> Option<(String, bool)> {
    let tag = std::str::from_utf8(name.strip_prefix(TEMP_PREFIX.as_bytes())?).ok()?;
    let (txid, journal) = match tag.strip_suffix(JOURNAL_SUFFIX) {
        Some(txid) => (txid, true),
        None => (tag.strip_suffix(".tmp")?.rsplit_once('.')?.0, false),
    };
    (!owner_alive(owner(txid)?)).then(|| (txid.to_string(), journal))
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `dir`'s path relative to the workspace, plus `rest`.
fn ws_relative(ws: &Root, dir: BorrowedFd<'_>, rest: &[&OsStr]) -> io::Result<PathBuf> {
    let real = fd_path(dir)?;
    let rel = real
        .strip_prefix(ws.path())
        .map_err(|_| io::Error::other("a folder moved out of the workspace"))?;
    let mut out = rel.to_path_buf();
    out.extend(rest);
    Ok(out)
}

fn hex_path(path: &Path) -> String {
    toolroute_digest::hex(path.as_os_str().as_bytes())
}

/// One change as a journal records it before it is made: where, and, for a new file, whether it
/// may replace one there and the digest of its content (`None`: the name is removed).
pub(crate) struct Intent<'a> {
    /// The destination's folder (its deepest existing one) and name.
    pub dest: &'a Parent,
    /// A new file: `no_clobber`, and the digest of its content.
    pub new: Option<(bool, ContentDigest)>,
}

/// A journal being written (see the module's comment).
pub(crate) struct Journal {
    file: std::fs::File,
    name: OsString,
}

impl Journal {
    /// Write the whole journal of a transaction's changes, in order (change `i`'s temp is
    /// [`temp_name`]`(txid, i)`, in its destination's folder), unsynced: it is synced with the
    /// temps.
    pub(crate) fn write(ws: &Root, txid: &str, changes: &[Intent<'_>]) -> io::Result<Self> {
        let mut text = format!("{MAGIC}\n");
        for (i, c) in changes.iter().enumerate() {
            let p = c.dest;
            let mut rest: Vec<&OsStr> = p.missing.iter().map(|m| m.as_os_str()).collect();
            rest.push(p.name.as_os_str());
            let dest = hex_path(&ws_relative(ws, p.dir.as_fd(), &rest)?);
            match c.new {
                Some((no_clobber, digest)) => {
                    let tmp = ws_relative(ws, p.dir.as_fd(), &[temp_name(txid, i).as_os_str()])?;
                    text.push_str(&format!(
                        "put {} {dest} {} {}\n",
                        hex_path(&tmp),
                        u8::from(no_clobber),
                        toolroute_digest::hex(&digest)
                    ));
                }
                None => text.push_str(&format!("del {dest}\n")),
            }
        }
        text.push_str("end\n");
        let name = OsString::from(format!("{TEMP_PREFIX}{txid}{JOURNAL_SUFFIX}"));
        let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
        let fd = openat(ws.fd(), name.as_os_str(), flags, Mode::from_raw_mode(0o600))?;
        let mut file = std::fs::File::from(fd);
        if let Err(e) = file.write_all(text.as_bytes()) {
            let _ = unlinkat(ws.fd(), name.as_os_str(), AtFlags::empty());
            return Err(e);
        }
        Ok(Journal { file, name })
    }

    /// The open journal, for the wave that syncs it.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// The transaction is over (done, or undone): the journal goes.
    pub(crate) fn remove(self, ws: &Root) {
        let _ = unlinkat(ws.fd(), self.name.as_os_str(), AtFlags::empty());
    }
}

/// How recovery recognises a change's new file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NewFile {
    /// Version 3: by the digest of its content.
    Digest(ContentDigest),
    /// Versions 1 and 2: trusted once the journal has its `end`; `Some(inode)` when it was
    /// published by exchange (the temp's name then holds the old file).
    Trusted(Option<u64>),
}

/// One change, as a journal records it (paths relative to the workspace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A new file staged at `tmp`, to be renamed to `dest`.
    Put {
        tmp: PathBuf,
        dest: PathBuf,
        no_clobber: bool,
        new: NewFile,
    },
    /// A name to remove.
    Del { dest: PathBuf },
}

/// What a journal on disk says.
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    /// The entries read (all of them when `complete`).
    pub entries: Vec<Entry>,
    /// Whether it reached its `end` line. A journal cut short (even empty) names fewer temps
    /// than its transaction may have staged only after a power loss lost its content.
    pub complete: bool,
    /// Whether its new files are checked by digest (version 3).
    pub by_digest: bool,
}

/// Read the journal `name` in `dir`. Whatever cannot be read as a journal is one cut short.
pub(crate) fn read(dir: &OwnedFd, name: &OsStr) -> io::Result<Recorded> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = openat(dir, name, flags, Mode::empty())?;
    let mut bytes = Vec::new();
    std::fs::File::from(fd).read_to_end(&mut bytes)?;
    Ok(parse(&String::from_utf8_lossy(&bytes)))
}

fn parse(text: &str) -> Recorded {
    let mut lines = text.split_inclusive('\n');
    let mut out = Recorded::default();
    let version = match lines.next().and_then(|l| l.strip_suffix('\n')) {
        Some(MAGIC) => 3,
        Some(MAGIC_V2) => 2,
        Some(MAGIC_V1) => 1,
        _ => return out,
    };
    out.by_digest = version == 3;
    let path = |s: Option<&str>| -> Option<PathBuf> {
        Some(PathBuf::from(OsString::from_vec(unhex(s?)?)))
    };
    for line in lines {
        // A line cut by the crash is not part of the journal.
        let Some(line) = line.strip_suffix('\n') else {
            break;
        };
        let mut f = line.split(' ');
        let entry = match f.next() {
            Some("end") => {
                out.complete = true;
                break;
            }
            Some("swap") if version == 2 => {
                let i = f.next().and_then(|n| n.parse::<usize>().ok());
                let ino = f.next().and_then(|n| n.parse::<u64>().ok());
                match (i.and_then(|i| out.entries.get_mut(i)), ino) {
                    (Some(Entry::Put { new, .. }), Some(ino)) => *new = NewFile::Trusted(Some(ino)),
                    _ => break,
                }
                continue;
            }
            Some("put") => {
                let (tmp, dest) = (path(f.next()), path(f.next()));
                let no_clobber = f.next() == Some("1");
                let new = if version == 3 {
                    let digest = f.next().and_then(unhex).and_then(|d| d.try_into().ok());
                    digest.map(NewFile::Digest)
                } else {
                    Some(NewFile::Trusted(None))
                };
                tmp.zip(dest).zip(new).map(|((tmp, dest), new)| Entry::Put {
                    tmp,
                    dest,
                    no_clobber,
                    new,
                })
            }
            Some("del") => path(f.next()).map(|dest| Entry::Del { dest }),
            _ => None,
        };
        match entry {
            Some(e) => out.entries.push(e),
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(tmp: &str, dest: &str, digest: Option<ContentDigest>) -> String {
        let h = |s: &str| toolroute_digest::hex(s.as_bytes());
        match digest {
            Some(d) => format!(
                "put {} {} 0 {}\n",
                h(tmp),
                h(dest),
                toolroute_digest::hex(&d)
            ),
            None => format!("put {} {} 0\n", h(tmp), h(dest)),
        }
    }

    #[test]
    fn a_journal_is_complete_only_with_its_end_line() {
        let body = format!("{MAGIC}\n{}", put("t", "a", Some([7; 32])));
        let cut = parse(&body);
        assert!(!cut.complete && cut.by_digest);
        assert_eq!(cut.entries.len(), 1);
        let whole = parse(&format!("{body}end\n"));
        assert!(whole.complete);
        // An `end` cut before its newline is no end.
        assert!(!parse(&format!("{body}end")).complete);
    }

    #[test]
    fn a_put_without_its_digest_ends_a_version_3_journal() {
        let text = format!("{MAGIC}\n{}end\n", put("t", "a", None));
        let read = parse(&text);
        assert!(read.entries.is_empty() && !read.complete);
    }

    #[test]
    fn version_2_swap_lines_mark_the_exchanged_change() {
        let text = format!("{MAGIC_V2}\n{}swap 0 42\nend\n", put("t", "a", None));
        let read = parse(&text);
        assert!(read.complete && !read.by_digest);
        assert!(matches!(
            read.entries[0],
            Entry::Put {
                new: NewFile::Trusted(Some(42)),
                ..
            }
        ));
        // Version 3 has no swap lines: one is where the journal stops making sense.
        let v3 = format!("{MAGIC}\n{}swap 0 42\nend\n", put("t", "a", Some([1; 32])));
        assert!(!parse(&v3).complete);
    }

    #[test]
    fn names_of_dead_owners_are_known_by_their_tag() {
        // pid 1 with start time 1 is never a live toolroute process.
        assert_eq!(
            dead_owner(b".toolroute-1-1-7.3.tmp"),
            Some(("1-1-7".to_string(), false))
        );
        assert_eq!(
            dead_owner(b".toolroute-1-1-7.journal"),
            Some(("1-1-7".to_string(), true))
        );
        let live = format!("{TEMP_PREFIX}{}.0.tmp", next_txid());
        assert_eq!(dead_owner(live.as_bytes()), None);
        assert_eq!(dead_owner(b"notes.txt"), None);
        // Only names toolroute makes: a file the user called so is never taken for a temp.
        assert_eq!(dead_owner(b".toolroute-notes.1.tmp"), None);
        assert_eq!(dead_owner(b".toolroute-x.journal"), None);
    }
}
