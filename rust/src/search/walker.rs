//! The ONE walker configuration grep and glob share: ignore files, hidden entries, globs and file
//! types are applied the same way for both, and what they skipped is counted so the tools can say
//! so (and name the option that brings the skipped entries back).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::{Types, TypesBuilder};
use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};

use super::{SearchError, SkipStats};
use crate::confine::{Access, Roots};

/// Version-control metadata directories: never searched, even with `hidden`.
const VCS_DIRS: [&str; 6] = [".git", ".hg", ".svn", ".bzr", ".jj", ".sl"];

/// What makes the `ignore` crate apply rules in a directory: its ignore files, and `.git` (whose
/// `info/exclude` applies).
pub(super) const RULE_SOURCES: [&str; 3] = [".gitignore", ".ignore", ".git"];

#[derive(Debug, Clone, Default)]
pub struct WalkOptions {
    /// Include hidden (dot) files and directories.
    pub hidden: bool,
    /// Ignore .gitignore, .ignore, .git/info/exclude and git's global excludes.
    pub no_ignore: bool,
    /// Apply .gitignore only inside a git repository (ripgrep's default). toolroute's tools pass
    /// `false`: a .gitignore is honoured wherever it is, see docs/search.md.
    pub require_git: bool,
    /// rg-style globs relative to the start path; `!glob` excludes.
    pub globs: Vec<String>,
    /// ripgrep file type names (`py`, `rust`...); `!name` excludes the type.
    pub types: Vec<String>,
    /// Follow symlinks; each followed link must resolve inside the roots.
    pub follow_symlinks: bool,
    /// Worker threads; 0 picks the number of CPUs (at most 12, like ripgrep).
    pub threads: usize,
}

/// A confined, validated walk: the start path is inside the roots and the filters compiled.
pub struct Walker {
    roots: Roots,
    start: PathBuf,
    opts: WalkOptions,
    filters: Filters,
}

/// The caller's glob and type filters, applied after the ignore rules (see `Walker::builder`).
#[derive(Clone)]
pub(super) struct Filters {
    globs: Override,
    types: Types,
    /// Some glob is a `!` exclusion: only those can reject a directory (types never do).
    excludes: bool,
}

impl Filters {
    fn new(globs: Override, types: Types) -> Self {
        let excludes = globs.num_ignores() > 0;
        Self {
            globs,
            types,
            excludes,
        }
    }

    pub(super) fn rejects(&self, path: &Path, is_dir: bool) -> bool {
        if is_dir && !self.excludes {
            return false;
        }
        self.globs.matched(path, is_dir).is_ignore() || self.types.matched(path, is_dir).is_ignore()
    }
}

pub(super) fn is_vcs_dir(name: &OsStr) -> bool {
    VCS_DIRS.iter().any(|v| name == OsStr::new(v))
}

pub(super) fn is_hidden(name: &OsStr) -> bool {
    name.as_encoded_bytes().first() == Some(&b'.')
}

/// Whether `dir` holds an ignore file or a repository; `probe` is a reused path buffer.
fn has_rule_source(dir: &Path, probe: &mut PathBuf) -> bool {
    RULE_SOURCES.iter().any(|name| {
        probe.clear();
        probe.push(dir);
        probe.push(name);
        probe.symlink_metadata().is_ok()
    })
}

/// What a visitor does per file: almost nothing (glob), or enough to share the files out (grep).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerFile {
    Cheap,
    Costly,
}

/// A file the walk found, as the visitors see it.
pub struct Found<'a> {
    path: &'a Path,
    source: Source<'a>,
}

enum Source<'a> {
    Walked(&'a DirEntry),
    Listed(Option<&'a std::fs::DirEntry>),
}

impl<'a> Found<'a> {
    pub(super) fn listed(path: &'a Path, entry: Option<&'a std::fs::DirEntry>) -> Self {
        Self {
            path,
            source: Source::Listed(entry),
        }
    }

    pub fn path(&self) -> &Path {
        self.path
    }

    /// The file's metadata (a followed link's target's when links are followed).
    pub fn metadata(&self) -> Option<std::fs::Metadata> {
        match self.source {
            Source::Walked(dent) => dent.metadata().ok(),
            // Relative to the listed directory: no path lookup from the root.
            Source::Listed(Some(entry)) => entry.metadata().ok(),
            Source::Listed(None) => std::fs::symlink_metadata(self.path).ok(),
        }
    }
}

fn build_filter(start: &Path, globs: &[String]) -> Result<Override, SearchError> {
    let mut builder = OverrideBuilder::new(start);
    for glob in globs {
        builder.add(glob).map_err(|e| SearchError::Glob {
            glob: glob.clone(),
            reason: e.to_string(),
        })?;
    }
    builder.build().map_err(|e| SearchError::Glob {
        glob: globs.join(" "),
        reason: e.to_string(),
    })
}

fn build_types(names: &[String]) -> Result<Types, SearchError> {
    if names.is_empty() {
        // Building the ~150 default definitions costs more than a small walk.
        return Ok(Types::empty());
    }
    let mut builder = TypesBuilder::new();
    builder.add_defaults();
    for name in names {
        match name.strip_prefix('!') {
            Some(negated) => builder.negate(negated),
            None => builder.select(name),
        };
    }
    builder.build().map_err(|e| {
        let known: Vec<String> = TypesBuilder::new()
            .add_defaults()
            .definitions()
            .iter()
            .map(|d| d.name().to_string())
            .collect();
        let hint = names
            .iter()
            .filter_map(|n| {
                let n = n.trim_start_matches('!');
                known
                    .iter()
                    .filter(|k| strsim::jaro_winkler(k, n) > 0.85)
                    .max_by(|a, b| {
                        strsim::jaro_winkler(a, n).total_cmp(&strsim::jaro_winkler(b, n))
                    })
                    .cloned()
            })
            .collect::<Vec<_>>();
        let mut message = format!(
            "{e} (file types are ripgrep's names, e.g. py, rust, js, ts, go, java, c, cpp, md)"
        );
        if !hint.is_empty() {
            message.push_str(&format!("; did you mean {}?", hint.join(", ")));
        }
        SearchError::Type(message)
    })
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(12))
}

impl Walker {
    /// Confine `path` (default: the workspace root) and compile the filters.
    pub fn new(roots: &Roots, path: Option<&str>, opts: WalkOptions) -> Result<Self, SearchError> {
        let start = match path {
            None | Some("") => roots.workspace().to_path_buf(),
            Some(p) => roots.resolve(p, Access::Read)?,
        };
        if !start.exists() {
            return Err(SearchError::Argument(format!(
                "path {:?} does not exist",
                path.unwrap_or(".")
            )));
        }
        let filter = build_filter(&start, &opts.globs)?;
        let types = build_types(&opts.types)?;
        Ok(Self {
            roots: roots.clone(),
            start,
            opts,
            filters: Filters::new(filter, types),
        })
    }

    pub fn start(&self) -> &Path {
        &self.start
    }

    pub fn roots(&self) -> &Roots {
        &self.roots
    }

    pub fn follows_symlinks(&self) -> bool {
        self.opts.follow_symlinks
    }

    /// How a path is shown: relative to the workspace when inside it, absolute otherwise.
    pub fn display(&self, path: &Path) -> String {
        // On the bytes: `Path::strip_prefix` parses both paths into components for every result.
        // Walked paths are the start path joined with names, so they carry no `.` or `//`.
        let full = path.as_os_str().as_encoded_bytes();
        let shown = match full.strip_prefix(self.workspace_bytes()) {
            Some([]) => b".".as_slice(),
            Some([b'/', rel @ ..]) if !rel.is_empty() => rel,
            // The workspace root itself is `/`.
            Some(rel) if self.workspace_bytes().ends_with(b"/") => rel,
            _ => full,
        };
        String::from_utf8_lossy(shown).into_owned()
    }

    fn workspace_bytes(&self) -> &[u8] {
        self.roots.workspace().as_os_str().as_encoded_bytes()
    }

    pub(super) fn options(&self) -> &WalkOptions {
        &self.opts
    }

    pub(super) fn filters(&self) -> &Filters {
        &self.filters
    }

    fn threads(&self) -> usize {
        if self.opts.threads == 0 {
            default_threads()
        } else {
            self.opts.threads
        }
    }

    fn builder(&self, filtered: &Arc<AtomicU64>) -> WalkBuilder {
        let o = &self.opts;
        let respect = !o.no_ignore;
        let mut b = WalkBuilder::new(&self.start);
        b.hidden(!o.hidden)
            .ignore(respect)
            .git_ignore(respect)
            .git_global(respect)
            .git_exclude(respect)
            .parents(respect)
            .require_git(o.require_git)
            .follow_links(o.follow_symlinks)
            .threads(self.threads());
        // Globs and types are applied here, after the ignore rules (ripgrep applies globs before
        // them, so a glob can re-include an ignored file: BurntSushi/ripgrep#1808; here only
        // `no_ignore` does that). The walker calls this only for entries the ignore rules and the
        // hidden check let through, so counting rejections here separates "filtered by the
        // caller's glob/type" from "ignored" without matching anything twice.
        let filters = self.filters.clone();
        let filtered = Arc::clone(filtered);
        b.filter_entry(move |dent| {
            let is_dir = dent.file_type().is_some_and(|t| t.is_dir());
            let rejected =
                (is_dir && is_vcs_dir(dent.file_name())) || filters.rejects(dent.path(), is_dir);
            if rejected {
                filtered.fetch_add(1, Ordering::Relaxed);
            }
            !rejected
        });
        b
    }

    /// Whether rules are known to apply before walking: ignore files or a repository in the start
    /// directory (the common case: a repository's root) or a parent of it, or git's global
    /// excludes.
    fn rules_at_start(&self) -> bool {
        let mut probe = PathBuf::new();
        for dir in self.start.ancestors() {
            if has_rule_source(dir, &mut probe) {
                return true;
            }
        }
        !ignore::gitignore::Gitignore::global().0.is_empty()
    }

    /// Walk in parallel; `make` builds one visitor per worker thread, called for every file (after
    /// symlinks are resolved and checked). Returns what was skipped.
    ///
    /// A tree no ignore rule can reach takes the quick walk (`quick.rs`): one listing per
    /// directory. Otherwise the classic walk on the `ignore` crate lists each visited directory a
    /// second time to count what the rules ignored. A quick walk that meets a rule source gives
    /// up (at once when the start directory has one, as a repository's root does), and `reset`
    /// must then drop what the visitors produced before the classic walk starts over.
    pub fn walk<F, V>(&self, per_file: PerFile, make: F, reset: &dyn Fn()) -> SkipStats
    where
        F: Fn() -> V + Sync,
        V: FnMut(&Found<'_>, &mut SkipStats) + Send,
    {
        let o = &self.opts;
        if !o.follow_symlinks && (o.no_ignore || !self.rules_at_start()) {
            if let Some(stats) = super::quick::walk(self, self.threads(), per_file, &make) {
                return stats;
            }
            reset();
        }
        self.walk_classic(&make)
    }

    fn walk_classic<F, V>(&self, make: &F) -> SkipStats
    where
        F: Fn() -> V + Sync,
        V: FnMut(&Found<'_>, &mut SkipStats) + Send,
    {
        let total = Mutex::new(SkipStats::default());
        let filtered = Arc::new(AtomicU64::new(0));
        let mut builder = VisitorBuilder {
            walker: self,
            make,
            total: &total,
        };
        self.builder(&filtered).build_parallel().visit(&mut builder);
        let mut stats = total.into_inner().unwrap_or_else(|e| e.into_inner());
        let explained = stats.visited + filtered.load(Ordering::Relaxed);
        stats.ignored = stats.candidates.saturating_sub(explained);
        stats.classic = true;
        stats
    }

    /// Count a directory's children by name only: hidden ones (when `hidden` is off) and the
    /// rest, the candidates. Candidates the walker neither yields nor filters were ignored.
    fn classify_children(&self, dir: &Path, stats: &mut SkipStats) {
        let Ok(read) = std::fs::read_dir(dir) else {
            return;
        };
        for child in read.flatten() {
            let name = child.file_name();
            if self.opts.hidden || !is_hidden(&name) {
                stats.candidates += 1;
                continue;
            }
            let is_dir = child.file_type().is_ok_and(|t| t.is_dir());
            // Not worth a notice: VCS dirs, and hidden entries the glob/type would drop anyway.
            if !(self.filters.rejects(&child.path(), is_dir) || is_dir && is_vcs_dir(&name)) {
                stats.hidden += 1;
            }
        }
    }

    /// A followed symlink must land inside the roots; `None` means skip it.
    fn confined_target(&self, dent: &DirEntry, stats: &mut SkipStats) -> Option<()> {
        if !dent.path_is_symlink() {
            return Some(());
        }
        let resolved = dent.path().canonicalize().ok()?;
        let shown = dent.path().to_string_lossy();
        match self.roots.check_resolved(&shown, resolved, Access::Read) {
            Ok(_) => Some(()),
            Err(_) => {
                stats.outside_roots += 1;
                None
            }
        }
    }
}

struct VisitorBuilder<'a, F> {
    walker: &'a Walker,
    make: &'a F,
    total: &'a Mutex<SkipStats>,
}

impl<'s, 'a: 's, F, V> ParallelVisitorBuilder<'s> for VisitorBuilder<'a, F>
where
    F: Fn() -> V + Sync,
    V: FnMut(&Found<'_>, &mut SkipStats) + Send + 's,
{
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(Visitor {
            walker: self.walker,
            visit: (self.make)(),
            stats: SkipStats::default(),
            total: self.total,
        })
    }
}

struct Visitor<'a, V> {
    walker: &'a Walker,
    visit: V,
    stats: SkipStats,
    total: &'a Mutex<SkipStats>,
}

impl<V> ParallelVisitor for Visitor<'_, V>
where
    V: FnMut(&Found<'_>, &mut SkipStats) + Send,
{
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        let dent = match entry {
            Ok(dent) => dent,
            Err(err) => {
                // Symlink loops, unreadable directories, broken links: counted, never fatal.
                self.stats.errors += 1;
                if self.stats.first_errors.len() < 5 {
                    self.stats.first_errors.push(err.to_string());
                }
                // The entry was not skipped by a rule, so it must not be counted as ignored.
                self.stats.visited += 1;
                return WalkState::Continue;
            }
        };
        if dent.depth() > 0 && (self.walker.opts.hidden || !is_hidden(dent.file_name())) {
            self.stats.visited += 1;
        }
        if self.walker.opts.follow_symlinks
            && self
                .walker
                .confined_target(&dent, &mut self.stats)
                .is_none()
        {
            return WalkState::Skip;
        }
        match dent.file_type() {
            Some(t) if t.is_dir() => {
                self.walker.classify_children(dent.path(), &mut self.stats);
            }
            Some(t) if t.is_file() => {
                let found = Found {
                    path: dent.path(),
                    source: Source::Walked(&dent),
                };
                (self.visit)(&found, &mut self.stats);
            }
            _ => {}
        }
        WalkState::Continue
    }
}

impl<V> Drop for Visitor<'_, V> {
    fn drop(&mut self) {
        let mut total = self.total.lock().unwrap_or_else(|e| e.into_inner());
        total.merge(&self.stats);
    }
}
