//! Indexes kept on disk between processes, so a new process (a CLI call, a restarted agent, a
//! fresh replica) starts from the last one's index instead of scanning. One file per index key
//! in a private folder outside every workspace (`$XDG_CACHE_HOME/toolroute/index`, or
//! `TOOLROUTE_SEARCH_INDEX_CACHE`; `0` turns it off).
//!
//! A file is trusted only as far as it can be checked: it must be ours (owner, mode, a regular
//! file opened without following links, in a folder that is ours and private), whole (its
//! length and a CRC-32 over everything), of this build's format and version, for this key, and
//! made under the same surroundings (the rules above the root and git's global excludes, which
//! no stamp inside the tree covers). A file that fails any of these is removed and never read
//! further. What it says about the tree is then checked like any index without a watch
//! (`validate.rs`: every folder and file against its stamps) before it answers.
//!
//! Files are written to a fresh name and renamed into place, so a crash leaves the old file or
//! the new one, never half of one; at most `max_files()` files and `max_bytes()` in all are
//! kept, the least recently used go first.

use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{fstat, openat, unlinkat, AtFlags, Mode, OFlags};
use sha2::{Digest, Sha256};

use super::config::IndexConfig;
use super::key::{ident, Key};
use super::private;
use super::snapshot::{self, Contents, Enc};
use super::validate::dir_stamp;

const MAGIC: &[u8; 16] = b"toolroute-index\n";
/// Bumped whenever the layout, or what a walk records, changes.
const FORMAT: u32 = 1;
/// Files kept at once (each is one workspace's index): the least recently used go first.
fn max_files() -> usize {
    IndexConfig::current().cache_files
}
/// Bytes the cache files may take in all.
fn max_bytes() -> u64 {
    IndexConfig::current().cache_bytes
}
/// Larger indexes are not written (the file would cost more to read than a scan saves).
const MAX_FILE: u64 = 2 << 30;
/// A temporary file older than this was left by a crash.
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// The cache folder, if there is to be one.
fn folder() -> Option<PathBuf> {
    IndexConfig::current().cache
}

/// The cache folder opened (made first, private, when `make`: a save, not a look-up), when it
/// is ours, private and outside `root`.
fn open_folder(root: &Path, make: bool) -> Option<OwnedFd> {
    let (real, fd) = private_folder(make)?;
    (!real.starts_with(root)).then_some(fd)
}

/// The cache folder (made first, private, when `make`) and its canonical path, when it is ours
/// and private: the index files live here, and the index daemon's socket
/// (`daemon::place`).
pub(crate) fn private_folder(make: bool) -> Option<(PathBuf, OwnedFd)> {
    let dir = folder()?;
    if !dir.is_absolute() {
        return None;
    }
    if make {
        let mut builder = std::fs::DirBuilder::new();
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.recursive(true).create(&dir).ok()?;
    }
    let real = dir.canonicalize().ok()?;
    let fd = rustix::fs::open(
        &real,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = fstat(&fd).ok()?;
    private::ours_alone(&st).then_some((real, fd))
}

/// The file name for a key: a digest, so a root's path never shows in a name.
fn file_name(key: &Key) -> String {
    let mut h = Sha256::new();
    h.update(key_bytes(key));
    let digest = h.finalize();
    format!("{}.idx", toolroute_digest::hex(&digest[..16]))
}

fn key_bytes(key: &Key) -> Vec<u8> {
    let mut e = Enc::default();
    e.bytes(key.root.as_os_str().as_bytes());
    e.bool(key.hidden);
    e.bool(key.no_ignore);
    e.bool(key.require_git);
    e.0
}

/// What the walk depends on outside the tree, which no stamp in the tree covers: the root
/// itself, the rule files of every folder above it, and git's global excludes file (where the
/// config says it is, and what it is).
fn surroundings(key: &Key) -> Option<Vec<u8>> {
    let mut e = Enc::default();
    let (dev, ino) = ident(&rustix::fs::stat(&key.root).ok()?);
    e.u64(dev);
    e.u64(ino);
    for dir in key.root.ancestors().skip(1) {
        e.bytes(dir.as_os_str().as_bytes());
        let Ok(fd) = crate::rules::open_ancestor(dir) else {
            e.bool(false);
            continue;
        };
        e.bool(true);
        for rule in dir_stamp(fd.as_fd()).rules {
            let (ino, ctime) = rule.unwrap_or((0, -1));
            e.u64(ino);
            e.i128(ctime);
        }
    }
    match ignore::gitignore::gitconfig_excludes_path() {
        None => e.bool(false),
        Some(path) => {
            e.bool(true);
            e.bytes(path.as_os_str().as_bytes());
            let st = std::fs::metadata(&path).ok();
            let ident = st.map(|m| super::build::ident_of(&m));
            let (ino, size, ctime) = ident.unwrap_or((0, 0, -1));
            e.u64(ino);
            e.u64(size);
            e.i128(ctime);
        }
    }
    Some(e.0)
}

fn header(key: &Key, around: &[u8]) -> Enc {
    let mut e = Enc::default();
    e.0.extend_from_slice(MAGIC);
    e.u32(FORMAT);
    e.bytes(env!("CARGO_PKG_VERSION").as_bytes());
    e.bytes(&key_bytes(key));
    e.bytes(around);
    e
}

/// Write an index's encoded contents (`snapshot::encode`) for `key`. Best effort: a cache that
/// cannot be written is only a slower next start.
pub(crate) fn save(key: &Key, body: Enc) {
    let Some(around) = surroundings(key) else {
        return;
    };
    let head = header(key, &around);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&head.0);
    crc.update(&body.0);
    let crc = crc.finalize().to_le_bytes();
    if (head.0.len() + body.0.len() + crc.len()) as u64 > MAX_FILE {
        return;
    }
    let Some(dir) = open_folder(&key.root, true) else {
        return;
    };
    let name = file_name(key);
    if private::write_whole(&dir, &name, &[&head.0, &body.0, &crc]).is_err() {
        return;
    }
    trim(&dir, &name);
}

/// The index saved for `key`, if there is a whole one of ours made under the same
/// surroundings; anything else found under its name is removed.
pub(crate) fn load(key: &Key) -> Option<Contents> {
    let dir = open_folder(&key.root, false)?;
    let name = file_name(key);
    let fd = openat(&dir, name.as_str(), private::READ, Mode::empty()).ok()?;
    let contents = read_checked(fd, key);
    if contents.is_none() {
        let _ = unlinkat(&dir, name.as_str(), AtFlags::empty());
    }
    contents
}

fn read_checked(fd: OwnedFd, key: &Key) -> Option<Contents> {
    let st = fstat(&fd).ok()?;
    let ours = private::private_file(&st);
    let size = u64::try_from(st.st_size).ok()?;
    if !ours || size > MAX_FILE || size < (MAGIC.len() + 4) as u64 {
        return None;
    }
    // Used now: the least recently used files are the ones dropped.
    let now = rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_NOW,
        },
    };
    let _ = rustix::fs::futimens(&fd, &now);
    let mut bytes = Vec::with_capacity(size as usize);
    std::fs::File::from(fd)
        .take(size)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 != size {
        return None;
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    let crc = u32::from_le_bytes(tail.try_into().ok()?);
    if crc32fast::hash(body) != crc {
        return None;
    }
    let expected = header(key, &surroundings(key)?);
    if !body.starts_with(&expected.0) {
        return None;
    }
    let (from, to) = (expected.0.len(), body.len());
    snapshot::decode(&Arc::new(bytes), from, to)
}

/// Whether the process a temporary file's name says wrote it (`.tmp-<pid>-...`) has ended: it
/// was killed mid-save. A pid used again since keeps the file until it is old.
fn writer_gone(name: &[u8]) -> bool {
    let pid = name
        .strip_prefix(private::TEMP_PREFIX)
        .and_then(|rest| rest.split(|&b| b == b'-').next())
        .and_then(|digits| std::str::from_utf8(digits).ok()?.parse::<i32>().ok())
        .and_then(rustix::process::Pid::from_raw);
    match pid {
        Some(pid) => rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH),
        None => false,
    }
}

/// Keep at most `max_files()` files and `max_bytes()` in all (the least recently used go
/// first; the one just written stays) and clear a crash's temporary files.
fn trim(dir: &OwnedFd, keep: &str) {
    let Ok(entries) = rustix::fs::Dir::read_from(dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, u64, Vec<u8>)> = Vec::new();
    let mut total = 0u64;
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name().to_bytes().to_vec();
        if name.starts_with(b".") && !name.starts_with(private::TEMP_PREFIX) {
            continue;
        }
        let Ok(st) = rustix::fs::statat(dir, OsStr::from_bytes(&name), AtFlags::SYMLINK_NOFOLLOW)
        else {
            continue;
        };
        let modified = std::time::UNIX_EPOCH
            + std::time::Duration::new(st.st_mtime.max(0) as u64, st.st_mtime_nsec as u32);
        let size = u64::try_from(st.st_size).unwrap_or(0);
        if name.starts_with(private::TEMP_PREFIX) {
            if writer_gone(&name) || now.duration_since(modified).unwrap_or_default() > STALE_TMP {
                let _ = unlinkat(dir, OsStr::from_bytes(&name), AtFlags::empty());
            }
        } else if name.ends_with(b".idx") {
            total += size;
            if name != keep.as_bytes() {
                files.push((modified, size, name));
            }
        }
    }
    files.sort();
    let (max, budget) = (max_files(), max_bytes());
    let mut count = files.len() + 1;
    for (_, size, name) in &files {
        if count <= max && total <= budget {
            break;
        }
        if unlinkat(dir, OsStr::from_bytes(name), AtFlags::empty()).is_ok() {
            count -= 1;
            total = total.saturating_sub(*size);
        }
    }
}
