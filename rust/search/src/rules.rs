//! Ignore rules for the descriptor walker: the `ignore` crate's matchers (`Gitignore`), read from
//! files opened by descriptor, stacked per directory with the crate's precedence.
//!
//! Precedence (as ripgrep): the nearest directory's rule wins; `.ignore` beats `.gitignore`, which
//! beats `.git/info/exclude`, which beats git's global excludes. `.gitignore` and `info/exclude`
//! stop applying at a repository boundary: the rules of directories above the nearest folder with
//! a `.git` (a repository's directory, or a submodule's or worktree's `.git` file) do not reach
//! into it. `.ignore` files are not git's and apply across the boundary.

use std::ffi::CStr;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::{fstat, openat, FileType, Mode, OFlags};

use toolroute_files::open_beneath;

/// Rule files larger than this are not read (a hostile or accidental huge file).
const MAX_RULE_FILE: u64 = 16 * 1024 * 1024;

/// One directory's rules; directories without any share their parent's level.
pub(super) struct Level {
    parent: Option<Arc<Level>>,
    ignore: Gitignore,
    gitignore: Gitignore,
    exclude: Gitignore,
    /// The directory holds `.git`: a repository boundary.
    has_git: bool,
}

/// What the rules say about one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    None,
    Ignore,
    /// A `!` rule matched: ripgrep then shows the entry even when it is hidden.
    Whitelist,
}

fn verdict<T>(m: ignore::Match<T>) -> Verdict {
    if m.is_ignore() {
        Verdict::Ignore
    } else if m.is_whitelist() {
        Verdict::Whitelist
    } else {
        Verdict::None
    }
}

/// The rule chain of a directory (innermost level first) plus the global excludes.
#[derive(Clone)]
pub(super) struct Rules {
    pub(super) top: Option<Arc<Level>>,
    global: Arc<Gitignore>,
    require_git: bool,
}

impl Rules {
    pub(super) fn new(require_git: bool) -> Self {
        Self {
            top: None,
            global: global_excludes(),
            require_git,
        }
    }

    /// No rules at all (`no_ignore`).
    pub(super) fn empty() -> Self {
        Self {
            top: None,
            global: Arc::new(Gitignore::empty()),
            require_git: false,
        }
    }

    /// Whether any rule can apply (else matching is skipped entirely).
    pub(super) fn is_empty(&self) -> bool {
        self.top.is_none() && self.global.is_empty()
    }

    fn levels(&self) -> impl Iterator<Item = &Level> {
        std::iter::successors(self.top.as_deref(), |l| l.parent.as_deref())
    }

    /// The rules' verdict on `abs` (an absolute path below every level's directory).
    pub(super) fn matched(&self, abs: &Path, is_dir: bool) -> Verdict {
        let any_git = !self.require_git || self.levels().any(|l| l.has_git);
        let (mut m_ignore, mut m_gi, mut m_ex) = (Verdict::None, Verdict::None, Verdict::None);
        let mut saw_git = false;
        for level in self.levels() {
            if m_ignore == Verdict::None {
                m_ignore = verdict(level.ignore.matched(abs, is_dir));
            }
            if any_git && !saw_git {
                if m_gi == Verdict::None {
                    m_gi = verdict(level.gitignore.matched(abs, is_dir));
                }
                if m_ex == Verdict::None {
                    m_ex = verdict(level.exclude.matched(abs, is_dir));
                }
            }
            saw_git |= level.has_git;
        }
        [m_ignore, m_gi, m_ex]
            .into_iter()
            .find(|v| *v != Verdict::None)
            .unwrap_or_else(|| {
                if any_git {
                    verdict(self.global.matched(abs, is_dir))
                } else {
                    Verdict::None
                }
            })
    }

    /// The rules for a child directory `dir` (absolute, `fd` open on it) whose listing showed
    /// which rule sources it holds.
    pub(super) fn child(&self, fd: BorrowedFd<'_>, dir: &Path, present: Present) -> Rules {
        if !present.any() {
            return self.clone();
        }
        let read = |name: &CStr| read_rule_file(fd, name);
        let build = |content: Option<Vec<u8>>, file: &str| match content {
            Some(bytes) => build_matcher(dir, &dir.join(file), &bytes),
            None => Gitignore::empty(),
        };
        let ignore = build(
            present.ignore.then(|| read(c".ignore")).flatten(),
            ".ignore",
        );
        let gitignore = build(
            present.gitignore.then(|| read(c".gitignore")).flatten(),
            ".gitignore",
        );
        let exclude = if present.git_dir {
            let file = open_beneath(
                fd,
                Path::new(".git/info/exclude"),
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK,
            )
            .ok()
            .and_then(read_regular);
            build(file, ".git/info/exclude")
        } else {
            Gitignore::empty()
        };
        let level = Level {
            parent: self.top.clone(),
            ignore,
            gitignore,
            exclude,
            has_git: present.git_dir || present.git_file,
        };
        Rules {
            top: Some(Arc::new(level)),
            ..self.clone()
        }
    }

    /// Rules from the ancestors of `start` (absolute, canonical), outermost first, read by path:
    /// they only ever hide entries, never show content. Each folder is opened once (by path, not
    /// following a final symlink) and its files read relative to it.
    pub(super) fn with_parents(mut self, start: &Path) -> Rules {
        let ancestors: Vec<&Path> = start.ancestors().skip(1).collect();
        for dir in ancestors.into_iter().rev() {
            let Ok(fd) = open_ancestor(dir) else {
                continue;
            };
            let present = Present::probe(fd.as_fd());
            self = self.child(fd.as_fd(), dir, present);
        }
        self
    }
}

/// A folder above a walk's root, opened by path to read its rule files (they only ever hide
/// entries), not following a final symlink. The walk's rules and the index cache's record of
/// the root's surroundings open them alike.
pub(crate) fn open_ancestor(dir: &Path) -> rustix::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::open(dir, flags, Mode::empty())
}

/// A folder's rule sources by name: `.ignore`, `.gitignore`, and `.git` (a repository boundary,
/// whose `info/exclude` holds rules too). The one list: the index's validation and watcher ask it.
pub(crate) const RULE_NAMES: [&CStr; 3] = [c".ignore", c".gitignore", c".git"];
/// The rules inside a repository's `.git`.
pub(crate) const GIT_EXCLUDE: &CStr = c".git/info/exclude";

/// Whether a folder entry named `name` is a rule source.
#[cfg_attr(any(not(target_os = "linux"), feature = "portable"), allow(dead_code))] // for the watch
pub(crate) fn is_rule_name(name: &[u8]) -> bool {
    RULE_NAMES.iter().any(|n| n.to_bytes() == name)
}

/// Which rule sources a directory listing showed.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Present {
    pub(super) ignore: bool,
    pub(super) gitignore: bool,
    pub(super) git_dir: bool,
    pub(super) git_file: bool,
}

impl Present {
    fn any(&self) -> bool {
        self.ignore || self.gitignore || self.git_dir || self.git_file
    }

    /// Note one listed name (its type known); true when it is a rule source.
    pub(super) fn note(&mut self, name: &[u8], file_type: FileType) -> bool {
        match name {
            b".ignore" => self.ignore = true,
            b".gitignore" => self.gitignore = true,
            b".git" if file_type == FileType::Directory => self.git_dir = true,
            b".git" => self.git_file = true,
            _ => return false,
        }
        true
    }

    /// For a directory not listed by the walk (an ancestor of the start).
    fn probe(fd: BorrowedFd<'_>) -> Self {
        let kind = |name: &CStr| {
            rustix::fs::statat(fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .map(|st| FileType::from_raw_mode(st.st_mode))
        };
        let mut present = Present::default();
        for name in RULE_NAMES {
            if let Some(t) = kind(name) {
                present.note(name.to_bytes(), t);
            }
        }
        present
    }
}

fn build_matcher(dir: &Path, file: &Path, bytes: &[u8]) -> Gitignore {
    let mut builder = GitignoreBuilder::new(dir);
    let text = String::from_utf8_lossy(bytes);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    for line in text.lines() {
        // A bad line is skipped, as the crate does when it reads the file itself.
        let _ = builder.add_line(Some(file.to_path_buf()), line);
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

/// Read a rule file in `dir` by descriptor: never following a symlink, never waiting on a FIFO.
fn read_rule_file(dir: BorrowedFd<'_>, name: &CStr) -> Option<Vec<u8>> {
    let fd = openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    read_regular(fd)
}

/// The content of `fd` when it is a regular file of a sane size.
pub(super) fn read_regular(fd: OwnedFd) -> Option<Vec<u8>> {
    let st = fstat(&fd).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
        || st.st_size as u64 > MAX_RULE_FILE
    {
        return None;
    }
    let mut bytes = Vec::with_capacity(st.st_size as usize);
    std::fs::File::from(fd)
        .take(MAX_RULE_FILE)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

/// git's global excludes (`core.excludesFile`, else `$XDG_CONFIG_HOME/git/ignore`), parsed once
/// per distinct HOME / XDG_CONFIG_HOME: reading git's config on every call costs more than a
/// small walk.
fn global_excludes() -> Arc<Gitignore> {
    type Cache = Mutex<Option<((Option<OsKey>, Option<OsKey>), Arc<Gitignore>)>>;
    type OsKey = std::ffi::OsString;
    static CACHE: Cache = Mutex::new(None);
    let key = (
        std::env::var_os("HOME"),
        std::env::var_os("XDG_CONFIG_HOME"),
    );
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((k, g)) = cache.as_ref() {
        if *k == key {
            return Arc::clone(g);
        }
    }
    let global = Arc::new(Gitignore::global().0);
    *cache = Some((key, Arc::clone(&global)));
    global
}

/// The absolute path of `rel` below `base` (for matching rules rooted at absolute folders).
pub(super) fn absolute(base: &Path, rel: &Path) -> PathBuf {
    if rel.as_os_str().is_empty() {
        base.to_path_buf()
    } else {
        base.join(rel)
    }
}
